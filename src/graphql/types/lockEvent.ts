import type { LockAudit } from "../../reads/lockAudit.js";
import type { LockEvent } from "../../domain/types.js";
import { builder } from "../builder.js";
import { IssueStatusEnum, LockEventKindEnum } from "./enums.js";
import { IssueRef } from "./issue.js";

export const LockEventRef = builder.objectRef<LockEvent>("LockEvent").implement({
  description: "One committed change to an issue's locks or status. Written in the same transaction as the change.",
  fields: (t) => ({
    seq: t.exposeID("seq", {
      description:
        "The event's position in its company's stream, as a decimal string. Unique and\n" +
        "increasing within a company, and visible in order: once any reader has seen\n" +
        "seq n, no event with a smaller seq can still appear (see docs/events.md).",
    }),
    companyId: t.exposeID("companyId"),
    issueId: t.exposeID("issueId"),
    kind: t.expose("kind", { type: LockEventKindEnum }),
    status: t.expose("status", { type: IssueStatusEnum, description: "Status after the change." }),
    runId: t.exposeID("runId", {
      nullable: true,
      description: "The run that made the change; for board and recovery changes, the run whose hold ended.",
    }),
    agentId: t.exposeID("agentId", { nullable: true, description: "That run's agent." }),
    checkoutRunId: t.exposeID("checkoutRunId", { nullable: true, description: "The checkout after the change." }),
    executionRunId: t.exposeID("executionRunId", { nullable: true, description: "The execution lock after the change." }),
    reason: t.exposeString("reason", {
      nullable: true,
      description: "Free-form reason, e.g. the release outcome, RUN_FINISHED, LEASE_EXPIRED, the operator's reason.",
    }),
    at: t.expose("at", { type: "DateTime" }),
    issue: t.field({
      type: IssueRef,
      description: "The issue as it is now (not as it was at this event).",
      resolve: async (e, _args, ctx) => {
        const issue = await ctx.loadIssue(e.issueId);
        if (!issue) throw new Error(`issue ${e.issueId} of event ${e.seq} is missing`);
        return issue;
      },
    }),
  }),
});

const AttemptBucketRef = builder.objectRef<LockAudit["attemptHistogram"][number]>("AttemptBucket").implement({
  fields: (t) => ({ attemptCount: t.exposeInt("attemptCount"), issues: t.exposeInt("issues") }),
});

export const LockAuditRef = builder.objectRef<LockAudit>("LockAudit").implement({
  description: "The seed's verification queries as an API: every figure must be 0 on a healthy company.",
  fields: (t) => ({
    doubleClaims: t.exposeInt("doubleClaims", {
      description: "CLAIMED events whose issue was, just before, still held by another run (an ADOPTED takeover from a dead run is not one).",
    }),
    locksHeldByDeadRuns: t.exposeInt("locksHeldByDeadRuns", {
      description: "Issues whose checkout or execution lock points at a terminal, expired or missing run.",
    }),
    halfReleasedLocks: t.exposeInt("halfReleasedLocks", {
      description: "Issues with exactly one of checkoutRunId / executionRunId set where the state forbids it.",
    }),
    unescalatedExhausted: t.exposeInt("unescalatedExhausted", {
      description: "OPEN issues with attemptCount >= maxAttempts (should have been escalated).",
    }),
    miscountedKeys: t.exposeInt("miscountedKeys", {
      description: "Concurrency keys whose active count or best claimable priority, as the claims read them, differs from a count over the issues.",
    }),
    waitingOnCancelled: t.exposeInt("waitingOnCancelled", {
      description: "OPEN issues that wait on a CANCELLED blocker: they will never be ready until someone removes the dependency or reopens the blocker.",
    }),
    miscountedWaits: t.exposeInt("miscountedWaits", {
      description: "Issues whose stored count of blockers not DONE differs from their dependencies counted now (0 when healthy).",
    }),
    attemptHistogram: t.field({ type: [AttemptBucketRef], resolve: (a) => a.attemptHistogram }),
  }),
});
