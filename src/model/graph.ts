// The work graph (issue 29; docs/lifecycle.md, "The work graph"): creating
// issues (createIssues, with blockers, a parent, a delay, an idempotency key),
// an agent splitting its issue (createSubIssues, parentWaits), and the
// dependency edges (addDependency, removeDependency). None of these changes a
// lock, so none writes an event.
import type { AddDependencyResult, CreateIssuesResult, CreateSubIssuesResult, ErrorAnswer, NotLockOwner, RemoveDependencyResult } from "./answers.js";
import { badInput, issueNotFound, notFound } from "./answers.js";
import { refuseDurations } from "./board.js";
import { refuseRun } from "./runs.js";
import { cyclePath, isLive } from "./rules.js";
import type { CreateInput, Issue, State, Step } from "./state.js";
import { byId, findIssue, findRun, withIssue, withNewIssue } from "./state.js";

const MAX_ISSUES_PER_CALL = 1000;
const MAX_SUB_ISSUES_PER_CALL = 100;
const MAX_BLOCKERS = 100;

/** An input's own checks (BAD_USER_INPUT), as the API makes them before it reads anything. */
function refuseInput(state: State, input: CreateInput, where: string): ErrorAnswer | null {
  const bad = (message: string) => badInput(`${where}${message}`);
  const status = input.status ?? "OPEN";
  if (status !== "OPEN" && status !== "BACKLOG") return bad("status must be BACKLOG or OPEN");
  const maxAttempts = input.maxAttempts ?? 3;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 100) return bad("maxAttempts must be between 1 and 100");
  if ((input.blockedBy?.length ?? 0) > MAX_BLOCKERS) return bad(`blockedBy may name at most ${MAX_BLOCKERS} issues`);
  const key = input.idempotencyKey;
  if (key != null && (key.length === 0 || key.length > 200)) return bad("idempotencyKey must be 1–200 characters");
  const durations = refuseDurations(state, input);
  if (durations) return bad(durations);
  return null;
}

/** The first input assigned to an agent the company does not have: BAD_USER_INPUT, found by the statement (after the run's and the parent's checks). */
const unknownAssignee = (state: State, inputs: readonly CreateInput[]): ErrorAnswer | null =>
  inputs.some((i) => i.assigneeAgentId != null && !state.agents.includes(i.assigneeAgentId))
    ? badInput("assigneeAgentId: no such agent in this company")
    : null;

/** The first id of the form i<n> (n from the number of issues + 1) that no issue has. */
function nextIssueId(state: State): string {
  for (let n = state.issues.length + 1; ; n++) {
    const id = `i${n}`;
    if (!findIssue(state, id)) return id;
  }
}

/** The issue of the company with this idempotency key. */
export const issueWithKey = (state: State, key: string | null | undefined): Issue | undefined =>
  key == null ? undefined : state.issues.find((i) => i.idempotencyKey === key);

/**
 * The inputs created one after another, in input order, each newer than the
 * last (claim order's oldest first): an input whose idempotency key the
 * company already has (an earlier input of the same call included) creates
 * nothing and answers that issue, whatever its other fields say.
 */
function createAll(state0: State, inputs: readonly CreateInput[], parentId: string | null): { state: State; issues: Issue[]; created: string[] } {
  let state = state0;
  const issues: Issue[] = [];
  const created: string[] = [];
  let createdAt = Math.max(-1, ...state.issues.map((i) => i.createdAt)) + 1;
  for (const input of inputs) {
    const existing = issueWithKey(state, input.idempotencyKey);
    if (existing) {
      issues.push(existing);
      continue;
    }
    const issue: Issue = {
      id: nextIssueId(state),
      status: input.status ?? "OPEN",
      priority: input.priority ?? "MEDIUM",
      assigneeAgentId: input.assigneeAgentId ?? null,
      concurrencyKey: input.concurrencyKey ?? null,
      checkoutRunId: null,
      executionRunId: null,
      attemptCount: 0,
      maxAttempts: input.maxAttempts ?? 3,
      lockEpoch: 0,
      createdAt: createdAt++,
      parentId: parentId ?? input.parentId ?? null,
      blockedBy: [...new Set(input.blockedBy ?? [])].sort(byId),
      notBefore: input.notBefore ?? null,
      idempotencyKey: input.idempotencyKey ?? null,
      retryDelaySeconds: input.retryDelaySeconds ?? 0,
      maxExecutionSeconds: input.maxExecutionSeconds ?? null,
      executionLockedAt: null,
      payload: input.payload ?? null,
      result: null,
    };
    state = withNewIssue(state, issue);
    issues.push(issue);
    created.push(issue.id);
  }
  return { state, issues, created };
}

/**
 * The inputs that would create an issue: not those whose idempotency key the
 * company has, or an earlier input of the call has. Only these are held to
 * what they name (assignee, parent, blockers, the cycle parentWaits would
 * close): an input answered by its key answers that issue "whatever the other
 * fields say" (issue 29, Idempotent creation), once its own fields are well formed.
 */
function creating(state: State, inputs: readonly CreateInput[]): CreateInput[] {
  const keys = new Set<string>();
  return inputs.filter((i) => {
    const key = i.idempotencyKey;
    if (key == null) return true;
    const hit = keys.has(key) || issueWithKey(state, key) !== undefined;
    keys.add(key);
    return !hit;
  });
}

/** The first blocker or parent named by the inputs that the company does not have. */
const missingIssue = (state: State, inputs: readonly CreateInput[]): string | undefined =>
  inputs.flatMap((i) => [...(i.blockedBy ?? []), ...(i.parentId != null ? [i.parentId] : [])]).find((id) => !findIssue(state, id));

/**
 * createIssue / createIssues(inputs) (the board; CREATE_ISSUES): every input's
 * checks first (BAD_USER_INPUT, nothing created; more than 1000 inputs too),
 * then, for the inputs that would create (`creating`), an assignee the
 * company does not have (BAD_USER_INPUT); a blocker or parent it does not
 * have is NOT_FOUND, nothing created. Then
 * createAll. A new issue has no dependents, so no edge it brings can close a
 * cycle. No events.
 */
export function createIssues(state: State, args: { inputs: readonly CreateInput[] }): Step<CreateIssuesResult> {
  if (args.inputs.length > MAX_ISSUES_PER_CALL) return { answer: badInput(`at most ${MAX_ISSUES_PER_CALL} issues per call`), state, events: [] };
  for (const [n, input] of args.inputs.entries()) {
    const refused = refuseInput(state, input, args.inputs.length > 1 ? `inputs[${n}].` : "");
    if (refused) return { answer: refused, state, events: [] };
  }
  const fresh = creating(state, args.inputs);
  const noAgent = unknownAssignee(state, fresh);
  if (noAgent) return { answer: noAgent, state, events: [] };
  const missing = missingIssue(state, fresh);
  if (missing) return { answer: notFound(`issue ${missing} not found`), state, events: [] };
  const made = createAll(state, args.inputs, null);
  return { answer: { __typename: "IssuesCreated", issues: made.issues }, state: made.created.length === 0 ? state : made.state, events: [] };
}

/** Whether `from` reaches `to` along blockedBy edges (from === to included). */
function reaches(state: State, from: string, to: string): boolean {
  return from === to || cyclePath(state, to, from) !== null;
}

/**
 * createSubIssues(runId, parentId, inputs, parentWaits) (an agent splits the
 * issue its run holds; CREATE_SUB_ISSUES), in its order:
 *   1. 1–100 inputs, each input's checks (a parentId other than the parent's
 *      included), and with parentWaits no input blocked by the parent itself:
 *      BAD_USER_INPUT;
 *   2. the run (refuseRun: RunNotActive, FORBIDDEN);  3. the parent missing:
 *      IssueNotFound;  4. the run does not hold the parent's checkout:
 *      NotLockOwner;
 *   5. with parentWaits, an input that would create (`creating`) blocked by
 *      an issue that waits on the parent, however indirectly (the parent's
 *      new edge would close a cycle), or more than 100 blockers for the
 *      parent: BAD_USER_INPUT;
 *   6. for the inputs that would create, an assignee the company does not
 *      have: BAD_USER_INPUT; a blocker it does not have: NOT_FOUND;
 *   7. createAll with parentId set (inputs may assign any agent of the
 *      company, or none), and with parentWaits every issue created is added
 *      to the parent's blockedBy (an input answered by its idempotency key
 *      adds no edge). The parent keeps its lock. One transaction, no events.
 */
export function createSubIssues(
  state: State,
  args: { agentId: string; runId: string; parentId: string; inputs: readonly CreateInput[]; parentWaits?: boolean },
): Step<CreateSubIssuesResult> {
  const unchanged = (answer: CreateSubIssuesResult): Step<CreateSubIssuesResult> => ({ answer, state, events: [] });
  if (args.inputs.length < 1 || args.inputs.length > MAX_SUB_ISSUES_PER_CALL)
    return unchanged(badInput(`inputs must hold 1 to ${MAX_SUB_ISSUES_PER_CALL} issues`));
  for (const [n, input] of args.inputs.entries()) {
    const where = `inputs[${n}].`;
    if (input.parentId != null && input.parentId !== args.parentId) return unchanged(badInput(`${where}parentId must be left out`));
    const refused = refuseInput(state, { ...input, parentId: null }, where);
    if (refused) return unchanged(refused);
    if (args.parentWaits && input.blockedBy?.includes(args.parentId)) return unchanged(badInput(`${where}blockedBy names the parent, which waits on it`));
  }
  const refused = refuseRun(state, args.agentId, args.runId);
  if (refused) return unchanged(refused);
  const parent = findIssue(state, args.parentId);
  if (!parent) return unchanged(issueNotFound(args.parentId));
  if (parent.checkoutRunId !== args.runId) return unchanged({ __typename: "NotLockOwner", issueId: parent.id, ownerRunId: parent.checkoutRunId });
  const inputs = args.inputs.map((i) => ({ ...i, parentId: null }));
  const fresh = creating(state, inputs);
  if (args.parentWaits) {
    const loop = fresh.flatMap((i) => i.blockedBy ?? []).find((b) => findIssue(state, b) && reaches(state, b, parent.id));
    if (loop) return unchanged(badInput(`${loop} waits on the parent, which would wait on its sub-issue`));
    const unique = new Set(inputs.map((i, n) => i.idempotencyKey ?? `#${n}`)).size;
    if (parent.blockedBy.length + unique > MAX_BLOCKERS) return unchanged(badInput(`the parent would wait on more than ${MAX_BLOCKERS} issues`));
  }
  const noAgent = unknownAssignee(state, fresh);
  if (noAgent) return unchanged(noAgent);
  const missing = missingIssue(state, fresh);
  if (missing) return unchanged(notFound(`issue ${missing} not found`));
  const made = createAll(state, inputs, parent.id);
  let after = made.state;
  let parentAfter = findIssue(after, parent.id)!;
  if (args.parentWaits && made.created.length > 0) {
    parentAfter = { ...parentAfter, blockedBy: [...new Set([...parentAfter.blockedBy, ...made.created])].sort(byId) };
    after = withIssue(after, parentAfter);
  }
  return { answer: { __typename: "SubIssuesCreated", parent: parentAfter, issues: made.issues }, state: made.created.length === 0 ? state : after, events: [] };
}

/** Who may change an issue's edges: the board (no run named), or an agent whose live run holds the issue's checkout. */
function refuseEditor(state: State, issue: Issue, args: { agentId?: string; runId?: string }): NotLockOwner | null {
  if (args.agentId === undefined) return null;
  const run = findRun(state, args.runId ?? null);
  const holds = run !== undefined && run.agentId === args.agentId && isLive(run, state.clock) && issue.checkoutRunId === run.id;
  return holds ? null : { __typename: "NotLockOwner", issueId: issue.id, ownerRunId: issue.checkoutRunId };
}

/**
 * addDependency(issueId, blockedById, runId) (the board, or an agent whose
 * live run holds issueId's checkout), in its order: the issue, then the
 * blocker missing: IssueNotFound (naming it); not the board and not such a
 * run: NotLockOwner; an edge already there: DependencyAdded, nothing
 * changed; an edge that would close a cycle (a self-edge included):
 * DependencyCycle with cyclePath's path; a 101st blocker: BAD_USER_INPUT;
 * otherwise the edge is added. A held
 * issue keeps its lock: the edge matters from its next claim.
 */
export function addDependency(state: State, args: { issueId: string; blockedById: string; agentId?: string; runId?: string }): Step<AddDependencyResult> {
  const unchanged = (answer: AddDependencyResult): Step<AddDependencyResult> => ({ answer, state, events: [] });
  const cur = findIssue(state, args.issueId);
  if (!cur) return unchanged(issueNotFound(args.issueId));
  if (!findIssue(state, args.blockedById)) return unchanged(issueNotFound(args.blockedById));
  const refused = refuseEditor(state, cur, args);
  if (refused) return unchanged(refused);
  if (cur.blockedBy.includes(args.blockedById)) return unchanged({ __typename: "DependencyAdded", issue: cur });
  const path = cyclePath(state, args.issueId, args.blockedById);
  if (path) return unchanged({ __typename: "DependencyCycle", path });
  if (cur.blockedBy.length >= MAX_BLOCKERS) return unchanged(badInput(`issue ${cur.id} already waits on ${MAX_BLOCKERS} issues`));
  const after: Issue = { ...cur, blockedBy: [...cur.blockedBy, args.blockedById].sort(byId) };
  return { answer: { __typename: "DependencyAdded", issue: after }, state: withIssue(state, after), events: [] };
}

/**
 * removeDependency(issueId, blockedById, runId): the same checks as
 * addDependency (but for the cycle); an edge that is not there answers
 * DependencyRemoved, nothing changed.
 */
export function removeDependency(state: State, args: { issueId: string; blockedById: string; agentId?: string; runId?: string }): Step<RemoveDependencyResult> {
  const unchanged = (answer: RemoveDependencyResult): Step<RemoveDependencyResult> => ({ answer, state, events: [] });
  const cur = findIssue(state, args.issueId);
  if (!cur) return unchanged(issueNotFound(args.issueId));
  if (!findIssue(state, args.blockedById)) return unchanged(issueNotFound(args.blockedById));
  const refused = refuseEditor(state, cur, args);
  if (refused) return unchanged(refused);
  if (!cur.blockedBy.includes(args.blockedById)) return unchanged({ __typename: "DependencyRemoved", issue: cur });
  const after: Issue = { ...cur, blockedBy: cur.blockedBy.filter((b) => b !== args.blockedById) };
  return { answer: { __typename: "DependencyRemoved", issue: after }, state: withIssue(state, after), events: [] };
}
