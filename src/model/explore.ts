// Exhaustive exploration of the model: breadth first from one or more initial
// states, over every command of an alphabet, each reachable state once (by a
// canonical key), checking every state invariant in every reachable state and
// every transition invariant on every transition. Pure and synchronous: a
// test (test/model/explore.test.ts) or a script can run it.
import type { Answer } from "./answers.js";
import type { UpdateIssueInput } from "./board.js";
import type { Command } from "./commands.js";
import { apply, describe } from "./commands.js";
import type { CreateInput } from "./state.js";
import type { StateInvariant, TransitionInvariant } from "./invariants.js";
import { REACHABLE_STATE_CHECKS, TRANSITION_INVARIANTS, checkInitial } from "./invariants.js";
import { ISSUE_STATUSES } from "../domain/types.js";
import { FUSED_IS_A_SEQUENCE, asSequence, isFused, notItsSequence } from "./fused.js";
import { issueWithKey } from "./graph.js";
import type { ClaimNext } from "./release.js";
import { isLive } from "./rules.js";
import type { IssueStatus, ReleaseOutcome, Run, RunStatus, State, Step } from "./state.js";

/**
 * A run that matters from here on: live, or holding a lock. Any other run is
 * dead for ever (no status leads back to RUNNING) and holds nothing, so it can
 * neither act nor be recovered: all it can still do is answer RunNotActive.
 */
export const runMatters = (s: State, run: Run): boolean =>
  isLive(run, s.clock) || s.issues.some((i) => i.checkoutRunId === run.id || i.executionRunId === run.id);

/**
 * The key two states share when the model cannot tell them apart from here
 * on, up to the names of runs: what every verb reads.
 *  - The clock is absolute: a RUNNING run's lease is kept as the time it has left.
 *  - lockEpoch only grows and no verb reads it (its rule is checked on every
 *    transition, which needs only the difference).
 *  - Which agents are disabled is kept (startRun and the scheduler read it).
 *  - Runs that no longer matter (runMatters) are left out, and the others
 *    are named by what they are (agent, status, lease left, what they hold),
 *    not by when they were started: two states that differ only in run ids
 *    are one state.
 *  - The work graph's fields (issue 29) are kept as what they decide:
 *    notBefore as the time left (none once due), an execution's age up to
 *    `horizon` (the longest maxExecutionSeconds the exploration can give:
 *    older executions are overdue whatever the limit), blockers, parent and
 *    idempotency key as they are. Payload and result are left out: no verb
 *    reads them (their rules are checked on every transition).
 * Without these the reachable set would be infinite.
 */
export function canonicalKey(s: State, horizon = 0): string {
  const sigs: { id: string; sig: string }[] = [];
  for (const r of s.runs) {
    if (!runMatters(s, r)) continue;
    let held = "";
    for (let n = 0; n < s.issues.length; n++) {
      const i = s.issues[n]!;
      if (i.checkoutRunId === r.id) held += `c${n}`;
      if (i.executionRunId === r.id) held += `x${n}`;
    }
    sigs.push({ id: r.id, sig: `${r.agentId}.${r.status}.${r.status === "RUNNING" ? Math.max(0, r.leaseExpiresAt - s.clock) : ""}.${held}` });
  }
  sigs.sort((a, b) => (a.sig < b.sig ? -1 : a.sig > b.sig ? 1 : 0));
  const name = (runId: string | null) => (runId === null ? "-" : String(sigs.findIndex((x) => x.id === runId)));
  let key = "";
  for (const i of s.issues) {
    key += `${i.status}.${name(i.checkoutRunId)}.${name(i.executionRunId)}.${i.attemptCount}.${i.maxAttempts}.`;
    key += `${i.assigneeAgentId ?? "-"}.${i.concurrencyKey ?? "-"}`;
    const wait = i.notBefore === null || i.notBefore <= s.clock ? 0 : i.notBefore - s.clock;
    const age = i.executionLockedAt === null || horizon === 0 ? 0 : Math.min(s.clock - i.executionLockedAt, horizon);
    if (
      i.blockedBy.length > 0 ||
      wait > 0 ||
      i.retryDelaySeconds > 0 ||
      i.maxExecutionSeconds !== null ||
      age > 0 ||
      i.parentId !== null ||
      i.idempotencyKey !== null
    ) {
      key += `.${i.id}<${i.blockedBy.join("+")}.${wait}.${i.retryDelaySeconds}.${i.maxExecutionSeconds ?? "-"}.${age}.${i.parentId ?? "-"}.${i.idempotencyKey ?? "-"}`;
    }
    key += "|";
  }
  for (const x of sigs) key += `${x.sig}|`;
  if (s.disabled.length > 0) key += `disabled:${s.disabled.join(",")}`;
  return key;
}

export interface Alphabet {
  /** Issue ids that do not exist (IssueNotFound). Default ["i-unknown"]. */
  unknownIssues?: readonly string[];
  /** expectedStatuses lists tried with claimIssue(issueId); undefined means left out ([OPEN]). */
  expectedStatuses?: readonly (readonly IssueStatus[] | undefined)[];
  finishStatuses?: readonly RunStatus[];
  outcomes?: readonly ReleaseOutcome[];
  claimLimits?: readonly number[];
  /** updateIssue inputs tried on every issue. */
  updates?: readonly UpdateIssueInput[];
  /** Also try each verb once with another agent's run, a run that does not exist, and bad input. Default true. */
  probes?: boolean;
  /** disableAgent and enableAgent for each agent. Default true. */
  agentSwitches?: boolean;
  /** The work graph's verbs (issue 29): none when left out. */
  graph?: GraphAlphabet;
  /** Delays, backoff and results (issue 29): none when left out. */
  time?: TimeAlphabet;
  /** The fused calls (issue 31): claimIssue with startExecution, releaseIssue with next. None when left out. */
  fused?: FusedAlphabet;
}

export interface FusedAlphabet {
  /** The `next` inputs tried with every release outcome. Default: the defaults ({}), the pool too, and the pool without the execution lock. */
  nexts?: readonly ClaimNext[];
}

/** An issue to create, for an exploration: a CreateInput whose blockers and notBefore are drawn from the state. */
export interface CreateTemplate extends Omit<CreateInput, "blockedBy" | "notBefore" | "parentId"> {
  /** Tried once with each issue of the company as its one blocker (and not without one: list the template again for that). */
  blockedByEach?: boolean;
  /** notBefore this many clock units after the clock. */
  notBeforeIn?: number;
}

export interface GraphAlphabet {
  /** createIssues of each template alone, while the company has fewer than maxIssues issues (an input whose key exists is always tried). */
  creates?: readonly CreateTemplate[];
  /** createSubIssues of each template by each run that matters on each issue it holds, parentWaits false and true. */
  subIssues?: readonly CreateTemplate[];
  /** Default 3. */
  maxIssues?: number;
  /** addDependency and removeDependency of every ordered pair of issues (self-edges too) by the board, and by each run that matters on the issues it holds. Default true. */
  edges?: boolean;
}

export interface TimeAlphabet {
  /** retryAfterSeconds tried with REQUEUE and FAILED by every release (besides none). */
  retryAfter?: readonly number[];
  /** The board sets notBefore this many clock units after the clock (and clears it). */
  delays?: readonly number[];
  /** A release FAILED with a result, by each run on each issue. */
  results?: boolean;
}

/** The longest maxExecutionSeconds an exploration from these roots with this alphabet can give an issue (canonicalKey's horizon). */
export function horizonOf(roots: readonly State[], alphabet: Alphabet = {}): number {
  const limits = [
    ...roots.flatMap((r) => r.issues.map((i) => i.maxExecutionSeconds)),
    ...(alphabet.updates ?? []).map((u) => u.maxExecutionSeconds),
    ...(alphabet.graph?.creates ?? []).map((t) => t.maxExecutionSeconds),
    ...(alphabet.graph?.subIssues ?? []).map((t) => t.maxExecutionSeconds),
  ];
  return Math.max(0, ...limits.map((m) => m ?? 0));
}

/** The inputs a template stands for in `s`. */
function fromTemplate(s: State, t: CreateTemplate): CreateInput[] {
  const { blockedByEach, notBeforeIn, ...input } = t;
  const base: CreateInput = notBeforeIn === undefined ? input : { ...input, notBefore: s.clock + notBeforeIn };
  return blockedByEach ? s.issues.map((i) => ({ ...base, blockedBy: [i.id] })) : [base];
}

/** The expectedStatuses lists that decide every verdict: the answer depends only on whether the issue's status is listed. */
export const EXPECTED_CHOICES: readonly (readonly IssueStatus[] | undefined)[] = [
  undefined,
  [],
  ["CLAIMED", "IN_PROGRESS"],
  ["OPEN", "CLAIMED", "IN_PROGRESS"],
  ISSUE_STATUSES,
];

/** Every board move (each status, reopen raising or lowering maxAttempts), maxAttempts edits and reassignments. */
export function boardUpdates(agents: readonly string[], maxAttempts: readonly number[], keys: readonly (string | null)[] = []): UpdateIssueInput[] {
  return [
    ...ISSUE_STATUSES.map((status): UpdateIssueInput => ({ status })),
    ...maxAttempts.map((m): UpdateIssueInput => ({ status: "OPEN", maxAttempts: m })),
    ...maxAttempts.map((m): UpdateIssueInput => ({ maxAttempts: m })),
    ...[null, ...agents].map((a): UpdateIssueInput => ({ assigneeAgentId: a })),
    ...keys.map((k): UpdateIssueInput => ({ concurrencyKey: k })),
  ];
}

/**
 * Every command worth trying in `s`:
 *  - for each run that matters (runMatters), every issue × argument choice of
 *    every agent verb: each release outcome, claimIssues limits with and
 *    without the pool and the execution lock, and the expectedStatuses lists
 *    that decide a verdict (one that names the issue's status, one that does
 *    not); the unknown issue only with the first such run;
 *  - for the first run that no longer matters, one command of each agent
 *    verb (refuseRun answers them whatever their arguments);
 *  - probes (alphabet.probes): another agent's run (FORBIDDEN), a run that
 *    does not exist, finishRun RUNNING and other bad input;
 *  - startRun for each agent, forceReleaseIssue and every update of the
 *    alphabet on each issue, runHeartbeat, tick and sweep;
 *  - disableAgent and enableAgent for each agent (alphabet.agentSwitches),
 *    and with probes a blank reason and an unknown agent;
 *  - the fused calls (alphabet.fused): fusedCommandsFor for each run that
 *    matters, one of each for the first run that does not, and with probes
 *    another agent's run.
 */
export function commandsFor(s: State, alphabet: Alphabet = {}): Command[] {
  const known = s.issues.map((i) => i.id);
  const issues = [...known, ...(alphabet.unknownIssues ?? ["i-unknown"])];
  const expected = alphabet.expectedStatuses ?? EXPECTED_CHOICES;
  const finishes = alphabet.finishStatuses ?? (["SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"] as const);
  const outcomes = alphabet.outcomes ?? (["DONE", "BLOCKED", "FAILED", "REQUEUE"] as const);
  const limits = alphabet.claimLimits ?? [1, 2];
  const updates = alphabet.updates ?? boardUpdates(s.agents, [1, 2, 3]);
  const out: Command[] = [];
  for (const agentId of s.agents) out.push({ verb: "startRun", agentId });
  // Every command for the runs that matter; a run that no longer matters
  // (dead, holding nothing) is refused by refuseRun whatever the arguments, so
  // the first such run gets one command of each verb, and the others none.
  const matter = s.runs.filter((r) => runMatters(s, r));
  const gone = s.runs.find((r) => !runMatters(s, r));
  for (const run of matter) {
    const a = { agentId: run.agentId, runId: run.id };
    const ids = run === matter[0] ? issues : known;
    out.push({ verb: "heartbeatRun", ...a });
    for (const status of finishes) out.push({ verb: "finishRun", ...a, status });
    for (const includeUnassigned of [false, true]) out.push({ verb: "claimIssue", ...a, includeUnassigned });
    for (const issueId of ids) {
      for (const e of expectedListsFor(s, issueId, expected)) {
        out.push(e === undefined ? { verb: "claimIssue", ...a, issueId } : { verb: "claimIssue", ...a, issueId, expectedStatuses: [...e] });
      }
      out.push({ verb: "acquireExecution", ...a, issueId });
      for (const outcome of outcomes) out.push({ verb: "releaseIssue", ...a, issueId, outcome });
    }
    for (const outcome of outcomes) out.push({ verb: "releaseIssues", ...a, issueIds: ids, outcome });
    if (alphabet.time) timeCommandsFor(alphabet.time, a, known, out);
    if (alphabet.fused) fusedCommandsFor(s, alphabet.fused, a, ids, expected, outcomes, out);
    if (alphabet.graph) graphCommandsFor(s, alphabet.graph, a, out);
    for (const limit of limits) {
      for (const includeUnassigned of [false, true]) {
        for (const acquireExecution of [false, true]) out.push({ verb: "claimIssues", ...a, limit, includeUnassigned, acquireExecution });
      }
    }
  }
  if (gone) {
    const a = { agentId: gone.agentId, runId: gone.id };
    out.push({ verb: "heartbeatRun", ...a }, { verb: "finishRun", ...a, status: "SUCCEEDED" }, { verb: "claimIssue", ...a, includeUnassigned: true });
    out.push({ verb: "claimIssue", ...a, issueId: known[0]!, expectedStatuses: [...ISSUE_STATUSES] }, { verb: "acquireExecution", ...a, issueId: known[0]! });
    out.push({ verb: "releaseIssue", ...a, issueId: known[0]!, outcome: "REQUEUE" }, { verb: "releaseIssues", ...a, issueIds: known, outcome: "FAILED" });
    out.push({ verb: "claimIssues", ...a, limit: 2, includeUnassigned: true, acquireExecution: true });
    if (alphabet.fused) {
      out.push(
        { verb: "claimIssue", ...a, includeUnassigned: true, startExecution: true },
        { verb: "claimIssue", ...a, issueId: known[0]!, startExecution: true },
      );
      out.push({ verb: "releaseIssue", ...a, issueId: known[0]!, outcome: "REQUEUE", next: {} });
    }
  }
  if (alphabet.probes ?? true) {
    const first = s.runs[0];
    const other = first && s.agents.find((x) => x !== first.agentId);
    const agentId = s.agents[0]!;
    if (first && other) {
      const a = { agentId: other, runId: first.id };
      out.push({ verb: "claimIssue", ...a }, { verb: "heartbeatRun", ...a }, { verb: "finishRun", ...a, status: "SUCCEEDED" });
      out.push({ verb: "acquireExecution", ...a, issueId: issues[0]! }, { verb: "releaseIssue", ...a, issueId: issues[0]!, outcome: "REQUEUE" });
      if (alphabet.fused)
        out.push({ verb: "claimIssue", ...a, startExecution: true }, { verb: "releaseIssue", ...a, issueId: issues[0]!, outcome: "DONE", next: {} });
    }
    const missing = { agentId, runId: "r-unknown" };
    out.push({ verb: "claimIssue", ...missing }, { verb: "heartbeatRun", ...missing }, { verb: "finishRun", ...missing, status: "SUCCEEDED" });
    out.push({ verb: "claimIssues", ...missing, limit: 1 }, { verb: "releaseIssues", ...missing, issueIds: issues, outcome: "FAILED" });
    if (first) out.push({ verb: "finishRun", agentId: first.agentId, runId: first.id, status: "RUNNING" });
    out.push({ verb: "forceReleaseIssue", issueId: issues[0]!, reason: "  " }, { verb: "updateIssue", issueId: issues[0]!, input: { maxAttempts: 0 } });
    if (alphabet.agentSwitches ?? true) {
      out.push(
        { verb: "disableAgent", agentId, reason: "  " },
        { verb: "disableAgent", agentId: "agent-unknown", reason: "operator" },
        { verb: "enableAgent", agentId: "agent-unknown" },
      );
    }
  }
  for (const issueId of known) {
    out.push({ verb: "forceReleaseIssue", issueId, reason: "operator" });
    for (const input of updates) out.push({ verb: "updateIssue", issueId, input });
    for (const d of alphabet.time?.delays ?? []) out.push({ verb: "updateIssue", issueId, input: { notBefore: s.clock + d } });
    if (alphabet.time?.delays?.length) out.push({ verb: "updateIssue", issueId, input: { notBefore: null } });
  }
  if (alphabet.graph) boardGraphCommandsFor(s, alphabet.graph, alphabet.probes ?? true, out);
  if (alphabet.time && (alphabet.probes ?? true) && s.runs[0]) {
    // retryAfterSeconds with DONE, and past a day: BAD_USER_INPUT whatever else
    const a = { agentId: s.runs[0].agentId, runId: s.runs[0].id, issueId: known[0]! };
    out.push({ verb: "releaseIssue", ...a, outcome: "DONE", retryAfterSeconds: 0 }, { verb: "releaseIssue", ...a, outcome: "FAILED", retryAfterSeconds: -1 });
  }
  for (const issueId of issues.slice(known.length)) {
    out.push({ verb: "forceReleaseIssue", issueId, reason: "operator" }, { verb: "updateIssue", issueId, input: { status: "OPEN" } });
  }
  if (alphabet.agentSwitches ?? true) {
    for (const agentId of s.agents) out.push({ verb: "disableAgent", agentId, reason: "operator" }, { verb: "enableAgent", agentId });
  }
  out.push({ verb: "runHeartbeat" }, { verb: "tick" }, { verb: "sweep" });
  return out;
}

/** The defaults of ClaimNextInput, the pool too, and the pool without the execution lock. */
export const NEXT_CHOICES: readonly ClaimNext[] = [{}, { includeUnassigned: true }, { includeUnassigned: true, startExecution: false }];

/**
 * A run's fused calls (FusedAlphabet): claim-next with startExecution, with
 * and without the pool; the claim by id with startExecution of every issue
 * with one expectedStatuses list of each kind, as the plain claim is tried;
 * and every release outcome of every issue with each `next`.
 */
function fusedCommandsFor(
  s: State,
  fused: FusedAlphabet,
  a: { agentId: string; runId: string },
  ids: readonly string[],
  expected: readonly (readonly IssueStatus[] | undefined)[],
  outcomes: readonly ReleaseOutcome[],
  out: Command[],
): void {
  for (const includeUnassigned of [false, true]) out.push({ verb: "claimIssue", ...a, includeUnassigned, startExecution: true });
  for (const issueId of ids) {
    for (const e of expectedListsFor(s, issueId, expected)) {
      out.push(
        e === undefined
          ? { verb: "claimIssue", ...a, issueId, startExecution: true }
          : { verb: "claimIssue", ...a, issueId, expectedStatuses: [...e], startExecution: true },
      );
    }
    for (const outcome of outcomes)
      for (const next of fused.nexts ?? NEXT_CHOICES) out.push({ verb: "releaseIssue", ...a, issueId, outcome, next: { ...next } });
  }
}

/**
 * The expectedStatuses lists worth trying for a claim of `issueId`: the
 * verdict depends on a list only through whether it names the issue's
 * status, so one list of each kind is enough (the first in order).
 */
function expectedListsFor(s: State, issueId: string, expected: readonly (readonly IssueStatus[] | undefined)[]): (readonly IssueStatus[] | undefined)[] {
  const status = s.issues.find((i) => i.id === issueId)?.status;
  const tried = new Set<boolean>();
  return expected.filter((e) => {
    const listed = (e ?? ["OPEN"]).includes(status ?? "OPEN");
    if (status !== undefined && tried.has(listed)) return false;
    tried.add(listed);
    return true;
  });
}

/** A run's releases with retryAfterSeconds, and with a result (TimeAlphabet). */
function timeCommandsFor(time: TimeAlphabet, a: { agentId: string; runId: string }, known: readonly string[], out: Command[]): void {
  for (const issueId of known) {
    for (const retryAfterSeconds of time.retryAfter ?? []) {
      for (const outcome of ["REQUEUE", "FAILED"] as const) out.push({ verb: "releaseIssue", ...a, issueId, outcome, retryAfterSeconds });
    }
    if (time.results) out.push({ verb: "releaseIssue", ...a, issueId, outcome: "FAILED", result: { said: `${issueId} by ${a.runId}` } });
  }
}

/** A run's graph verbs: createSubIssues under each issue it holds, and edges of those issues (GraphAlphabet). */
function graphCommandsFor(s: State, graph: GraphAlphabet, a: { agentId: string; runId: string }, out: Command[]): void {
  const held = s.issues.filter((i) => i.checkoutRunId === a.runId);
  const room = s.issues.length < (graph.maxIssues ?? 3);
  for (const parent of held) {
    for (const t of graph.subIssues ?? []) {
      for (const input of fromTemplate(s, t)) {
        if (!room && !issueWithKey(s, input.idempotencyKey)) continue;
        for (const parentWaits of [false, true]) out.push({ verb: "createSubIssues", ...a, parentId: parent.id, inputs: [input], parentWaits });
      }
    }
    if (graph.edges ?? true) {
      for (const other of s.issues) {
        out.push({ verb: "addDependency", ...a, issueId: parent.id, blockedById: other.id });
        if (parent.blockedBy.includes(other.id)) out.push({ verb: "removeDependency", ...a, issueId: parent.id, blockedById: other.id });
      }
    }
  }
}

/** The board's graph verbs: createIssues of each template, every edge added and removed, and the refusals (probes). */
function boardGraphCommandsFor(s: State, graph: GraphAlphabet, probes: boolean, out: Command[]): void {
  const room = s.issues.length < (graph.maxIssues ?? 3);
  for (const t of graph.creates ?? []) {
    for (const input of fromTemplate(s, t)) if (room || issueWithKey(s, input.idempotencyKey)) out.push({ verb: "createIssues", inputs: [input] });
  }
  if (graph.edges ?? true) {
    for (const i of s.issues) {
      for (const b of s.issues) {
        out.push({ verb: "addDependency", issueId: i.id, blockedById: b.id });
        if (i.blockedBy.includes(b.id)) out.push({ verb: "removeDependency", issueId: i.id, blockedById: b.id });
      }
    }
  }
  if (!probes) return;
  const first = s.issues[0]!.id;
  out.push({ verb: "addDependency", issueId: "i-unknown", blockedById: first }, { verb: "addDependency", issueId: first, blockedById: "i-unknown" });
  out.push({ verb: "removeDependency", issueId: first, blockedById: "i-unknown" });
  out.push({ verb: "createIssues", inputs: [{ blockedBy: ["i-unknown"] }] }, { verb: "createIssues", inputs: [{ idempotencyKey: "" }] });
  const run = s.runs.find((r) => isLive(r, s.clock));
  if (run) {
    // a live run that holds nothing of these: NotLockOwner; an unknown parent, no inputs, an unknown blocker
    const a = { agentId: run.agentId, runId: run.id };
    const notHeld = s.issues.find((i) => i.checkoutRunId !== run.id);
    if (notHeld) {
      out.push(
        { verb: "addDependency", ...a, issueId: notHeld.id, blockedById: first },
        { verb: "removeDependency", ...a, issueId: notHeld.id, blockedById: first },
      );
      out.push({ verb: "createSubIssues", ...a, parentId: notHeld.id, inputs: [{}] });
    }
    out.push({ verb: "createSubIssues", ...a, parentId: "i-unknown", inputs: [{}] }, { verb: "createSubIssues", ...a, parentId: first, inputs: [] });
    const parent = s.issues.find((i) => i.checkoutRunId === run.id);
    if (parent) {
      out.push({ verb: "createSubIssues", ...a, parentId: parent.id, inputs: [{ blockedBy: ["i-unknown"] }] });
      out.push({ verb: "createSubIssues", ...a, parentId: parent.id, inputs: [{ blockedBy: [parent.id] }], parentWaits: true });
    }
  }
}

export interface Violation {
  invariant: string;
  doc: string;
  message: string;
  /** The commands from an initial state to the failure. */
  trace: string[];
}

export interface ExploreOptions {
  roots: readonly State[];
  alphabet?: Alphabet;
  /** Transitions that would leave more runs that matter (runMatters) than this are not explored. */
  maxRuns: number;
  stateChecks?: readonly StateInvariant[];
  transitionChecks?: readonly TransitionInvariant[];
  /** How a command is run: the model's `apply` unless a test swaps in a broken verb to see the exploration catch it. */
  apply?: (state: State, command: Command) => Step<Answer>;
  /** Called on every transition (coverage). */
  observe?: (before: State, command: Command, step: Step<Answer>) => void;
  /** Stop exploring after this many states (a guard against a state space that exploded). */
  maxStates?: number;
  /** Stop after this many violations. Default 20. */
  maxViolations?: number;
}

export interface ExploreResult {
  states: number;
  transitions: number;
  /** Transitions not taken because they would have made more than maxRuns runs. */
  pruned: number;
  /** BFS depth: the longest shortest path from an initial state. */
  depth: number;
  /** Whether every reachable state was explored (false when maxStates or maxViolations stopped it). */
  complete: boolean;
  violations: Violation[];
  ms: number;
}

/** Breadth-first, exhaustive: every reachable state once, every command in each. */
export function explore(options: ExploreOptions): ExploreResult {
  const started = performance.now();
  const stateChecks = options.stateChecks ?? REACHABLE_STATE_CHECKS;
  const transitionChecks = options.transitionChecks ?? TRANSITION_INVARIANTS;
  const maxViolations = options.maxViolations ?? 20;
  const run = options.apply ?? apply;
  const horizon = horizonOf(options.roots, options.alphabet);
  const parent = new Map<string, { from: string | null; command: Command | null }>();
  const violations: Violation[] = [];
  const trace = (key: string, last?: Command): string[] => {
    const path: string[] = last ? [describe(last)] : [];
    for (let k: string | null = key; k !== null; ) {
      const p: { from: string | null; command: Command | null } = parent.get(k)!;
      if (p.command) path.unshift(describe(p.command));
      k = p.from;
    }
    return path;
  };
  let frontier: { state: State; key: string }[] = [];
  for (const root of options.roots) {
    const initial = checkInitial(root);
    if (initial) violations.push({ invariant: "initial state", doc: "docs/lifecycle.md, Every transition (createIssue)", message: initial, trace: [] });
    const key = canonicalKey(root, horizon);
    if (!parent.has(key)) {
      parent.set(key, { from: null, command: null });
      frontier.push({ state: root, key });
    }
  }
  let transitions = 0;
  let pruned = 0;
  let depth = 0;
  let complete = true;
  outer: while (frontier.length > 0) {
    const next: { state: State; key: string }[] = [];
    for (const { state, key } of frontier) {
      for (const inv of stateChecks) {
        const message = inv.check(state);
        if (message) violations.push({ invariant: inv.name, doc: inv.doc, message, trace: trace(key) });
      }
      for (const command of commandsFor(state, options.alphabet)) {
        const step = run(state, command);
        if (step.state.runs.length > state.runs.length && step.state.runs.filter((r) => runMatters(step.state, r)).length > options.maxRuns) {
          pruned++;
          continue;
        }
        transitions++;
        // a fused call is checked as its verbs, each a transition of its own, and as their sequence
        const sequence = isFused(command) ? asSequence(state, command, run) : null;
        const parts = sequence ? sequence.parts : [{ before: state, command, step }];
        for (const part of parts) {
          const refusal = part.step.state === part.before && part.step.events.length === 0;
          for (const inv of transitionChecks) {
            if (refusal && !inv.onRefusals) continue;
            const message = inv.check(part.before, part.command, part.step);
            if (message) {
              const where = part.command === command ? "" : ` (its step ${describe(part.command)})`;
              violations.push({ invariant: inv.name, doc: inv.doc, message: message + where, trace: trace(key, command) });
            }
          }
        }
        const unlike = sequence && notItsSequence(step, sequence.step);
        if (unlike) violations.push({ invariant: FUSED_IS_A_SEQUENCE.name, doc: FUSED_IS_A_SEQUENCE.doc, message: unlike, trace: trace(key, command) });
        options.observe?.(state, command, step);
        if (step.state === state) continue;
        const k = canonicalKey(step.state, horizon);
        if (parent.has(k)) continue;
        parent.set(k, { from: key, command });
        next.push({ state: step.state, key: k });
      }
      if (violations.length >= maxViolations || (options.maxStates !== undefined && parent.size >= options.maxStates)) {
        complete = false;
        break outer;
      }
    }
    if (next.length > 0) depth++;
    frontier = next;
  }
  return { states: parent.size, transitions, pruned, depth, complete, violations, ms: performance.now() - started };
}
