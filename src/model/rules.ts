// The rules several verbs share, each written once, under the name its SQL
// twin has in src/locks/shared/fragments.ts: liveness (baton_run_is_live), the
// claimable predicate, where a hold goes when it ends (reopenOrEscalate), the
// attempt a dead CLAIMED holder used (attemptsAfterDeath), both locks cleared
// together (CLEAR_LOCKS), a key's room, and the event a change writes.
import type { Event, Issue, IssueStatus, LockEventKind, Run, State } from "./state.js";
import { findRun } from "./state.js";
import { LOCK_EVENT_KINDS } from "../domain/types.js";

/** baton_run_is_live: RUNNING and the lease lies after the clock. A missing run is dead. */
export const isLive = (run: Run | undefined, clock: number): boolean => run !== undefined && run.status === "RUNNING" && run.leaseExpiresAt > clock;

/** RUNNING but its lease has run out: dead, though no statement has written TIMED_OUT yet. */
export const isExpired = (run: Run | undefined, clock: number): boolean => run !== undefined && run.status === "RUNNING" && run.leaseExpiresAt <= clock;

/** CLAIMED or IN_PROGRESS: holds the checkout, and counts against its key's limit. */
export const isActive = (status: IssueStatus): boolean => status === "CLAIMED" || status === "IN_PROGRESS";

export const TERMINAL_ISSUE_STATUSES: readonly IssueStatus[] = ["DONE", "CANCELLED"];

/** `claimable` (fragments.ts): OPEN, so it holds no lock, with an attempt left. */
export const isClaimable = (issue: Issue): boolean => issue.status === "OPEN" && issue.attemptCount < issue.maxAttempts;

/** reopenOrEscalate: a hold that ends without DONE/BLOCKED, or a board reopen, goes to OPEN, or ESCALATED with no attempt left. */
export const reopenOrEscalate = (attemptCount: number, maxAttempts: number): IssueStatus => (attemptCount >= maxAttempts ? "ESCALATED" : "OPEN");

/** attemptsAfterDeath: a holder that died CLAIMED (before acquireExecution counted one) spent an attempt. */
export const attemptsAfterDeath = (issue: Issue): number => issue.attemptCount + (issue.status === "CLAIMED" ? 1 : 0);

/** CLEAR_LOCKS: both locks at once (the issues_lock_pair CHECK insists). */
export const clearLocks = (issue: Issue): Issue => ({ ...issue, checkoutRunId: null, executionRunId: null });

/** How many issues of the key are active. */
export const activeInKey = (state: State, key: string): number => state.issues.filter((i) => i.concurrencyKey === key && isActive(i.status)).length;

/** How many more of the key's issues may become active; null when the key has no limit (the unkeyed pool never has one). */
export function keyRoom(state: State, key: string | null): number | null {
  if (key === null) return null;
  const max = state.limits[key];
  return max === undefined ? null : max - activeInKey(state, key);
}

/** The agent of a run, or null when the run does not exist (an event's agentId). */
export const agentOf = (state: State, runId: string | null): string | null => findRun(state, runId)?.agentId ?? null;

/** The event a change writes: its status and locks are the issue's after the change. */
export function eventFor(after: Issue, kind: LockEventKind, runId: string | null, agentId: string | null, reason: string | null): Event {
  return {
    issueId: after.id,
    kind,
    status: after.status,
    runId,
    agentId,
    checkoutRunId: after.checkoutRunId,
    executionRunId: after.executionRunId,
    reason,
  };
}

/** The lock_event_kind enum's order (LOCK_EVENT_KINDS lists it as the migration declares it). */
const KIND_ORDER: readonly LockEventKind[] = LOCK_EVENT_KINDS;

/** The order appendEvents gives one statement's events: by issue id, then kind (enum order). */
export function inStatementOrder(events: readonly Event[]): Event[] {
  return [...events].sort((a, b) => (a.issueId < b.issueId ? -1 : a.issueId > b.issueId ? 1 : KIND_ORDER.indexOf(a.kind) - KIND_ORDER.indexOf(b.kind)));
}

/** An outcome's reason as releaseIssue writes it: `FAILED`, or `FAILED: tests red` with the caller's reason, trimmed. */
export const releaseReason = (outcome: string, reason: string | null | undefined): string => (reason?.trim() ? `${outcome}: ${reason.trim()}` : outcome);
