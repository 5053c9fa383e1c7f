// The rules several verbs share, each written once, under the name its SQL
// twin has in src/locks/shared/fragments.ts: liveness (baton_run_is_live), the
// claimable predicate, where a hold goes when it ends (reopenOrEscalate), the
// attempt a dead CLAIMED holder used (attemptsAfterDeath), both locks cleared
// together (CLEAR_LOCKS), a key's room, and the event a change writes; and
// the work graph's (issue 29): readiness (`claimable`, `waiting`), the retry
// backoff (backoffSeconds, delayBy) and the cycle an edge would close.
import type { Event, Issue, IssueStatus, LockEventKind, Run, State } from "./state.js";
import { findIssue, findRun } from "./state.js";
import { LOCK_EVENT_KINDS } from "../domain/types.js";

/** baton_run_is_live: RUNNING and the lease lies after the clock. A missing run is dead. */
export const isLive = (run: Run | undefined, clock: number): boolean => run !== undefined && run.status === "RUNNING" && run.leaseExpiresAt > clock;

/** RUNNING but its lease has run out: dead, though no statement has written TIMED_OUT yet. */
export const isExpired = (run: Run | undefined, clock: number): boolean => run !== undefined && run.status === "RUNNING" && run.leaseExpiresAt <= clock;

/** CLAIMED or IN_PROGRESS: holds the checkout, and counts against its key's limit. */
export const isActive = (status: IssueStatus): boolean => status === "CLAIMED" || status === "IN_PROGRESS";

export const TERMINAL_ISSUE_STATUSES: readonly IssueStatus[] = ["DONE", "CANCELLED"];

/** OPEN, so it holds no lock, with an attempt left (what `claimable` was before issue 29; isReady adds the work graph). */
export const isClaimable = (issue: Issue): boolean => issue.status === "OPEN" && issue.attemptCount < issue.maxAttempts;

/** The issue's blockers that are not DONE (a CANCELLED blocker keeps it waiting): Issue.waitingOn. */
export const waitingOn = (state: State, issue: Issue): string[] => issue.blockedBy.filter((id) => findIssue(state, id)?.status !== "DONE");

/** notBefore is null or not after the clock. */
export const isDue = (issue: Issue, clock: number): boolean => issue.notBefore === null || issue.notBefore <= clock;

/**
 * `claimable` (fragments.ts), Issue.ready: OPEN with an attempt left
 * (isClaimable), no blocker short of DONE, and due. Claim-next, claimIssues,
 * the scheduler tick and the keys' turns see only these.
 */
export const isReady = (state: State, issue: Issue): boolean =>
  isClaimable(issue) && isDue(issue, state.clock) && (issue.blockedBy.length === 0 || waitingOn(state, issue).length === 0);

/** `waiting` (fragments.ts): an OPEN issue that claim by id answers IssueWaiting for (blockers not DONE, or notBefore ahead). */
export const isWaiting = (state: State, issue: Issue): boolean =>
  issue.status === "OPEN" && (!isDue(issue, state.clock) || (issue.blockedBy.length > 0 && waitingOn(state, issue).length > 0));

/** The API's limits, in seconds (src/domain/validate.ts): retryAfterSeconds, retryDelaySeconds and the backoff's cap; maxExecutionSeconds. */
export const MAX_RETRY_SECONDS = 86_400;
export const MAX_EXECUTION_SECONDS = 604_800;

/** The longest delay (a day) in clock units. */
export const maxDelay = (state: State): number => Math.floor(MAX_RETRY_SECONDS / state.tickSeconds);
/** The longest execution limit (a week) in clock units. */
export const maxExecution = (state: State): number => Math.floor(MAX_EXECUTION_SECONDS / state.tickSeconds);

/**
 * backoffSeconds (fragments.ts): after an attempt ended without DONE and the
 * issue reopened with `attempts` counted, its delay: retryDelaySeconds ×
 * 2^max(attempts − 1, 0), at most a day; null (no delay) when
 * retryDelaySeconds is 0.
 */
export const backoffDelay = (state: State, issue: Issue, attempts: number): number | null =>
  issue.retryDelaySeconds > 0 ? Math.min(issue.retryDelaySeconds * 2 ** Math.max(attempts - 1, 0), maxDelay(state)) : null;

/**
 * delayBy (fragments.ts): the issue after a hold ended, delayed by `delay`
 * clock units from now when it went back to OPEN and a delay is given; as it
 * is otherwise (an escalated issue keeps its notBefore).
 */
export const delayBy = (state: State, issue: Issue, delay: number | null): Issue =>
  issue.status === "OPEN" && delay !== null ? { ...issue, notBefore: state.clock + delay } : issue;

/**
 * The cycle the edge `issueId` blocked by `blockedById` would close, or null:
 * a shortest path from blockedById along blockedBy edges to issueId, each
 * issue once ([issueId] for a self-edge). Among paths of one length, the
 * first in id order at each step.
 */
export function cyclePath(state: State, issueId: string, blockedById: string): string[] | null {
  if (issueId === blockedById) return [issueId];
  const from = new Map<string, string>();
  let frontier = [blockedById];
  const seen = new Set(frontier);
  while (frontier.length > 0) {
    const next: string[] = [];
    for (const id of frontier) {
      for (const b of findIssue(state, id)?.blockedBy ?? []) {
        if (seen.has(b)) continue;
        seen.add(b);
        from.set(b, id);
        if (b === issueId) {
          const path = [b];
          for (let at = id; ; at = from.get(at)!) {
            path.unshift(at);
            if (at === blockedById) return path;
          }
        }
        next.push(b);
      }
    }
    frontier = next;
  }
  return null;
}

/** reopenOrEscalate: a hold that ends without DONE/BLOCKED, or a board reopen, goes to OPEN, or ESCALATED with no attempt left. */
export const reopenOrEscalate = (attemptCount: number, maxAttempts: number): IssueStatus => (attemptCount >= maxAttempts ? "ESCALATED" : "OPEN");

/** attemptsAfterDeath: a holder that died CLAIMED (before acquireExecution counted one) spent an attempt. */
export const attemptsAfterDeath = (issue: Issue): number => issue.attemptCount + (issue.status === "CLAIMED" ? 1 : 0);

/** CLEAR_LOCKS: both locks at once (the issues_lock_pair CHECK insists), and the execution's start with them. */
export const clearLocks = (issue: Issue): Issue => ({ ...issue, checkoutRunId: null, executionRunId: null, executionLockedAt: null });

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
