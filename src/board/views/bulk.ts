// Bulk actions on the issues selected in the issues view: requeue, cancel,
// or set the priority of each, with one updateIssue per issue (the API has no
// batch update), a few at a time. Each is confirmed first; the answer line
// says how many changed and which were refused, and why.
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, counted, setText } from "../dom.js";
import { BoardUpdateIssueDocument } from "../generated/graphql.js";
import type { IssuePriority, UpdateIssueInput } from "../generated/graphql.js";
import type { Issue, Store } from "../store.js";
import type { IssuesView } from "./issues.js";

/** Requests in flight at once: enough to be quick, few enough not to meet the per-key request limit. */
const PARALLEL = 4;
/** Refusals named in the answer line; the rest are counted. */
const NAMED = 5;

export class BulkView {
  private busy = false;

  constructor(
    private readonly api: Api,
    private readonly store: Store,
    private readonly issues: () => IssuesView,
  ) {
    byId("bulk-requeue").addEventListener("click", () => void this.run("Requeue", "requeued", { status: "OPEN" }));
    byId("bulk-cancel").addEventListener("click", () => void this.run("Cancel", "cancelled", { status: "CANCELLED" }));
    byId("bulk-set-priority").addEventListener("click", () => {
      const priority = byId<HTMLSelectElement>("bulk-priority").value as IssuePriority;
      void this.run(`Set the priority to ${priority} of`, `set to ${priority}`, { priority });
    });
  }

  /** The bar follows the selection: its count, and buttons enabled only with something selected. */
  selectionChanged(): void {
    const n = this.issues().selection().length;
    setText(byId("bulk-count"), n === 0 ? "No issue selected" : `${counted(n, "issue")} selected`);
    for (const id of ["bulk-requeue", "bulk-cancel", "bulk-set-priority"]) byId<HTMLButtonElement>(id).disabled = n === 0 || this.busy;
  }

  private say(text: string, kind: "ok" | "problem") {
    const answer = byId("bulk-answer");
    answer.className = `answer answer-${kind}`;
    answer.textContent = text;
  }

  private async run(verb: string, done: string, input: UpdateIssueInput) {
    const chosen = this.issues().selection();
    if (chosen.length === 0 || this.busy) return;
    if (!window.confirm(`${verb} ${counted(chosen.length, "selected issue")}?`)) return;
    this.busy = true;
    this.selectionChanged();
    this.say(`Sending ${counted(chosen.length, "change")}…`, "ok");
    const refused: string[] = [];
    const escalated: string[] = [];
    let changed = 0;
    const queue = [...chosen];
    const worker = async () => {
      for (let issue = queue.shift(); issue; issue = queue.shift()) {
        const answer = await this.update(issue, input);
        if (typeof answer === "string") refused.push(`“${issue.title}” (${issue.status}): ${answer}`);
        else {
          changed++;
          // A requeue with no attempt left escalates instead (docs/lifecycle.md, decision 4).
          if (input.status && answer.status !== input.status) escalated.push(`“${issue.title}”`);
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(PARALLEL, chosen.length) }, worker));
    } finally {
      this.busy = false;
      this.store.changed();
      this.issues().clearSelection();
    }
    const named = refused.slice(0, NAMED).join("; ");
    const more = refused.length > NAMED ? `; and ${refused.length - NAMED} more` : "";
    const went =
      escalated.length === 0
        ? ""
        : ` ${escalated.slice(0, NAMED).join(", ")}${escalated.length > NAMED ? ` and ${escalated.length - NAMED} more` : ""} had no attempt left and ` +
          `went to ESCALATED instead: raise max attempts to reopen ${escalated.length === 1 ? "it" : "them"}.`;
    this.say(
      refused.length === 0
        ? `${counted(changed, "issue")} ${done}.${went}`
        : `${counted(changed, "issue")} ${done}, ${refused.length} refused: ${named}${more}.${went}`,
      refused.length === 0 && escalated.length === 0 ? "ok" : "problem",
    );
  }

  /** One issue's update: the issue as saved, or why it was refused. */
  private async update(issue: Issue, input: UpdateIssueInput): Promise<Issue | string> {
    try {
      const { updateIssue } = await this.api.request(BoardUpdateIssueDocument, { id: issue.id, input });
      if (updateIssue.__typename !== "IssueUpdated") return `${updateIssue.__typename}: ${updateIssue.message}`;
      this.store.putIssue(updateIssue.issue);
      return updateIssue.issue;
    } catch (err) {
      return err instanceof ApiError ? `${err.code}: ${err.message}` : "the request failed";
    }
  }
}
