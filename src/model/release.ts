// releaseIssue and releaseIssues (RELEASE_IF_CHECKOUT_HELD): the holder gives
// issues back, both locks cleared with the status. docs/lifecycle.md, "Every
// transition", decision 7, and (issue 29) "Delays and backoff", "Not now is
// not a failure", "Input and output". releaseIssue with `next` (issue 31) is
// the release, then claimIssue without an issue id.
import type {
  ClaimIssueResult,
  IssueNotFound,
  IssueReleased,
  IssuesReleased,
  InvalidTransition,
  NotLockOwner,
  ReleaseIssueResult,
  ReleaseIssuesResult,
} from "./answers.js";
import { badInput, issueNotFound } from "./answers.js";
import { claimIssue } from "./claims.js";
import { refuseRun } from "./runs.js";
import { backoffDelay, clearLocks, delayBy, eventFor, inStatementOrder, maxDelay, releaseReason, reopenOrEscalate } from "./rules.js";
import type { ErrorAnswer } from "./answers.js";
import type { Event, Issue, Json, ReleaseOutcome, State } from "./state.js";
import { findIssue, withIssue } from "./state.js";
import type { Step } from "./state.js";

type Verdict = { released: Issue; event: Event } | NotLockOwner | InvalidTransition | IssueNotFound;

export interface ReleaseArgs {
  agentId: string;
  runId: string;
  outcome: ReleaseOutcome;
  reason?: string | null;
  /** REQUEUE or FAILED only, 0 to a day (in clock units): not ready again for this long, instead of the backoff. */
  retryAfterSeconds?: number | null;
  /** Kept on the issue (Issue.result) whatever the outcome; null or left out keeps the one it has. */
  result?: Json;
}

/** retryAfterSeconds with DONE or BLOCKED, or out of 0..a day: BAD_USER_INPUT, before anything else is looked at. */
function refuseInput(state: State, args: ReleaseArgs): ErrorAnswer | null {
  const after = args.retryAfterSeconds;
  if (after === undefined || after === null) return null;
  if (args.outcome !== "REQUEUE" && args.outcome !== "FAILED") return badInput("retryAfterSeconds goes only with REQUEUE or FAILED");
  if (!Number.isInteger(after) || after < 0 || after > maxDelay(state)) return badInput("retryAfterSeconds must be a whole number of seconds from 0 to 86400");
  return null;
}

/**
 * One issue's release, once the run may act: not held by this run →
 * NotLockOwner; DONE from CLAIMED → InvalidTransition (work is finished only
 * under the execution lock); otherwise DONE → DONE, BLOCKED → BLOCKED,
 * FAILED and REQUEUE → OPEN, or ESCALATED with no attempt left. No attempt
 * is counted (acquireExecution counted it, and a voluntary end of a CLAIMED
 * hold costs none), but REQUEUE with retryAfterSeconds from IN_PROGRESS gives
 * back the one acquireExecution counted ("not now" is not a failure). Back to
 * OPEN, the issue waits retryAfterSeconds when given, or after FAILED its
 * backoff (backoffDelay); plain REQUEUE adds no delay, and an escalated issue
 * keeps its notBefore. A result given is kept. One RELEASED event, reason
 * `OUTCOME[: reason]`.
 */
function releaseOne(state: State, args: ReleaseArgs & { issueId: string }): Verdict {
  const cur = findIssue(state, args.issueId);
  if (!cur) return issueNotFound(args.issueId);
  if (cur.checkoutRunId !== args.runId) return { __typename: "NotLockOwner", issueId: cur.id, ownerRunId: cur.checkoutRunId };
  if (args.outcome === "DONE" && cur.status === "CLAIMED") return { __typename: "InvalidTransition", issueId: cur.id, from: cur.status, to: "DONE" };
  const retryAfter = args.retryAfterSeconds ?? null;
  const givesBack = args.outcome === "REQUEUE" && retryAfter !== null && cur.status === "IN_PROGRESS";
  const attemptCount = givesBack ? cur.attemptCount - 1 : cur.attemptCount;
  const status = args.outcome === "DONE" ? "DONE" : args.outcome === "BLOCKED" ? "BLOCKED" : reopenOrEscalate(attemptCount, cur.maxAttempts);
  const delay = retryAfter !== null ? retryAfter : args.outcome === "FAILED" ? backoffDelay(state, cur, attemptCount) : null;
  const result = args.result === undefined || args.result === null ? cur.result : args.result;
  const released = delayBy(state, { ...clearLocks(cur), status, attemptCount, result }, delay);
  return { released, event: eventFor(released, "RELEASED", args.runId, args.agentId, releaseReason(args.outcome, args.reason)) };
}

/** releaseIssue's `next` (ClaimNextInput): claim the caller's next issue right after the release. */
export interface ClaimNext {
  /** Default false. */
  includeUnassigned?: boolean;
  /** Default true: the next issue IN_PROGRESS, its attempt counted. */
  startExecution?: boolean;
}

/**
 * releaseIssue(runId, issueId, outcome, reason, retryAfterSeconds, result,
 * next): the input's checks, the run's (refuseRun), IssueNotFound, then
 * releaseOne. With `next` (issue 31), a release that answered IssueReleased
 * is followed by claimIssue without an issue id for the same run
 * (includeUnassigned and startExecution as `next` says), exactly the two
 * calls one after the other: the claim sees the release, a refused release
 * claims nothing, and `next` is the claim's IssueClaimed or null.
 */
export function releaseIssue(state: State, args: ReleaseArgs & { issueId: string; next?: ClaimNext | null }): Step<ReleaseIssueResult> {
  const released = releaseAlone(state, args);
  if (!args.next || released.answer.__typename !== "IssueReleased") return released;
  const claimed = claimIssue(released.state, {
    agentId: args.agentId,
    runId: args.runId,
    includeUnassigned: args.next.includeUnassigned ?? false,
    startExecution: args.next.startExecution ?? true,
  });
  return { answer: releasedWithNext(released.answer, claimed.answer), state: claimed.state, events: [...released.events, ...claimed.events] };
}

/** releaseIssue(next)'s answer: the release's, with `next` the claim's IssueClaimed, or null for any other answer (nothing claimable, the run ended in between). */
export const releasedWithNext = (released: IssueReleased, claimed: ClaimIssueResult): IssueReleased => ({
  ...released,
  next: claimed.__typename === "IssueClaimed" ? claimed : null,
});

function releaseAlone(state: State, args: ReleaseArgs & { issueId: string }): Step<ReleaseIssueResult> {
  const refusedInput = refuseInput(state, args);
  if (refusedInput) return { answer: refusedInput, state, events: [] };
  const refused = refuseRun(state, args.agentId, args.runId);
  if (refused) return { answer: refused, state, events: [] };
  const verdict = releaseOne(state, args);
  if (!("released" in verdict)) return { answer: verdict, state, events: [] };
  return { answer: { __typename: "IssueReleased", issue: verdict.released }, state: withIssue(state, verdict.released), events: [verdict.event] };
}

/**
 * releaseIssues(runId, issueIds, outcome, reason, retryAfterSeconds, result):
 * the same for each distinct id, in one statement: IssuesReleased lists the
 * released issues and, issue by issue (in request order), why any other was
 * refused. An empty list is BAD_USER_INPUT; a dead run releases nothing (RunNotActive).
 */
export function releaseIssues(state: State, args: ReleaseArgs & { issueIds: readonly string[] }): Step<ReleaseIssuesResult> {
  const ids = [...new Set(args.issueIds)];
  if (ids.length === 0) return { answer: badInput("issueIds must not be empty"), state, events: [] };
  if (ids.length > 1000) return { answer: badInput("at most 1000 issues per call"), state, events: [] };
  const refusedInput = refuseInput(state, args);
  if (refusedInput) return { answer: refusedInput, state, events: [] };
  const refused = refuseRun(state, args.agentId, args.runId);
  if (refused) return { answer: refused, state, events: [] };
  let after = state;
  const answer: IssuesReleased = { __typename: "IssuesReleased", issues: [], refused: [] };
  const events: Event[] = [];
  for (const issueId of ids) {
    // a group never names one issue twice, so each verdict is on the issue as the statement found it
    const verdict = releaseOne(state, { ...args, issueId });
    if ("released" in verdict) {
      after = withIssue(after, verdict.released);
      answer.issues.push(verdict.released);
      events.push(verdict.event);
    } else {
      answer.refused.push(verdict);
    }
  }
  return { answer, state: after, events: inStatementOrder(events) };
}
