// The checkout: claimIssue without an issue id (CLAIM_NEXT_FOR_EACH), with
// one (CHECKOUT_IF_EXPECTED, the 11 checks of docs/lifecycle.md), and the
// batch claimIssues (CLAIM_NEXT_SKIP_LOCKED), with or without the execution
// lock; claimIssue with startExecution is the claim, then acquireExecution.
// docs/lifecycle.md, "What can be claimed" and "Claim order".
import type { AcquireExecutionResult, ClaimIssueResult, ClaimIssuesResult, IssueClaimed } from "./answers.js";
import { badInput, issueNotFound } from "./answers.js";
import { acquireExecution } from "./execution.js";
import { refuseRun } from "./runs.js";
import { attemptsAfterDeath, clearLocks, eventFor, inStatementOrder, isActive, isExpired, isLive, isReady, isWaiting, keyRoom, waitingOn } from "./rules.js";
import type { Event, Issue, IssueStatus, State, Step } from "./state.js";
import { UNKEYED, findIssue, findRun, priorityRank, withIssue, withRun } from "./state.js";

/** CLAIMABLE_STATUSES (checkoutIfExpected.ts): a checkout starts only from these, whatever expectedStatuses lists (decision 1). */
export const CLAIMABLE_STATUSES: readonly IssueStatus[] = ["OPEN", "CLAIMED", "IN_PROGRESS"];

/**
 * The issues a claim without an issue id may take, in claim order
 * (docs/lifecycle.md, "Claim order"): ready (isReady: OPEN with an attempt
 * left, no blocker short of DONE, notBefore not ahead), assigned to the agent
 * or, with includeUnassigned, unassigned.
 *  1. priority first;
 *  2. within a priority, the agent's own issues (oldest first), then the
 *     unassigned pool's in rounds: each key with pool work and room gives
 *     its j-th issue in round j, the keys in turn order (keyTurns);
 *  3. within a key, oldest first, then id.
 * Key room is applied by takeInClaimOrder. This is the order the SQL sorts
 * `got` by (IN_CLAIM_ORDER: priority, phase, j, turn_no, created_at, id).
 */
export function claimCandidates(state: State, agentId: string, includeUnassigned: boolean): Issue[] {
  const own = state.issues.filter((i) => i.assigneeAgentId === agentId && isReady(state, i));
  const pool = includeUnassigned ? state.issues.filter((i) => i.assigneeAgentId === null && isReady(state, i)) : [];
  const byAge = (a: Issue, b: Issue) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const inKeyOrder = (a: Issue, b: Issue) => priorityRank(a.priority) - priorityRank(b.priority) || byAge(a, b);
  const turn = keyTurns(state);
  const round = new Map<string, number>();
  const perKey = new Map<string, Issue[]>();
  for (const issue of pool) {
    const key = issue.concurrencyKey ?? UNKEYED;
    perKey.set(key, [...(perKey.get(key) ?? []), issue]);
  }
  for (const issues of perKey.values()) {
    for (const [n, issue] of issues.sort(inKeyOrder).entries()) round.set(issue.id, n + 1);
  }
  const place = (i: Issue) => (i.assigneeAgentId === null ? [1, round.get(i.id)!, turn.get(i.concurrencyKey ?? UNKEYED) ?? 0] : [0, 0, 0]);
  return [...own, ...pool].sort((a, b) => {
    const [pa, ja, ta] = place(a);
    const [pb, jb, tb] = place(b);
    return priorityRank(a.priority) - priorityRank(b.priority) || pa! - pb! || ja! - jb! || ta! - tb! || byAge(a, b);
  });
}

/**
 * The turn order of the keys with unassigned ready work and room (the
 * unkeyed pool included), as a position for each: the best priority among
 * the key's pool issues first, then the key served least recently (never
 * served: first of all), then the key's name ("" before any). (keysInTurn in
 * src/locks/claim/claimOrder.ts; names compare by code point, as the C collation does.)
 */
export function keyTurns(state: State): Map<string, number> {
  const best = new Map<string, number>();
  for (const i of state.issues) {
    if (i.assigneeAgentId !== null || !isReady(state, i)) continue;
    const key = i.concurrencyKey ?? UNKEYED;
    const room = keyRoom(state, i.concurrencyKey);
    if (room !== null && room <= 0) continue;
    best.set(key, Math.min(best.get(key) ?? Infinity, priorityRank(i.priority)));
  }
  const served = (k: string) => state.turns.indexOf(k);
  const keys = [...best.keys()].sort((a, b) => best.get(a)! - best.get(b)! || served(a) - served(b) || (a < b ? -1 : a > b ? 1 : 0));
  return new Map(keys.map((k, n) => [k, n + 1]));
}

/**
 * The first `limit` candidates in claim order, never more of a key's issues
 * than its room: what `limit` claims one after another would take. Issues in
 * `passOver` are passed by, as a claim passes by the rows a concurrent
 * statement holds (FOR UPDATE SKIP LOCKED), the order staying as it was.
 */
export function takeInClaimOrder(state: State, agentId: string, includeUnassigned: boolean, limit: number, passOver: readonly string[] = []): Issue[] {
  const taken: Issue[] = [];
  const room = new Map<string, number>();
  for (const issue of claimCandidates(state, agentId, includeUnassigned)) {
    if (taken.length >= limit) break;
    if (passOver.includes(issue.id)) continue;
    const key = issue.concurrencyKey;
    if (key !== null) {
      const left = room.has(key) ? room.get(key)! : keyRoom(state, key);
      if (left !== null && left <= 0) continue;
      if (left !== null) room.set(key, left - 1);
    }
    taken.push(issue);
  }
  return taken;
}

/**
 * The keys of the issues one statement checked out move to the end of the
 * turns, once each: the unkeyed pool first (and only in a company with named
 * keys), then named keys by name (the keys' trigger gives them their turns
 * in that order, whatever order the statement took the issues in).
 */
export function serveKeys(state: State, issues: readonly Issue[]): State {
  const keys = [...new Set(issues.map((i) => i.concurrencyKey ?? UNKEYED))]
    .filter((k) => k !== UNKEYED || state.keyed)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (keys.length === 0) return state;
  return { ...state, turns: [...state.turns.filter((k) => !keys.includes(k)), ...keys] };
}

/** The checkout taken: CLAIMED by the run, lockEpoch + 1, one CLAIMED event. */
function checkout(state: State, issue: Issue, runId: string, agentId: string): { state: State; issue: Issue; events: Event[] } {
  const after: Issue = { ...issue, status: "CLAIMED", checkoutRunId: runId, executionRunId: null, executionLockedAt: null, lockEpoch: issue.lockEpoch + 1 };
  return { state: withIssue(state, after), issue: after, events: [eventFor(after, "CLAIMED", runId, agentId, null)] };
}

/** One statement's checkout of one issue: taken, and its key served. */
function checkoutOne(state: State, issue: Issue, runId: string, agentId: string): { state: State; issue: Issue; events: Event[] } {
  const taken = checkout(state, issue, runId, agentId);
  return { ...taken, state: serveKeys(taken.state, [taken.issue]) };
}

/**
 * claimIssue(runId, includeUnassigned) — CLAIM_NEXT_FOR_EACH: the run's checks
 * (refuseRun), then the first issue in claim order in a key with room, or
 * NoIssueAvailable.
 */
export function claimNext(
  state: State,
  args: { agentId: string; runId: string; includeUnassigned?: boolean; passOver?: readonly string[] },
): Step<ClaimIssueResult> {
  const refused = refuseRun(state, args.agentId, args.runId);
  if (refused) return { answer: refused, state, events: [] };
  const [next] = takeInClaimOrder(state, args.agentId, args.includeUnassigned ?? false, 1, args.passOver);
  if (!next) return { answer: { __typename: "NoIssueAvailable" }, state, events: [] };
  const claimed = checkoutOne(state, next, args.runId, args.agentId);
  return {
    answer: { __typename: "IssueClaimed", issue: claimed.issue, runId: args.runId, alreadyHeld: false, adopted: false },
    state: claimed.state,
    events: claimed.events,
  };
}

/**
 * claimIssue(runId, issueId, expectedStatuses) — CHECKOUT_IF_EXPECTED, in the
 * order of docs/lifecycle.md:
 *   1. the run (refuseRun);  2. IssueNotFound;  3. already held by this run:
 *   alreadyHeld;  3a. OPEN but not ready for its blockers or notBefore
 *   (isWaiting): IssueWaiting, whatever expectedStatuses says;
 *   4. not active and its key full: ConcurrencyLimitReached;
 *   5. status not in expectedStatuses (default [OPEN]) or not one of
 *   CLAIMABLE_STATUSES: UnexpectedStatus;  6. held by a live run:
 *   CheckoutConflict (live);  7. assigned to another agent: CheckoutConflict
 *   (not live, owner = assignee);  8. held by a dead run and adopting leaves
 *   no attempt: ESCALATED, AttemptsExhausted;  9. no attempt left:
 *   AttemptsExhausted;  10. held by a dead run: adopted;  11. OPEN: claimed.
 * A holder still RUNNING whose lease has run out is written TIMED_OUT first
 * (decision 3). The SQL does that whatever the verdict, once the caller's run
 * may act and the issue exists (the `expired` CTE always runs): so does the model.
 */
export function checkoutIfExpected(
  state0: State,
  args: { agentId: string; runId: string; issueId: string; expectedStatuses?: readonly IssueStatus[] | null },
): Step<ClaimIssueResult> {
  const refused = refuseRun(state0, args.agentId, args.runId);
  if (refused) return { answer: refused, state: state0, events: [] };
  const cur = findIssue(state0, args.issueId);
  if (!cur) return { answer: issueNotFound(args.issueId), state: state0, events: [] };
  let state = state0;
  const holderBefore = findRun(state0, cur.checkoutRunId);
  if (cur.checkoutRunId !== null && cur.checkoutRunId !== args.runId && holderBefore && isExpired(holderBefore, state0.clock)) {
    state = withRun(state0, { ...holderBefore, status: "TIMED_OUT", finishedAt: state0.clock });
  }
  const unchanged = (answer: ClaimIssueResult): Step<ClaimIssueResult> => ({ answer, state, events: [] });
  const holder = findRun(state, cur.checkoutRunId);
  // decision 2: a holder the statement cannot see (here: missing) is treated as live
  const holderLive = cur.checkoutRunId !== null && (!holder || isLive(holder, state.clock));
  const expected = [...(args.expectedStatuses ?? ["OPEN"])];

  // 3.
  if (cur.checkoutRunId === args.runId) {
    return unchanged({ __typename: "IssueClaimed", issue: cur, runId: args.runId, alreadyHeld: true, adopted: false });
  }
  // 3a. (issue 29) an adoption of a CLAIMED or IN_PROGRESS issue is not affected
  if (isWaiting(state, cur)) {
    return unchanged({ __typename: "IssueWaiting", issueId: cur.id, waitingOn: waitingOn(state, cur), notBefore: cur.notBefore });
  }
  // 4.
  const room = keyRoom(state, cur.concurrencyKey);
  if (!isActive(cur.status) && room !== null && room <= 0) {
    return unchanged({ __typename: "ConcurrencyLimitReached", key: cur.concurrencyKey!, maxActive: state.limits[cur.concurrencyKey!]! });
  }
  // 5.
  if (!(expected.includes(cur.status) && CLAIMABLE_STATUSES.includes(cur.status))) {
    return unchanged({ __typename: "UnexpectedStatus", issueId: cur.id, status: cur.status, expectedStatuses: expected });
  }
  // 6.
  if (holderLive) {
    return unchanged({
      __typename: "CheckoutConflict",
      issueId: cur.id,
      status: cur.status,
      ownerAgentId: holder?.agentId ?? null,
      ownerRunId: cur.checkoutRunId,
      executionRunId: cur.executionRunId,
      holderRunIsLive: true,
    });
  }
  // 7.
  if (cur.assigneeAgentId !== null && cur.assigneeAgentId !== args.agentId) {
    return unchanged({
      __typename: "CheckoutConflict",
      issueId: cur.id,
      status: cur.status,
      ownerAgentId: cur.assigneeAgentId,
      ownerRunId: cur.checkoutRunId,
      executionRunId: cur.executionRunId,
      holderRunIsLive: false,
    });
  }
  // 8.
  if (cur.checkoutRunId !== null && attemptsAfterDeath(cur) >= cur.maxAttempts) {
    const after: Issue = { ...clearLocks(cur), status: "ESCALATED", attemptCount: attemptsAfterDeath(cur) };
    return {
      answer: { __typename: "AttemptsExhausted", issueId: cur.id, attemptCount: after.attemptCount, maxAttempts: after.maxAttempts },
      state: withIssue(state, after),
      events: [eventFor(after, "ESCALATED", args.runId, args.agentId, "HOLDER_DEAD")],
    };
  }
  // 9.
  if (cur.attemptCount >= cur.maxAttempts) {
    return unchanged({ __typename: "AttemptsExhausted", issueId: cur.id, attemptCount: cur.attemptCount, maxAttempts: cur.maxAttempts });
  }
  // 10.
  if (cur.checkoutRunId !== null) {
    const after: Issue = {
      ...cur,
      status: "CLAIMED",
      checkoutRunId: args.runId,
      executionRunId: null,
      executionLockedAt: null,
      attemptCount: attemptsAfterDeath(cur),
      lockEpoch: cur.lockEpoch + 1,
    };
    return {
      answer: { __typename: "IssueClaimed", issue: after, runId: args.runId, alreadyHeld: false, adopted: true },
      state: serveKeys(withIssue(state, after), [after]),
      events: [eventFor(after, "ADOPTED", args.runId, args.agentId, "HOLDER_DEAD")],
    };
  }
  // 11.
  if (cur.status === "OPEN") {
    const claimed = checkoutOne(state, cur, args.runId, args.agentId);
    return {
      answer: { __typename: "IssueClaimed", issue: claimed.issue, runId: args.runId, alreadyHeld: false, adopted: false },
      state: claimed.state,
      events: claimed.events,
    };
  }
  return unchanged({ __typename: "UnexpectedStatus", issueId: cur.id, status: cur.status, expectedStatuses: expected });
}

/**
 * claimIssue: with an issue id, checkoutIfExpected; without, claimNext. With
 * startExecution (issue 31), a claim that answered IssueClaimed is followed
 * at once by acquireExecution of the claimed issue by the same run, and the
 * answer is startedAnswer's: exactly the two calls one after the other (the
 * API runs them as the checkout then acquireExecution by id, and as one
 * statement without: nothing can come between them there).
 */
export function claimIssue(
  state: State,
  args: {
    agentId: string;
    runId: string;
    issueId?: string | null;
    expectedStatuses?: readonly IssueStatus[] | null;
    includeUnassigned?: boolean;
    startExecution?: boolean;
    passOver?: readonly string[];
  },
): Step<ClaimIssueResult> {
  const claimed = args.issueId ? checkoutIfExpected(state, { ...args, issueId: args.issueId }) : claimNext(state, args);
  if (!args.startExecution || claimed.answer.__typename !== "IssueClaimed") return claimed;
  const acquired = acquireExecution(claimed.state, { agentId: args.agentId, runId: args.runId, issueId: claimed.answer.issue.id });
  return { answer: startedAnswer(claimed.answer, acquired.answer), state: acquired.state, events: [...claimed.events, ...acquired.events] };
}

/**
 * claimIssue(startExecution)'s answer from the claim's IssueClaimed and the
 * acquireExecution that followed (src/locks/claim/claimIssue.ts, started):
 * acquired, the claim's answer with the issue as it is now (IN_PROGRESS);
 * AttemptsExhausted, RunNotActive and IssueNotFound as acquireExecution
 * answered them; a hold lost in between (ExecutionConflict, NotCheckedOut:
 * only a concurrent command can do that) a CheckoutConflict naming the
 * issue's status at the claim and, for ExecutionConflict, the run executing it.
 */
export function startedAnswer(claimed: IssueClaimed, acquired: AcquireExecutionResult): ClaimIssueResult {
  switch (acquired.__typename) {
    case "ExecutionAcquired":
      return { ...claimed, issue: acquired.issue };
    case "ExecutionConflict":
    case "NotCheckedOut": {
      const owner = acquired.__typename === "ExecutionConflict" ? acquired : null;
      return {
        __typename: "CheckoutConflict",
        issueId: claimed.issue.id,
        status: claimed.issue.status,
        ownerAgentId: owner?.ownerAgentId ?? null,
        ownerRunId: owner?.ownerRunId ?? null,
        executionRunId: owner?.ownerRunId ?? null,
        holderRunIsLive: owner !== null,
      };
    }
    default:
      return acquired;
  }
}

/**
 * claimIssues(runId, limit, includeUnassigned, acquireExecution) —
 * CLAIM_NEXT_SKIP_LOCKED: limit 1–1000 (BAD_USER_INPUT otherwise), the run's
 * checks, then the issues `limit` claims one after another would take (a
 * blocker a batch takes is not DONE: a batch never takes an issue and its
 * blocker together). With acquireExecution each also enters IN_PROGRESS with
 * its attempt counted and its execution's start kept,
 * recorded as CLAIMED then EXECUTION_ACQUIRED (claimable issues always have
 * an attempt left). Events in statement order (issue id, then kind).
 */
export function claimIssues(
  state: State,
  args: { agentId: string; runId: string; limit: number; includeUnassigned?: boolean; acquireExecution?: boolean; passOver?: readonly string[] },
): Step<ClaimIssuesResult> {
  if (!Number.isInteger(args.limit) || args.limit < 1 || args.limit > 1000) return { answer: badInput("limit must be between 1 and 1000"), state, events: [] };
  const refused = refuseRun(state, args.agentId, args.runId);
  if (refused) return { answer: refused, state, events: [] };
  const next = takeInClaimOrder(state, args.agentId, args.includeUnassigned ?? false, args.limit, args.passOver);
  if (next.length === 0) return { answer: { __typename: "NoIssueAvailable" }, state, events: [] };
  let after = state;
  const issues: Issue[] = [];
  const events: Event[] = [];
  for (const issue of next) {
    const claimed = checkout(after, issue, args.runId, args.agentId);
    events.push(...claimed.events);
    let held = claimed.issue;
    if (args.acquireExecution) {
      held = { ...held, status: "IN_PROGRESS", executionRunId: args.runId, executionLockedAt: after.clock, attemptCount: held.attemptCount + 1 };
      events.push(eventFor(held, "EXECUTION_ACQUIRED", args.runId, args.agentId, null));
    }
    after = withIssue(claimed.state, held);
    issues.push(held);
  }
  return { answer: { __typename: "IssuesClaimed", issues, runId: args.runId }, state: serveKeys(after, issues), events: inStatementOrder(events) };
}
