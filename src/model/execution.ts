// acquireExecution (ACQUIRE_IF_CHECKOUT_HELD): the second lock, taken when
// work starts; taking it counts the attempt. docs/lifecycle.md, decision 9.
import type { AcquireExecutionResult } from "./answers.js";
import { issueNotFound } from "./answers.js";
import { refuseRun } from "./runs.js";
import { agentOf, eventFor } from "./rules.js";
import type { Issue, State, Step } from "./state.js";
import { findIssue, withIssue } from "./state.js";

/**
 * The checks, in decision 9's order, after the run's (refuseRun) and
 * IssueNotFound: already executing (alreadyHeld), ExecutionConflict (another
 * run executes it), NotCheckedOut (this run does not hold the checkout),
 * AttemptsExhausted. Then CLAIMED → IN_PROGRESS, attemptCount + 1, the
 * execution's start kept (executionLockedAt: maxExecutionSeconds counts from
 * it), one EXECUTION_ACQUIRED event. Blockers are not looked at: the issue
 * was ready when it was claimed, and a dependency added since matters from the
 * next claim.
 */
export function acquireExecution(state: State, args: { agentId: string; runId: string; issueId: string }): Step<AcquireExecutionResult> {
  const refused = refuseRun(state, args.agentId, args.runId);
  if (refused) return { answer: refused, state, events: [] };
  const cur = findIssue(state, args.issueId);
  if (!cur) return { answer: issueNotFound(args.issueId), state, events: [] };
  if (cur.executionRunId === args.runId) return { answer: { __typename: "ExecutionAcquired", issue: cur, alreadyHeld: true }, state, events: [] };
  if (cur.executionRunId !== null) {
    return {
      answer: { __typename: "ExecutionConflict", issueId: cur.id, ownerAgentId: agentOf(state, cur.executionRunId), ownerRunId: cur.executionRunId },
      state,
      events: [],
    };
  }
  if (cur.checkoutRunId !== args.runId) return { answer: { __typename: "NotCheckedOut", issueId: cur.id }, state, events: [] };
  if (cur.attemptCount >= cur.maxAttempts) {
    return { answer: { __typename: "AttemptsExhausted", issueId: cur.id, attemptCount: cur.attemptCount, maxAttempts: cur.maxAttempts }, state, events: [] };
  }
  const after: Issue = { ...cur, status: "IN_PROGRESS", executionRunId: args.runId, executionLockedAt: state.clock, attemptCount: cur.attemptCount + 1 };
  return {
    answer: { __typename: "ExecutionAcquired", issue: after, alreadyHeld: false },
    state: withIssue(state, after),
    events: [eventFor(after, "EXECUTION_ACQUIRED", args.runId, args.agentId, null)],
  };
}
