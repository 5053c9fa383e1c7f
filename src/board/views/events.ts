// The event tail: the company's ledger, newest first, live. Filter by issue
// (id or title) or agent; an issue opens its whole history.
import { byId, fill, h, shortId, time } from "../dom.js";
import type { LockEvent, Store } from "../store.js";

/** Rows drawn at most; the rest are a filter or a "load older" away. */
const SHOWN = 300;

export function eventLine(store: Store, e: LockEvent, open?: (issueId: string) => void): HTMLLIElement {
  const title = store.issues.get(e.issueId)?.title ?? shortId(e.issueId);
  return h(
    "li",
    { class: `event kind-${e.kind}`, "data-seq": e.seq },
    h("span", { class: "seq" }, `#${e.seq}`),
    " ",
    h("time", { datetime: e.at }, time(e.at)),
    " ",
    h("strong", { class: "kind" }, e.kind),
    " → ",
    h("span", { class: `status status-${e.status}` }, e.status),
    " ",
    open ? h("button", { type: "button", class: "link", onclick: () => open(e.issueId) }, title) : null,
    e.agentId ? ` by ${store.agentName(e.agentId)}` : null,
    e.runId ? ` (run ${shortId(e.runId)})` : null,
    e.reason ? h("span", { class: "reason" }, ` — ${e.reason}`) : null,
  );
}

export class EventsView {
  private issue = "";
  private agent = "";

  constructor(
    private readonly store: Store,
    private readonly open: (issueId: string) => void,
    loadOlder: () => Promise<void>,
  ) {
    byId<HTMLInputElement>("event-issue").addEventListener("input", (e) => {
      this.issue = (e.target as HTMLInputElement).value.trim().toLowerCase();
      this.render();
    });
    byId<HTMLSelectElement>("event-agent").addEventListener("change", (e) => {
      this.agent = (e.target as HTMLSelectElement).value;
      this.render();
    });
    byId("events-older").addEventListener("click", () => void loadOlder().then(() => this.render()));
  }

  private matches(e: LockEvent): boolean {
    if (this.agent && e.agentId !== this.agent) return false;
    if (!this.issue) return true;
    if (e.issueId.startsWith(this.issue)) return true;
    return (this.store.issues.get(e.issueId)?.title.toLowerCase() ?? "").includes(this.issue);
  }

  render(): void {
    const select = byId<HTMLSelectElement>("event-agent");
    if (select.options.length !== this.store.agents.size + 1) {
      fill(select, h("option", { value: "" }, "Any agent"), ...[...this.store.agents].map(([id, name]) => h("option", { value: id, selected: id === this.agent }, name)));
    }
    const shown = this.store.tail.filter((e) => this.matches(e)).slice(0, SHOWN);
    fill(byId("events-list"), ...shown.map((e) => eventLine(this.store, e, this.open)));
  }
}
