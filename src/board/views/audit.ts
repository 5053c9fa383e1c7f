// The audit panel: lockAudit's figures. Three must always be zero (a double
// claim, a half-released lock, a concurrency key's count that disagrees with
// its issues); two are zero once the recovery loop has run
// (locks of dead runs, exhausted issues not yet escalated).
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, fill, h } from "../dom.js";
import { BoardAuditDocument } from "../generated/graphql.js";

const FIGURES = [
  { key: "doubleClaims", label: "Double claims", mustBeZero: true, note: "must always be 0" },
  { key: "halfReleasedLocks", label: "Half-released locks", mustBeZero: true, note: "must always be 0" },
  { key: "miscountedKeys", label: "Miscounted concurrency keys", mustBeZero: true, note: "must always be 0" },
  { key: "locksHeldByDeadRuns", label: "Locks held by dead runs", mustBeZero: false, note: "0 after the recovery loop runs" },
  { key: "unescalatedExhausted", label: "Exhausted, not yet escalated", mustBeZero: false, note: "0 after the recovery loop runs" },
] as const;

export class AuditView {
  constructor(
    private readonly api: Api,
    private readonly companyId: string,
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
      fill(byId("audit-histogram"), ...lockAudit.attemptHistogram.map((b) => h("tr", {}, h("td", {}, b.attemptCount), h("td", {}, b.issues))));
      byId("audit-at").textContent = `as of ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      byId("audit-at").textContent = err instanceof ApiError ? `could not read the audit: ${err.message}` : "could not read the audit";
    }
  }
}
