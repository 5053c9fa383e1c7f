// One issue, opened from any view: its fields (whether it is ready, and if
// not what it waits on), its place in the work graph (views/graph.ts), its
// whole history from the ledger, and the operator's fixes (force-release with
// a reason, requeue, cancel, change the concurrency key, raise max attempts,
// clear a delay), each offered only where the issue's status allows it
// (actionsFor). Each fix is confirmed first and its answer, a Problem
// included, is shown as the server gave it.
import type { Api } from "../api.js";
import { ApiError, prunedThrough } from "../api.js";
import { clockTime } from "../clock.js";
import { byId, fill, h, shortId, span } from "../dom.js";
import {
  BoardForceReleaseDocument,
  BoardHistoryDocument,
  BoardIssueDetailDocument,
  BoardOldestEventDocument,
  BoardUpdateIssueDocument,
} from "../generated/graphql.js";
import type { UpdateIssueInput } from "../generated/graphql.js";
import { actionsFor, health } from "../store.js";
import type { Issue, LockEvent, Store } from "../store.js";
import { eventLine } from "./events.js";
import { GraphPanel } from "./graph.js";
import { blockerWords } from "./waiting.js";

type Answer = { __typename: string; message?: string; issue?: Issue };
/**
 * A line of the history: an event, or where retention pruned the ledger (events up to
 * that seq are gone; `shown` unless the issue is younger than everything pruned).
 */
type HistoryLine = LockEvent | { prunedThrough: string; shown: boolean };

export class DetailView {
  private readonly dialog = byId<HTMLDialogElement>("detail");
  private issueId: string | null = null;
  /** Counts openings: a read begun for an earlier opening (even of the same issue) is dropped. */
  private opening = 0;
  private history: HistoryLine[] = [];
  /** History reads run one after another, so two never append the same events. */
  private reading: Promise<void> = Promise.resolve();
  /** The issue and maxAttempts the raise field was last set for: typing in it is never overwritten. */
  private raiseSetFor = "";
  /** The same for the key field. */
  private keySetFor: string | null = null;
  private readonly graph: GraphPanel;
  /** Reads of the open issue run one at a time; a notice during one reads it once more after. */
  private rereading: Promise<void> | null = null;
  private rereadAgain = false;

  constructor(
    private readonly api: Api,
    private readonly store: Store,
    private readonly companyId: string,
  ) {
    this.graph = new GraphPanel(api, store, (id) => void this.open(id));
    byId("detail-close").addEventListener("click", () => this.dialog.close());
    this.dialog.addEventListener("close", () => {
      this.issueId = null;
      this.opening++;
    });
    byId("force-release-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const reason = byId<HTMLTextAreaElement>("force-reason").value.trim();
      if (!reason) return this.say("A reason is required: it is written to the ledger with the release.");
      void this.act(`Force-release this issue? Its holder loses both locks.\n\nReason: ${reason}`, async (id) => {
        const { forceReleaseIssue } = await this.api.request(BoardForceReleaseDocument, { issueId: id, reason });
        return forceReleaseIssue;
      });
    });
    byId("requeue").addEventListener("click", () => void this.update("Requeue this issue (back to OPEN)?", { status: "OPEN" }));
    byId("cancel-issue").addEventListener("click", () => void this.update("Cancel this issue? No agent will claim it again.", { status: "CANCELLED" }));
    byId("clear-delay").addEventListener("click", () => void this.update("Clear this issue's delay? Agents may claim it now.", { notBefore: null }));
    byId("key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      // Keys are compared exactly: sent as typed; an empty field is the unkeyed pool (null).
      const typed = byId<HTMLInputElement>("key-input").value;
      const key = typed === "" ? null : typed;
      const issue = this.issueId ? this.store.issues.get(this.issueId) : undefined;
      if (issue && issue.concurrencyKey === key)
        return this.say(key === null ? "The issue is in the unkeyed pool already." : `The issue has key “${key}” already.`);
      void this.update(key === null ? "Move this issue to the unkeyed pool (no concurrency key)?" : `Move this issue to concurrency key “${key}”?`, {
        concurrencyKey: key,
      });
    });
    byId("raise-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const max = Number(byId<HTMLInputElement>("raise-max").value);
      const issue = this.issueId ? this.store.issues.get(this.issueId) : undefined;
      const input: UpdateIssueInput = issue?.status === "ESCALATED" ? { maxAttempts: max, status: "OPEN" } : { maxAttempts: max };
      void this.update(`Raise max attempts to ${max}${input.status ? " and reopen the issue" : ""}?`, input);
    });
  }

  private say(text: string, kind: "ok" | "problem" = "problem") {
    const answer = byId("action-answer");
    answer.className = `answer answer-${kind}`;
    answer.textContent = text;
  }

  private update(question: string, input: UpdateIssueInput) {
    return this.act(question, async (id) => (await this.api.request(BoardUpdateIssueDocument, { id, input })).updateIssue);
  }

  /** Confirms, sends, and shows the answer: the new status, or the Problem's type and message. */
  private async act(question: string, send: (issueId: string) => Promise<Answer>) {
    const id = this.issueId;
    if (!id || !window.confirm(question)) return;
    try {
      const answer = await send(id);
      if (answer.issue) {
        this.store.putIssue(answer.issue);
        this.store.changed();
        this.say(`${answer.__typename}: the issue is ${answer.issue.status}.`, "ok");
      } else {
        this.say(`${answer.__typename}: ${answer.message ?? ""}`);
      }
    } catch (err) {
      this.say(err instanceof ApiError ? `${err.code}: ${err.message}` : "the request failed");
    }
  }

  async open(issueId: string): Promise<void> {
    this.issueId = issueId;
    this.opening++;
    this.history = [];
    this.raiseSetFor = "";
    this.keySetFor = null;
    this.say("", "ok");
    byId<HTMLTextAreaElement>("force-reason").value = "";
    byId("detail-description").textContent = "";
    byId("detail-title").textContent = this.store.issues.get(issueId)?.title ?? "";
    this.graph.show(issueId);
    this.render();
    if (!this.dialog.open) this.dialog.showModal();
    try {
      await this.readIssue(issueId);
      await this.loadHistory();
    } catch (err) {
      this.say(err instanceof ApiError ? `${err.code}: ${err.message}` : "could not read the issue");
    }
  }

  /** The open issue read again: its fields, description and blockers. */
  private async readIssue(issueId: string): Promise<void> {
    const { issue } = await this.api.request(BoardIssueDetailDocument, { id: issueId });
    if (this.issueId !== issueId || !issue) return;
    this.graph.set(issue);
    byId("detail-description").textContent = issue.description ?? "";
    this.store.changed();
  }

  /**
   * Issues changed without a lock event (issuesChanged: an edit, a dependency
   * added or removed, sub-issues made): the open one is read again, for the
   * blockers its notice does not carry.
   */
  onIssuesChanged(ids: readonly string[]): void {
    const id = this.issueId;
    if (!id || !ids.includes(id)) return;
    if (this.rereading) {
      this.rereadAgain = true;
      return;
    }
    this.rereading = this.readIssue(id)
      .catch(() => {})
      .finally(() => {
        this.rereading = null;
        if (this.rereadAgain) {
          this.rereadAgain = false;
          this.onIssuesChanged([id]);
        }
      });
  }

  /** The open issue's events after the last one shown, a page at a time; queued behind any read in progress. */
  private loadHistory(): Promise<void> {
    const id = this.issueId;
    const opening = this.opening;
    this.reading = this.reading
      .then(async () => {
        for (;;) {
          if (!id || this.opening !== opening) return;
          // From "0", not the oldest event kept: EVENTS_PRUNED then says whether retention took some of it.
          const line = this.history.at(-1);
          const last = line === undefined ? "0" : "prunedThrough" in line ? line.prunedThrough : line.seq;
          let lockEvents: LockEvent[];
          try {
            ({ lockEvents } = await this.api.request(BoardHistoryDocument, { companyId: this.companyId, issueId: id, afterSeq: last }));
          } catch (err) {
            // EVENTS_PRUNED: the history goes on after the pruned part, with a line that says so.
            const through = prunedThrough(err);
            if (through === null || BigInt(through) <= BigInt(last)) throw err;
            const shown = line !== undefined || (await this.olderThanKept(id, through));
            if (this.opening !== opening) return;
            this.history.push({ prunedThrough: through, shown });
            continue;
          }
          if (this.opening !== opening) return;
          this.history.push(...lockEvents);
          if (lockEvents.length < 1000) break;
        }
        this.render();
      })
      .catch(() => this.say("could not read the issue's history"));
    return this.reading;
  }

  /**
   * Whether retention may have taken some of this issue's history: the issue is older
   * than the oldest event kept (an issue's events all come after it was created).
   */
  private async olderThanKept(issueId: string, through: string): Promise<boolean> {
    const issue = this.store.issues.get(issueId);
    const { lockEvents } = await this.api.request(BoardOldestEventDocument, { companyId: this.companyId, afterSeq: through });
    const oldest = lockEvents[0];
    return !issue || !oldest || Date.parse(issue.createdAt) < Date.parse(oldest.at);
  }

  /** A live event: the open issue's history gains it. */
  onEvent(event: LockEvent): void {
    if (event.issueId === this.issueId) void this.loadHistory();
  }

  render(now = Date.now()): void {
    const issue = this.issueId ? this.store.issues.get(this.issueId) : undefined;
    if (!issue) return;
    const run = this.store.holderRun(issue);
    const held = issue.checkoutRunId ?? issue.executionRunId;
    const serverNow = this.api.clock.now(now);
    const waiting = this.store.waiting(issue, serverNow);
    const graph = this.graph.graph();
    byId("detail-title").textContent = issue.title;
    const field = (label: string, value: string, attrs: Record<string, string> = {}) => [h("dt", {}, label), h("dd", attrs, value)];
    const delayAhead = issue.notBefore !== null && Date.parse(issue.notBefore) > serverNow;
    fill(
      byId("detail-fields"),
      ...field("Id", issue.id),
      ...field("Status", issue.status),
      ...field("Priority", issue.priority),
      ...field("Concurrency key", issue.concurrencyKey ?? "none (the unkeyed pool)"),
      ...field("Assignee", this.store.agentName(issue.assigneeAgentId) || "unassigned"),
      ...field("Checkout", issue.checkoutRunId ? `run ${shortId(issue.checkoutRunId)}` : "free"),
      ...field("Execution lock", issue.executionRunId ? `run ${shortId(issue.executionRunId)}` : "free"),
      ...field(
        "Holder",
        held
          ? run
            ? `${this.store.agentName(run.agentId)}, heartbeat ${span(now - Date.parse(run.lastHeartbeatAt))} ago (${health(run, now)})`
            : `run ${shortId(held)}`
          : "none",
      ),
      ...field("Lock epoch", String(issue.lockEpoch)),
      ...field("Attempts", `${issue.attemptCount} of ${issue.maxAttempts}`),
      ...(issue.status === "OPEN"
        ? field(
            "Ready",
            waiting
              ? [
                  "no: waiting",
                  waiting.on.length > 0 ? ` on ${waiting.on.map((b) => blockerWords(this.store, b, true)).join(", ")}` : "",
                  waiting.until ? `${waiting.on.length > 0 ? ";" : ""} until ${clockTime(waiting.until, serverNow)}` : "",
                  waiting.exhausted ? `${waiting.on.length > 0 || waiting.until ? ";" : ""} no attempt left (raise max attempts)` : "",
                ].join("")
              : "yes: an agent's claim may take it",
            { id: "detail-ready", class: waiting ? "waiting" : "" },
          )
        : []),
      ...field(
        "Not before",
        issue.notBefore === null
          ? "no delay"
          : `${clockTime(issue.notBefore, serverNow)} (the server's clock, in your time zone)${delayAhead ? "" : ": passed"}`,
      ),
      ...field(
        "Retry delay",
        graph === null
          ? "…"
          : graph.retryDelaySeconds === 0
            ? "none: a failed attempt may be retried at once"
            : `${graph.retryDelaySeconds} s after the first failed attempt, doubling after each (at most a day)`,
      ),
      ...field(
        "Max execution",
        graph === null
          ? "…"
          : graph.maxExecutionSeconds === null
            ? "no limit"
            : `${span(graph.maxExecutionSeconds * 1000)} (then the recovery sweep takes it back)`,
      ),
      ...field("Idempotency key", graph === null ? "…" : (graph.idempotencyKey ?? "none")),
    );
    const allowed = actionsFor(issue);
    byId("force-release-form").hidden = !allowed.forceRelease;
    byId("requeue").hidden = !allowed.requeue;
    byId("cancel-issue").hidden = !allowed.cancel;
    byId("clear-delay").hidden = !(allowed.edit && delayAhead);
    byId("key-form").hidden = !allowed.edit;
    byId("raise-form").hidden = !allowed.edit;
    byId("actions-none").hidden = allowed.forceRelease || allowed.requeue || allowed.cancel || allowed.edit;
    this.graph.render(issue, serverNow);
    const raise = byId<HTMLInputElement>("raise-max");
    if (this.raiseSetFor !== `${issue.id}:${issue.maxAttempts}`) {
      this.raiseSetFor = `${issue.id}:${issue.maxAttempts}`;
      raise.min = String(issue.maxAttempts + 1);
      raise.value = String(Math.min(issue.maxAttempts + 1, 100));
    }
    const key = byId<HTMLInputElement>("key-input");
    const keyNow = `${issue.id}:${issue.concurrencyKey ?? ""}`;
    if (this.keySetFor !== keyNow) {
      this.keySetFor = keyNow;
      key.value = issue.concurrencyKey ?? "";
    }
    fill(
      byId("detail-history"),
      ...this.history.map((e) =>
        "prunedThrough" in e
          ? e.shown
            ? h(
                "li",
                { class: "event pruned", "data-pruned-through": e.prunedThrough },
                `Events up to #${e.prunedThrough} were pruned by retention: any earlier events of this issue are no longer kept.`,
              )
            : null
          : eventLine(this.store, e),
      ),
    );
  }
}
