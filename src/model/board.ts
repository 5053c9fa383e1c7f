// The board's verbs: forceReleaseIssue (FORCE_RELEASE_ANY_HOLDER) and
// updateIssue (UPDATE_IF_TRANSITION_ALLOWED). docs/lifecycle.md, "Board
// transitions" and decisions 4, 5, 12, 13, 14.
import type { ForceReleaseResult, UpdateIssueResult } from "./answers.js";
import { badInput, issueNotFound } from "./answers.js";
import { agentOf, clearLocks, eventFor, isActive, maxDelay, maxExecution, reopenOrEscalate } from "./rules.js";
import type { Issue, IssueStatus, State, Step } from "./state.js";
import { findIssue, withIssue } from "./state.js";

/** BOARD_TRANSITIONS (src/domain/transitions.ts, which the SQL and the board use): where the board may move a status. Keeping it is always allowed. */
export const BOARD_TRANSITIONS: Readonly<Record<IssueStatus, readonly IssueStatus[]>> = {
  BACKLOG: ["OPEN", "CANCELLED"],
  OPEN: ["CANCELLED"],
  CLAIMED: ["CANCELLED"],
  IN_PROGRESS: ["CANCELLED"],
  BLOCKED: ["OPEN", "CANCELLED"],
  ESCALATED: ["OPEN", "CANCELLED"],
  DONE: [],
  CANCELLED: [],
};

/**
 * forceReleaseIssue(issueId, reason) (decision 5): a held issue returns to
 * OPEN (or ESCALATED with no attempt left), both locks cleared, no attempt
 * counted, one FORCE_RELEASED event naming the run whose hold ended, with the
 * reason trimmed. An issue that holds no lock is answered as it is, with no
 * event. A blank reason is BAD_USER_INPUT.
 */
export function forceReleaseIssue(state: State, args: { issueId: string; reason: string }): Step<ForceReleaseResult> {
  const reason = args.reason.trim();
  if (!reason || reason.length > 1000) return { answer: badInput("reason must be 1–1000 characters"), state, events: [] };
  const cur = findIssue(state, args.issueId);
  if (!cur) return { answer: issueNotFound(args.issueId), state, events: [] };
  if (cur.checkoutRunId === null) return { answer: { __typename: "IssueReleased", issue: cur }, state, events: [] };
  const after: Issue = { ...clearLocks(cur), status: reopenOrEscalate(cur.attemptCount, cur.maxAttempts) };
  return {
    answer: { __typename: "IssueReleased", issue: after },
    state: withIssue(state, after),
    events: [eventFor(after, "FORCE_RELEASED", cur.checkoutRunId, agentOf(state, cur.checkoutRunId), reason)],
  };
}

export interface UpdateIssueInput {
  status?: IssueStatus;
  /** 1–100; the reopen check uses the new value. */
  maxAttempts?: number;
  /** undefined keeps the assignee; null unassigns. */
  assigneeAgentId?: string | null;
  /** undefined keeps the key; null moves the issue to the unkeyed pool. */
  concurrencyKey?: string | null;
  /** A clock value; undefined keeps it, null clears it. */
  notBefore?: number | null;
  /** 0 to a day, in clock units; undefined keeps it, null clears it (0). */
  retryDelaySeconds?: number | null;
  /** 1 to a week, in clock units; undefined keeps it, null clears it (no limit). */
  maxExecutionSeconds?: number | null;
}

/** retryDelaySeconds and maxExecutionSeconds out of range: BAD_USER_INPUT (createIssues and updateIssue). */
export function refuseDurations(state: State, input: { retryDelaySeconds?: number | null; maxExecutionSeconds?: number | null }): string | null {
  const d = input.retryDelaySeconds;
  if (d != null && (!Number.isInteger(d) || d < 0 || d > maxDelay(state))) return "retryDelaySeconds must be a whole number of seconds from 0 to 86400";
  const m = input.maxExecutionSeconds;
  if (m != null && (!Number.isInteger(m) || m < 1 || m > maxExecution(state))) return "maxExecutionSeconds must be a whole number of seconds from 1 to 604800";
  return null;
}

/**
 * updateIssue(id, input): the requested status must be the current one or one
 * of BOARD_TRANSITIONS' (InvalidTransition otherwise, and nothing is saved).
 * A move to OPEN from another status needs an attempt left under the new
 * maxAttempts: without one, BLOCKED goes to ESCALATED, and ESCALATED answers
 * InvalidTransition (decision 4). The key may not change while the issue is
 * active (InvalidTransition). An unknown assignee is BAD_USER_INPUT. A move to
 * CANCELLED clears both locks (decision 12; no attempt counted); reassigning
 * a held issue leaves its checkout (decision 13). notBefore,
 * retryDelaySeconds and maxExecutionSeconds (issue 29) are set as given
 * (null clears), out-of-range durations BAD_USER_INPUT. One STATUS_CHANGED
 * event when the status changes, naming the run whose hold ended; none
 * otherwise, even when other fields change.
 */
export function updateIssue(state: State, args: { issueId: string; input: UpdateIssueInput }): Step<UpdateIssueResult> {
  const { input } = args;
  if (input.maxAttempts !== undefined && (!Number.isInteger(input.maxAttempts) || input.maxAttempts < 1 || input.maxAttempts > 100)) {
    return { answer: badInput("maxAttempts must be between 1 and 100"), state, events: [] };
  }
  const durations = refuseDurations(state, input);
  if (durations) return { answer: badInput(durations), state, events: [] };
  const cur = findIssue(state, args.issueId);
  if (!cur) return { answer: issueNotFound(args.issueId), state, events: [] };
  const requested = input.status ?? cur.status;
  const maxAttempts = input.maxAttempts ?? cur.maxAttempts;
  const next = requested === "OPEN" && cur.status !== "OPEN" ? reopenOrEscalate(cur.attemptCount, maxAttempts) : requested;
  const refuse = (): Step<UpdateIssueResult> => ({
    answer: { __typename: "InvalidTransition", issueId: cur.id, from: cur.status, to: requested },
    state,
    events: [],
  });
  if (requested !== cur.status && !BOARD_TRANSITIONS[cur.status].includes(requested)) return refuse();
  if (cur.status === "ESCALATED" && next === "ESCALATED" && requested === "OPEN") return refuse();
  const key = input.concurrencyKey === undefined ? cur.concurrencyKey : input.concurrencyKey;
  if (input.concurrencyKey !== undefined && key !== cur.concurrencyKey && isActive(cur.status)) return refuse();
  if (input.assigneeAgentId != null && !state.agents.includes(input.assigneeAgentId)) {
    return { answer: badInput(`assigneeAgentId ${input.assigneeAgentId}: no such agent in this company`), state, events: [] };
  }
  const after: Issue = {
    ...cur,
    assigneeAgentId: input.assigneeAgentId === undefined ? cur.assigneeAgentId : input.assigneeAgentId,
    concurrencyKey: key,
    maxAttempts,
    status: next,
    checkoutRunId: isActive(next) ? cur.checkoutRunId : null,
    executionRunId: next === "IN_PROGRESS" ? cur.executionRunId : null,
    executionLockedAt: next === "IN_PROGRESS" ? cur.executionLockedAt : null,
    notBefore: input.notBefore === undefined ? cur.notBefore : input.notBefore,
    retryDelaySeconds: input.retryDelaySeconds === undefined ? cur.retryDelaySeconds : (input.retryDelaySeconds ?? 0),
    maxExecutionSeconds: input.maxExecutionSeconds === undefined ? cur.maxExecutionSeconds : input.maxExecutionSeconds,
  };
  const same =
    after.assigneeAgentId === cur.assigneeAgentId &&
    after.concurrencyKey === cur.concurrencyKey &&
    after.maxAttempts === cur.maxAttempts &&
    after.notBefore === cur.notBefore &&
    after.retryDelaySeconds === cur.retryDelaySeconds &&
    after.maxExecutionSeconds === cur.maxExecutionSeconds &&
    next === cur.status;
  const newState = same ? state : withIssue(state, after);
  const events =
    next === cur.status ? [] : [eventFor(after, "STATUS_CHANGED", cur.checkoutRunId, agentOf(state, cur.checkoutRunId), `${cur.status} -> ${next}`)];
  return { answer: { __typename: "IssueUpdated", issue: same ? cur : after }, state: newState, events };
}
