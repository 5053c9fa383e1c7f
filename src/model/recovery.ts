// Time and recovery: `tick` (the clock moves: leases run out), one recovery
// sweep (src/locks/recovery/sweep.ts; SEMANTICS.md, "Recovery"; docs/invariants.md, 8),
// and recoverLock, the step that takes back a dead holder's lock (the sweep's,
// and disableAgent's).
import type { SweepCounts, Ticked } from "./answers.js";
import { agentOf, attemptsAfterDeath, backoffDelay, clearLocks, delayBy, eventFor, inStatementOrder, isExpired, reopenOrEscalate } from "./rules.js";
import type { Event, Issue, Run, State, Step } from "./state.js";
import { findRun } from "./state.js";

/**
 * The clock moves on by `by` (default 1): every lease with leaseExpiresAt <=
 * clock has run out, every issue with notBefore <= clock is due (the wake-up,
 * WAKE_DUE_ISSUES, is not a step of its own: readiness reads the clock), and
 * executions grow older. Nothing is written.
 */
export function tick(state: State, args: { by?: number } = {}): Step<Ticked> {
  const by = args.by ?? 1;
  if (!Number.isInteger(by) || by < 1) throw new Error("tick: by must be a positive integer");
  const clock = state.clock + by;
  return { answer: { __typename: "Ticked", clock }, state: { ...state, clock }, events: [] };
}

/**
 * recoverLock and recoveredKind (fragments.ts): the lock of a holder that is
 * dead, or is being ended (disableAgent), or has executed too long, taken
 * back. A CLAIMED holder's attempt is counted (attemptsAfterDeath), both locks
 * are cleared, and the issue goes to OPEN after its backoff (backoffDelay on
 * the count after the charge), or to ESCALATED; its one event is RECOVERED
 * (or ESCALATED), naming the holder, `agentId` and `reason`. The sweep and
 * disableAgent share it.
 */
export function recoverLock(state: State, issue: Issue, agentId: string | null, reason: string): { issue: Issue; event: Event } {
  const attemptCount = attemptsAfterDeath(issue);
  const reopened: Issue = { ...clearLocks(issue), attemptCount, status: reopenOrEscalate(attemptCount, issue.maxAttempts) };
  const after = delayBy(state, reopened, backoffDelay(state, issue, attemptCount));
  return { issue: after, event: eventFor(after, after.status === "ESCALATED" ? "ESCALATED" : "RECOVERED", issue.checkoutRunId, agentId, reason) };
}

/** The event reason of an execution the sweep took back for running past maxExecutionSeconds. */
export const EXECUTION_TIMED_OUT = "EXECUTION_TIMED_OUT";

/** IN_PROGRESS with a limit, and its execution has held the lock that long: the sweep takes it back, live run or not. */
export const executionOverdue = (issue: Issue, clock: number): boolean =>
  issue.status === "IN_PROGRESS" &&
  issue.maxExecutionSeconds !== null &&
  issue.executionLockedAt !== null &&
  clock - issue.executionLockedAt >= issue.maxExecutionSeconds;

/**
 * One sweep, its steps in order:
 *  1. TIME_OUT_EXPIRED_RUNS (+ TIME_OUT_BUSY_EXPIRED_RUNS): RUNNING runs whose
 *     lease has run out become TIMED_OUT.
 *  2. RECOVER_LOCKS_OF_DEAD_RUNS: every issue whose checkout points at a run
 *     that is not RUNNING (or missing), recoverLock: a CLAIMED holder's
 *     attempt is counted (attemptsAfterDeath), both locks cleared, OPEN
 *     (after its backoff) or ESCALATED; one RECOVERED (or ESCALATED) event
 *     each, naming the dead run, reason LEASE_EXPIRED (TIMED_OUT),
 *     RUN_FINISHED (another terminal status) or RUN_MISSING.
 *  2a. (issue 29) every IN_PROGRESS issue whose execution has held the lock
 *     maxExecutionSeconds or longer (executionOverdue), its run live:
 *     recoverLock with reason EXECUTION_TIMED_OUT (the attempt stays
 *     charged, the backoff applies); the run itself goes on.
 *  3. ESCALATE_EXHAUSTED_OPEN: OPEN issues with no attempt left → ESCALATED,
 *     reason ATTEMPTS_EXHAUSTED, run and agent null.
 * A live run's lock is touched only when its execution is overdue. The
 * recovered counts include the executions taken back. Counts as sweep()
 * returns them.
 */
export function sweep(state: State): Step<SweepCounts> {
  let timedOutRuns = 0;
  const runs = state.runs.map((r): Run => {
    if (!isExpired(r, state.clock)) return r;
    timedOutRuns++;
    return { ...r, status: "TIMED_OUT", finishedAt: state.clock };
  });
  const afterRuns: State = timedOutRuns === 0 ? state : { ...state, runs };

  const recovered: Event[] = [];
  const issues2 = afterRuns.issues.map((i): Issue => {
    if (i.checkoutRunId === null) return i;
    const holder = findRun(afterRuns, i.checkoutRunId);
    if (holder && holder.status === "RUNNING") return i;
    const reason = !holder ? "RUN_MISSING" : holder.status === "TIMED_OUT" ? "LEASE_EXPIRED" : "RUN_FINISHED";
    const { issue, event } = recoverLock(afterRuns, i, agentOf(afterRuns, i.checkoutRunId), reason);
    recovered.push(event);
    return issue;
  });

  const overdue: Event[] = [];
  const issues2a = issues2.map((i): Issue => {
    if (!executionOverdue(i, state.clock)) return i;
    const { issue, event } = recoverLock(afterRuns, i, agentOf(afterRuns, i.checkoutRunId), EXECUTION_TIMED_OUT);
    overdue.push(event);
    return issue;
  });

  const escalated: Event[] = [];
  const issues3 = issues2a.map((i): Issue => {
    if (!(i.status === "OPEN" && i.attemptCount >= i.maxAttempts)) return i;
    const after: Issue = { ...i, status: "ESCALATED" };
    escalated.push(eventFor(after, "ESCALATED", null, null, "ATTEMPTS_EXHAUSTED"));
    return after;
  });

  const events = [...inStatementOrder(recovered), ...inStatementOrder(overdue), ...inStatementOrder(escalated)];
  const after = events.length === 0 ? afterRuns : { ...afterRuns, issues: issues3 };
  return {
    answer: {
      __typename: "SweepCounts",
      timedOutRuns,
      recoveredIssues: events.filter((e) => e.kind === "RECOVERED").length,
      escalatedIssues: events.filter((e) => e.kind === "ESCALATED").length,
    },
    state: after,
    events,
  };
}
