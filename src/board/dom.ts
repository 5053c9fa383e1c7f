// Building the page. Everything an agent or a board wrote (titles, reasons,
// names) reaches the DOM through `h`, as text nodes: nothing here parses HTML,
// so no text can become markup or script.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

/** An element with attributes (`on…` are listeners) and children, strings as text. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (typeof value === "function") el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el: Element, children: readonly Child[]): void {
  for (const child of children) {
    if (child == null || child === false) continue;
    el.append(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
}

/** "4 s", "3 min", "2 h": how long a span of milliseconds is, for ages and leases. */
export function span(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} d`;
}

/** "1 issue", "2 issues": a count with its noun, singular or plural. */
export function counted(n: number, noun: string, plural = `${noun}s`): string {
  return `${n.toLocaleString("en")} ${n === 1 ? noun : plural}`;
}

export function shortId(id: string | null | undefined): string {
  return id ? id.slice(0, 8) : "";
}

export function time(iso: string): string {
  return new Date(iso).toLocaleTimeString();
}

/**
 * Redraws a part of the page without losing the keyboard focus: the focused
 * element's `data-focus` key is found again in the new content and focused.
 */
export function keepFocus(container: Element, redraw: () => void): void {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.getAttribute("data-focus") : null;
  redraw();
  if (key === null || active?.isConnected) return;
  const again = container.querySelector<HTMLElement>(`[data-focus="${CSS.escape(key)}"]`);
  again?.focus({ preventScroll: true });
}

/** Sets an element's text only when it changes (live regions announce every write). */
export function setText(el: Element, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}
