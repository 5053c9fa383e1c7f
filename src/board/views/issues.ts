// The issues view: every issue of the company with its holder and the
// holder's heartbeat, filtered, sorted and shown a page at a time. Rows are
// kept per issue and updated cell by cell, so a live change (or the heartbeat
// clock) never rebuilds the table or moves the keyboard focus. DONE and
// CANCELLED issues are shown only when asked for (the "Show DONE and
// CANCELLED" box, or their chip). Rows can be selected, on the page shown
// only, for the bulk actions (views/bulk.ts). An OPEN issue that is not ready
// says "waiting", and under its title on what (views/waiting.ts); the
// "waiting" chip lists those.
import { byId, counted, fill, h, keepFocus, setText, shortId, span } from "../dom.js";
import { health, PRIORITY_ORDER, STATUSES, TERMINAL } from "../store.js";
import type { Issue, Store } from "../store.js";
import type { IssueStatus } from "../generated/graphql.js";
import { waitingWords, waitsOnCancelled } from "./waiting.js";

const PAGE_SIZE = 100;

type SortKey = "status" | "title" | "priority" | "key" | "assignee" | "heartbeat" | "epoch" | "attempts" | "created";

/** The columns after the row's checkbox; `tip` is the header's tooltip (the legend above the table says more). */
const COLUMNS: { key: SortKey; label: string; tip?: string }[] = [
  { key: "status", label: "Status" },
  { key: "title", label: "Title" },
  { key: "priority", label: "Priority" },
  { key: "key", label: "Key", tip: "Concurrency key: issues of one key share its limit on how many may be active at once" },
  { key: "assignee", label: "Assignee" },
  {
    key: "heartbeat",
    label: "Holder · heartbeat",
    tip: "The run holding the issue's checkout lock, its agent, and how long since the run's last heartbeat",
  },
  { key: "epoch", label: "Epoch", tip: "Lock epoch: the fencing token, one up each time the checkout changes hands" },
  { key: "attempts", label: "Attempts", tip: "Attempts used of allowed: one is counted each time a run starts the work" },
  { key: "created", label: "Created" },
];

/**
 * Where the cells with more than text are: the title's button, the key's span
 * (cut to a width, whole in its tooltip), the status's and the heartbeat's classes.
 */
const STATUS_CELL = COLUMNS.findIndex((c) => c.key === "status");
const TITLE_CELL = COLUMNS.findIndex((c) => c.key === "title");
const BEAT_CELL = COLUMNS.findIndex((c) => c.key === "heartbeat");
const KEY_CELL = COLUMNS.findIndex((c) => c.key === "key");

/** The chip after the statuses' that lists the waiting issues (OPEN, not ready). */
const WAITING = "waiting";

interface Row {
  tr: HTMLTableRowElement;
  box: HTMLInputElement;
  cells: HTMLTableCellElement[];
  /** Under the title: what a waiting issue waits on. */
  waits: HTMLElement;
  shown: string[];
}

export class IssuesView {
  private readonly statuses = new Set<IssueStatus | typeof WAITING>();
  /** Whether DONE and CANCELLED issues are listed when no chip picks statuses. */
  private showFinished = false;
  /** Selected issues: always a subset of the rows shown. */
  private readonly selected = new Set<string>();
  private visible: Issue[] = [];
  private readonly selectAll = h("input", { type: "checkbox", "aria-label": "Select every issue shown" });
  private agent = "";
  private text = "";
  private sort: { key: SortKey; dir: 1 | -1 } = { key: "priority", dir: 1 };
  private page = 0;
  private readonly rows = new Map<string, Row>();
  private readonly chips = new Map<IssueStatus | typeof WAITING, { button: HTMLButtonElement; count: HTMLSpanElement }>();
  private readonly tbody = byId<HTMLTableSectionElement>("issues-body");
  /** The server's clock at the last render (a delay ends by it, not by this page's clock). */
  private serverNow = 0;

  constructor(
    private readonly store: Store,
    private readonly open: (issueId: string) => void,
    /** Called when the selection changes. */
    private readonly onSelect: () => void = () => {},
    /** The server's time (ms) when this page's clock reads `now`. */
    private readonly serverTime: (now: number) => number = (now) => now,
  ) {
    byId<HTMLInputElement>("show-finished").addEventListener("change", (e) => {
      this.showFinished = (e.target as HTMLInputElement).checked;
      this.page = 0;
      this.render(Date.now());
    });
    this.selectAll.addEventListener("change", () => {
      for (const issue of this.visible) {
        if (this.selectAll.checked) this.selected.add(issue.id);
        else this.selected.delete(issue.id);
      }
      this.render(Date.now());
      this.onSelect();
    });
    byId<HTMLInputElement>("issue-search").addEventListener("input", (e) => {
      this.text = (e.target as HTMLInputElement).value.trim().toLowerCase();
      this.page = 0;
      this.render(Date.now());
    });
    byId<HTMLSelectElement>("issue-agent").addEventListener("change", (e) => {
      this.agent = (e.target as HTMLSelectElement).value;
      this.page = 0;
      this.render(Date.now());
    });
    byId("issues-prev").addEventListener("click", () => this.turn(-1));
    byId("issues-next").addEventListener("click", () => this.turn(1));
    fill(
      byId("issues-head"),
      h(
        "tr",
        {},
        h("th", { scope: "col", class: "select" }, this.selectAll),
        ...COLUMNS.map((c) =>
          h(
            "th",
            { scope: "col", "data-key": c.key, title: c.tip },
            h("button", { type: "button", class: "sort", onclick: () => this.sortBy(c.key) }, c.label),
          ),
        ),
      ),
    );
  }

  /** The selected issues, in the order shown. */
  selection(): Issue[] {
    return this.visible.filter((i) => this.selected.has(i.id));
  }

  clearSelection(): void {
    this.selected.clear();
    this.render(Date.now());
    this.onSelect();
  }

  private turn(by: number) {
    this.page += by;
    this.render(Date.now());
  }

  private sortBy(key: SortKey) {
    this.sort = { key, dir: this.sort.key === key ? (-this.sort.dir as 1 | -1) : 1 };
    this.render(Date.now());
  }

  private toggleStatus(status: IssueStatus | typeof WAITING) {
    if (this.statuses.has(status)) this.statuses.delete(status);
    else this.statuses.add(status);
    this.page = 0;
    this.render(Date.now());
  }

  /** The status chips with their counts (built once, so focus stays), and the agent filter's choices. */
  private renderFilters(waiting: number) {
    const counts = this.store.counts();
    for (const status of [...STATUSES, WAITING] as const) {
      let chip = this.chips.get(status);
      if (!chip) {
        chip = {
          button: h("button", { type: "button", class: `chip status-${status}`, onclick: () => this.toggleStatus(status) }),
          count: h("span", { class: "count" }),
        };
        chip.button.append(`${status} `, chip.count);
        byId("status-filter").append(chip.button);
        this.chips.set(status, chip);
      }
      const on = this.statuses.has(status);
      const what = status === WAITING ? "the waiting issues (OPEN, not ready)" : status;
      chip.button.setAttribute("aria-pressed", String(on));
      chip.button.title = on ? `Showing ${what}: click to stop filtering by it` : `Show only ${what} (with any other chip that is on)`;
      setText(chip.count, String(status === WAITING ? waiting : (counts.get(status) ?? 0)));
    }
    const finished = (counts.get("DONE") ?? 0) + (counts.get("CANCELLED") ?? 0);
    setText(byId("show-finished-label"), `Show DONE and CANCELLED (${finished.toLocaleString("en")})`);
    const select = byId<HTMLSelectElement>("issue-agent");
    if (select.options.length !== this.store.agents.size + 1) {
      fill(
        select,
        h("option", { value: "" }, "Any agent"),
        ...[...this.store.agents].map(([id, agent]) => h("option", { value: id, selected: id === this.agent }, agent.name)),
      );
    }
  }

  /** Whether an issue is OPEN but not ready now. */
  private isWaiting(issue: Issue): boolean {
    return issue.status === "OPEN" && this.store.waiting(issue, this.serverNow) !== null;
  }

  private matches(issue: Issue, waiting: boolean): boolean {
    if (this.statuses.size > 0) {
      if (!this.statuses.has(issue.status) && !(waiting && this.statuses.has(WAITING))) return false;
    } else if (!this.showFinished && TERMINAL.has(issue.status)) return false;
    if (this.agent) {
      const holder = this.store.holderRun(issue);
      if (issue.assigneeAgentId !== this.agent && holder?.agentId !== this.agent) return false;
    }
    if (
      this.text &&
      !issue.title.toLowerCase().includes(this.text) &&
      !issue.id.startsWith(this.text) &&
      !issue.concurrencyKey?.toLowerCase().includes(this.text)
    )
      return false;
    return true;
  }

  /** The visible order: each issue's sort key computed once, then one sort (10,000 issues in a few ms). */
  private sorted(issues: Issue[], now: number, waiting: ReadonlySet<string>): Issue[] {
    const store = this.store;
    const keyOf: Record<SortKey, (i: Issue) => string | number> = {
      // A waiting issue after the OPEN ones that are ready.
      status: (i) => STATUSES.indexOf(i.status) + (waiting.has(i.id) ? 0.5 : 0),
      title: (i) => i.title.toLowerCase(),
      priority: (i) => PRIORITY_ORDER[i.priority],
      key: (i) => i.concurrencyKey ?? "",
      assignee: (i) => store.agentName(i.assigneeAgentId),
      heartbeat: (i) => {
        const run = store.holderRun(i);
        return run ? now - Date.parse(run.lastHeartbeatAt) : -1;
      },
      epoch: (i) => i.lockEpoch,
      attempts: (i) => i.attemptCount,
      created: (i) => Date.parse(i.createdAt),
    };
    const key = keyOf[this.sort.key];
    const dir = this.sort.dir;
    const keyed = issues.map((issue) => ({ issue, key: key(issue), created: issue.createdAt, id: issue.id }));
    // Ties fall back to creation order (ISO timestamps sort as strings), then id: a stable, total order.
    keyed.sort((a, b) => (a.key !== b.key ? (a.key < b.key ? -dir : dir) : a.created < b.created ? -1 : a.created > b.created ? 1 : a.id < b.id ? -1 : 1));
    return keyed.map((k) => k.issue);
  }

  /** The cells of one issue, as text (then the line under the title), and the class of its heartbeat cell. */
  private cellsOf(issue: Issue, now: number): { text: string[]; beat: string; waiting: "" | "waiting" | "cancelled" } {
    const run = this.store.holderRun(issue);
    const held = issue.checkoutRunId ?? issue.executionRunId;
    let holder = "";
    let beat = "";
    if (held) {
      const state = health(run, now);
      const who = run ? `${this.store.agentName(run.agentId)} · run ${shortId(held)}` : `run ${shortId(held)}`;
      const age = run ? `heartbeat ${span(now - Date.parse(run.lastHeartbeatAt))} ago` : "…";
      holder = `${who} · ${state === "dead" ? `dead (${age})` : state === "warn" ? `${age}, overdue` : age}`;
      beat = state;
    }
    const waits = this.store.waiting(issue, this.serverNow);
    return {
      text: [
        waits ? `${issue.status} · waiting` : issue.status,
        issue.title,
        issue.priority,
        issue.concurrencyKey ?? "",
        this.store.agentName(issue.assigneeAgentId),
        holder,
        String(issue.lockEpoch),
        `${issue.attemptCount} / ${issue.maxAttempts}`,
        new Date(issue.createdAt).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" }),
        waits ? waitingWords(this.store, waits, this.serverNow) : "",
      ],
      beat,
      waiting: waits === null ? "" : waitsOnCancelled(waits) ? "cancelled" : "waiting",
    };
  }

  private row(issue: Issue): Row {
    let row = this.rows.get(issue.id);
    if (!row) {
      const cells = COLUMNS.map(() => h("td"));
      const title = h("button", { type: "button", class: "link", "data-focus": `issue:${issue.id}`, onclick: () => this.open(issue.id) });
      const waits = h("small", { class: "waits", hidden: true });
      cells[TITLE_CELL]!.append(title, waits);
      cells[KEY_CELL]!.append(h("span", { class: "key" }));
      const id = issue.id;
      const box = h("input", { type: "checkbox", "data-focus": `select:${id}` });
      box.addEventListener("change", () => {
        if (box.checked) this.selected.add(id);
        else this.selected.delete(id);
        this.render(Date.now());
        this.onSelect();
      });
      row = { tr: h("tr", { "data-issue": id }, h("td", { class: "select" }, box), ...cells), box, cells, waits, shown: [] };
      this.rows.set(issue.id, row);
    }
    return row;
  }

  render(now: number): void {
    this.serverNow = this.serverTime(now);
    const waiting = new Set<string>();
    for (const issue of this.store.issues.values()) if (this.isWaiting(issue)) waiting.add(issue.id);
    this.renderFilters(waiting.size);
    const all = this.sorted(
      [...this.store.issues.values()].filter((i) => this.matches(i, waiting.has(i.id))),
      now,
      waiting,
    );
    const pages = Math.max(1, Math.ceil(all.length / PAGE_SIZE));
    this.page = Math.min(Math.max(this.page, 0), pages - 1);
    const visible = all.slice(this.page * PAGE_SIZE, (this.page + 1) * PAGE_SIZE);
    this.visible = visible;
    // A row that leaves the page (filtered out, paged away) leaves the selection: bulk actions act on what is shown.
    const shownIds = new Set(visible.map((i) => i.id));
    let dropped = false;
    for (const id of this.selected) {
      if (!shownIds.has(id)) {
        this.selected.delete(id);
        dropped = true;
      }
    }
    const trs: HTMLTableRowElement[] = [];
    for (const issue of visible) {
      const row = this.row(issue);
      const title = issue.title;
      row.box.checked = this.selected.has(issue.id);
      if (row.shown[TITLE_CELL] !== title) row.box.setAttribute("aria-label", `Select “${title}”`);
      const { text, beat, waiting: waits } = this.cellsOf(issue, now);
      text.forEach((value, i) => {
        if (row.shown[i] === value) return;
        if (i === COLUMNS.length) {
          row.waits.textContent = value;
          row.waits.hidden = value === "";
          return;
        }
        const cell = row.cells[i]!;
        if (i === TITLE_CELL) cell.firstElementChild!.textContent = value;
        else if (i === KEY_CELL) {
          cell.firstElementChild!.textContent = value;
          if (value) cell.firstElementChild!.setAttribute("title", value);
          else cell.firstElementChild!.removeAttribute("title");
        } else cell.textContent = value;
      });
      row.shown = text;
      row.cells[STATUS_CELL]!.className = waits ? `status status-waiting${waits === "cancelled" ? " waits-cancelled" : ""}` : `status status-${issue.status}`;
      row.waits.className = waits === "cancelled" ? "waits waits-cancelled" : "waits";
      row.cells[BEAT_CELL]!.className = beat ? `beat beat-${beat}` : "beat";
      const changedAt = this.store.recentlyChanged.get(issue.id);
      row.tr.classList.toggle("changed", changedAt !== undefined && now - changedAt < 1500);
      trs.push(row.tr);
    }
    const current = [...this.tbody.children];
    if (current.length !== trs.length || current.some((tr, i) => tr !== trs[i])) keepFocus(this.tbody, () => this.tbody.replaceChildren(...trs));
    for (const [id, row] of this.rows) if (!row.tr.isConnected) this.rows.delete(id);
    for (const th of byId("issues-head").querySelectorAll("th")) {
      const key = th.getAttribute("data-key");
      if (key === this.sort.key) th.setAttribute("aria-sort", this.sort.dir === 1 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    setText(byId("issues-page"), `${counted(all.length, "issue")} · page ${this.page + 1} of ${pages}`);
    const chosen = this.selected.size;
    this.selectAll.checked = chosen > 0 && chosen === visible.length;
    this.selectAll.indeterminate = chosen > 0 && chosen < visible.length;
    if (dropped) this.onSelect();
    byId<HTMLButtonElement>("issues-prev").disabled = this.page === 0;
    byId<HTMLButtonElement>("issues-next").disabled = this.page >= pages - 1;
  }
}
