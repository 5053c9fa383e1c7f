// The event tail: the company's ledger, newest first, live. Filter by agent
// (read from the server, so the whole ledger is searched) and by issue (title
// or id, among the events loaded); "Load older" pages back with beforeSeq,
// under the same agent filter. An issue opens its whole history.
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, fill, h, keepFocus, setText, shortId, time } from "../dom.js";
import { BoardTailDocument } from "../generated/graphql.js";
import { newerFirst } from "../store.js";
import type { LockEvent, Store } from "../store.js";

/** Rows drawn at most; the rest are a narrower filter away. */
const SHOWN = 500;

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
    open ? h("button", { type: "button", class: "link", "data-focus": `event:${e.seq}`, onclick: () => open(e.issueId) }, title) : title,
    e.agentId ? ` by ${store.agentName(e.agentId)}` : null,
    e.runId ? ` (run ${shortId(e.runId)})` : null,
    e.reason ? h("span", { class: "reason" }, ` — ${e.reason}`) : null,
  );
}

export class EventsView {
  private issue = "";
  private agent = "";
  /** Events read for a filter or with "load older", beyond the live tail the store keeps. */
  private readonly read = new Map<string, LockEvent>();

  constructor(
    private readonly api: Api,
    private readonly store: Store,
    private readonly companyId: string,
    private readonly open: (issueId: string) => void,
  ) {
    byId<HTMLInputElement>("event-issue").addEventListener("input", (e) => {
      this.issue = (e.target as HTMLInputElement).value.trim().toLowerCase();
      this.render();
    });
    byId<HTMLSelectElement>("event-agent").addEventListener("change", (e) => {
      this.agent = (e.target as HTMLSelectElement).value;
      this.render();
      if (this.agent) void this.readPage(null);
    });
    byId("events-older").addEventListener("click", () => {
      const oldest = this.candidates().at(-1)?.seq ?? null;
      void this.readPage(oldest);
    });
  }

  /** A page of the ledger, newest first, before `beforeSeq` (null: the newest), under the agent filter. */
  private async readPage(beforeSeq: string | null) {
    try {
      const { lockEvents } = await this.api.request(BoardTailDocument, { companyId: this.companyId, beforeSeq, agentId: this.agent || null });
      for (const e of lockEvents) this.read.set(e.seq, e);
      setText(byId("events-status"), lockEvents.length < 200 ? "That is all the ledger keeps for this filter." : "");
    } catch (err) {
      setText(byId("events-status"), err instanceof ApiError ? `Could not read older events: ${err.message}` : "Could not read older events.");
    }
    this.render();
  }

  private matches(e: LockEvent): boolean {
    if (this.agent && e.agentId !== this.agent) return false;
    if (!this.issue) return true;
    if (e.issueId.startsWith(this.issue)) return true;
    return (this.store.issues.get(e.issueId)?.title.toLowerCase() ?? "").includes(this.issue);
  }

  /** Every event known that matches the filters, newest first, each once. */
  private candidates(): LockEvent[] {
    const bySeq = new Map<string, LockEvent>();
    for (const e of this.store.tail) if (this.matches(e)) bySeq.set(e.seq, e);
    for (const e of this.read.values()) if (this.matches(e)) bySeq.set(e.seq, e);
    return [...bySeq.values()].sort(newerFirst);
  }

  render(): void {
    const select = byId<HTMLSelectElement>("event-agent");
    if (select.options.length !== this.store.agents.size + 1) {
      fill(
        select,
        h("option", { value: "" }, "Any agent"),
        ...[...this.store.agents].map(([id, agent]) => h("option", { value: id, selected: id === this.agent }, agent.name)),
      );
    }
    const shown = this.candidates().slice(0, SHOWN);
    const list = byId("events-list");
    keepFocus(list, () => fill(list, ...shown.map((e) => eventLine(this.store, e, this.open))));
  }
}
