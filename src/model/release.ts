// releaseIssue and releaseIssues (RELEASE_IF_CHECKOUT_HELD): the holder gives
// issues back, both locks cleared with the status. docs/lifecycle.md, "Every
// transition" and decision 7.
import type { IssueNotFound, IssuesReleased, InvalidTransition, NotLockOwner, ReleaseIssueResult, ReleaseIssuesResult } from "./answers.js";
import { badInput, issueNotFound } from "./answers.js";
import { refuseRun } from "./runs.js";
import { clearLocks, eventFor, inStatementOrder, releaseReason, reopenOrEscalate } from "./rules.js";
import type { Event, Issue, ReleaseOutcome, State } from "./state.js";
import { findIssue, withIssue } from "./state.js";
import type { Step } from "./state.js";

type Verdict = { released: Issue; event: Event } | NotLockOwner | InvalidTransition | IssueNotFound;

/**
 * One issue's release, once the run may act: not held by this run →
 * NotLockOwner; DONE from CLAIMED → InvalidTransition (work is finished only
 * under the execution lock); otherwise DONE → DONE, BLOCKED → BLOCKED,
 * FAILED and REQUEUE → OPEN, or ESCALATED with no attempt left. No attempt
 * is counted (acquireExecution counted it, and a voluntary end of a CLAIMED
 * hold costs none). One RELEASED event, reason `OUTCOME[: reason]`.
 */
function releaseOne(state: State, args: { agentId: string; runId: string; issueId: string; outcome: ReleaseOutcome; reason?: string | null }): Verdict {
  const cur = findIssue(state, args.issueId);
  if (!cur) return issueNotFound(args.issueId);
  if (cur.checkoutRunId !== args.runId) return { __typename: "NotLockOwner", issueId: cur.id, ownerRunId: cur.checkoutRunId };
  if (args.outcome === "DONE" && cur.status === "CLAIMED") return { __typename: "InvalidTransition", issueId: cur.id, from: cur.status, to: "DONE" };
  const status = args.outcome === "DONE" ? "DONE" : args.outcome === "BLOCKED" ? "BLOCKED" : reopenOrEscalate(cur.attemptCount, cur.maxAttempts);
  const released: Issue = { ...clearLocks(cur), status };
  return { released, event: eventFor(released, "RELEASED", args.runId, args.agentId, releaseReason(args.outcome, args.reason)) };
}

/** releaseIssue(runId, issueId, outcome, reason): the run's checks (refuseRun), IssueNotFound, then releaseOne. */
export function releaseIssue(
  state: State,
  args: { agentId: string; runId: string; issueId: string; outcome: ReleaseOutcome; reason?: string | null },
): Step<ReleaseIssueResult> {
  const refused = refuseRun(state, args.agentId, args.runId);
  if (refused) return { answer: refused, state, events: [] };
  const verdict = releaseOne(state, args);
  if (!("released" in verdict)) return { answer: verdict, state, events: [] };
  return { answer: { __typename: "IssueReleased", issue: verdict.released }, state: withIssue(state, verdict.released), events: [verdict.event] };
}

/**
 * releaseIssues(runId, issueIds, outcome, reason): the same for each distinct
 * id, in one statement: IssuesReleased lists the released issues and, issue
 * by issue (in request order), why any other was refused. An empty list is
 * BAD_USER_INPUT; a dead run releases nothing (RunNotActive).
 */
export function releaseIssues(
  state: State,
  args: { agentId: string; runId: string; issueIds: readonly string[]; outcome: ReleaseOutcome; reason?: string | null },
): Step<ReleaseIssuesResult> {
  const ids = [...new Set(args.issueIds)];
  if (ids.length === 0) return { answer: badInput("issueIds must not be empty"), state, events: [] };
  if (ids.length > 1000) return { answer: badInput("at most 1000 issues per call"), state, events: [] };
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
