// The audit panel: lockAudit's figures. Four must always be zero (a double
// claim, a half-released lock, a concurrency key's count that disagrees with
// its issues, an issue's count of blockers not DONE that disagrees with its
// dependencies); two are zero once the recovery loop has run (locks of dead
// runs, exhausted issues not yet escalated); and one is zero once an operator
// has acted: OPEN issues that wait on a CANCELLED blocker, which will never be
// ready as they stand. Those the page knows are listed, each a link to its
// panel, where the dependency is removed.
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, fill, h } from "../dom.js";
import { BoardAuditDocument } from "../generated/graphql.js";
import type { Issue, Store } from "../store.js";

const FIGURES = [
  { key: "doubleClaims", label: "Double claims", mustBeZero: true, note: "must always be 0" },
  { key: "halfReleasedLocks", label: "Half-released locks", mustBeZero: true, note: "must always be 0" },
  { key: "miscountedKeys", label: "Miscounted concurrency keys", mustBeZero: true, note: "must always be 0" },
  { key: "miscountedWaits", label: "Miscounted waits", mustBeZero: true, note: "must always be 0" },
  { key: "locksHeldByDeadRuns", label: "Locks held by dead runs", mustBeZero: false, note: "0 after the recovery loop runs" },
  { key: "unescalatedExhausted", label: "Exhausted, not yet escalated", mustBeZero: false, note: "0 after the recovery loop runs" },
  {
    key: "waitingOnCancelled",
    label: "Waiting on a cancelled blocker",
    mustBeZero: false,
    note: "never ready until someone removes the dependency (below)",
  },
] as const;

/** Issues named under the figures; the rest are counted. */
const LISTED = 20;

export class AuditView {
  constructor(
    private readonly api: Api,
    private readonly store: Store,
    private readonly companyId: string,
    private readonly open: (issueId: string) => void,
  ) {
    byId("audit-refresh").addEventListener("click", () => void this.refresh());
  }

  async refresh(): Promise<void> {
    try {
      const { lockAudit } = await this.api.request(BoardAuditDocument, { companyId: this.companyId });
      fill(
        byId("audit-figures"),
        ...FIGURES.map(({ key, label, mustBeZero, note }) => {
          const value = lockAudit[key];
          const state = value === 0 ? "good" : mustBeZero ? "bad" : "pending";
          return h(
            "div",
            { class: `figure figure-${state}`, "data-figure": key },
            h("dt", {}, label),
            h("dd", {}, h("strong", {}, value), " ", h("small", {}, note)),
          );
        }),
      );
      this.listStuck();
      fill(byId("audit-histogram"), ...lockAudit.attemptHistogram.map((b) => h("tr", {}, h("td", {}, b.attemptCount), h("td", {}, b.issues))));
      byId("audit-at").textContent = `as of ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      byId("audit-at").textContent = err instanceof ApiError ? `could not read the audit: ${err.message}` : "could not read the audit";
    }
  }

  /** The OPEN issues this page knows to wait on a CANCELLED blocker, each with the blockers that are. */
  private listStuck(): void {
    const stuck: { issue: Issue; cancelled: string[] }[] = [];
    for (const issue of this.store.issues.values()) {
      if (issue.status !== "OPEN") continue;
      const cancelled = this.store.waitingOn(issue).filter((id) => this.store.issues.get(id)?.status === "CANCELLED");
      if (cancelled.length > 0) stuck.push({ issue, cancelled });
    }
    byId("audit-stuck-section").hidden = stuck.length === 0;
    fill(
      byId("audit-stuck"),
      ...stuck
        .slice(0, LISTED)
        .map(({ issue, cancelled }) =>
          h(
            "li",
            { "data-issue": issue.id },
            h("button", { type: "button", class: "link", onclick: () => this.open(issue.id) }, issue.title),
            ` waits on ${cancelled.map((id) => this.store.issueName(id)).join(", ")} (CANCELLED)`,
          ),
        ),
      stuck.length > LISTED ? h("li", { class: "hint" }, `and ${stuck.length - LISTED} more`) : null,
    );
  }
}
