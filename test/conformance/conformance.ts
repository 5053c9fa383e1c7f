// Model-based conformance (issue 17, part 3): fast-check generates a company
// and a sequence of commands (fc.commands); each command runs through the
// model (src/model/) and through the real verbs (adapter.ts), and the answers
// and the company's state (issues, runs, and each issue's events in order)
// must agree after every command. A `pair` runs two commands at once on two
// connections, optionally behind a gate that holds the company's run rows
// until both are in flight (so one statement takes its snapshot while the
// other is waiting, as in the races the SQL guards against); the real outcome
// must be the model's for one of the two serial orders (linearizability; a
// sweep, several statements, counts as its parts: see `parts`).
// A failure is shrunk by fast-check to a minimal sequence, printed as a
// replayable test (`replay` below). The work graph (issue 29: creation,
// sub-issues, edges, delays on the clock, backoff, results) joins through
// workGraph.ts. The fused calls (issue 31: claimIssue with startExecution,
// releaseIssue with next) are generated among the claims and releases and in
// races of their own (fusedRaceArb); where the API runs one as two statements,
// a pair's serial orders are those of its two verbs with the other command.
import fc from "fast-check";
import {
  apply,
  firstOf,
  fusedAnswer,
  isFused,
  isSplit,
  thenOf,
  executionOverdue,
  isWaiting,
  issueWithKey,
  claimCandidates,
  describe,
  EXPECTED_CHOICES,
  boardUpdates,
  initialState,
  isClaimable,
  isExpired,
  isLive,
  keyRoom,
  takeInClaimOrder,
  stopAgent,
  takeBackLocks,
} from "../../src/model/index.js";
import type { Answer, ClaimNext, Command, Event, Fused, InitialStateInput, IssueInput, IssueStatus, State, UpdateIssueInput } from "../../src/model/index.js";
import { bindNewRuns, normAnswer, normModelState, UNKNOWN_ISSUE, UNKNOWN_RUN } from "./adapter.js";
import type { Names, NormAnswer, NormState, RealAnswer, RealWorld, Sequence } from "./adapter.js";
import { MODEL_SIDE, realSide } from "./norm.js";
import { TIME_UPDATES, graphArbs, graphRaceArb, issueGraphArb, resolveCreate, resolveUpdate, resultArb, retryAfterArb, withGraph } from "./workGraph.js";
import type { AbstractUpdate, GraphAbstract } from "./workGraph.js";

// ---- what a sequence is made of ----

/** A run as a generated command names it: the agent's latest run (back 0) or the one before, another agent's, or none. */
export type RunRef = { back: number } | "foreign" | "unknown";
/** An abstract command: agent verbs name an agent, a RunRef and issue indexes (mod the company's issue count, or -1: unknown). */
export type Abstract =
  | { verb: "startRun"; agent: string }
  | { verb: "heartbeatRun"; agent: string; run: RunRef }
  | { verb: "claimNext"; agent: string; run: RunRef; includeUnassigned?: boolean; startExecution?: boolean }
  | { verb: "finishRun"; agent: string; run: RunRef; status: "SUCCEEDED" | "FAILED" | "CANCELLED" | "TIMED_OUT" | "RUNNING" }
  | { verb: "claimById"; agent: string; run: RunRef; issue: number; expected?: readonly IssueStatus[]; startExecution?: boolean }
  | { verb: "claimIssues"; agent: string; run: RunRef; limit: number; includeUnassigned: boolean; acquireExecution: boolean }
  | { verb: "acquireExecution"; agent: string; run: RunRef; issue: number }
  | {
      verb: "releaseIssue";
      agent: string;
      run: RunRef;
      issue: number;
      outcome: "DONE" | "BLOCKED" | "FAILED" | "REQUEUE";
      reason?: string;
      retryAfter?: number;
      result?: unknown;
      /** issue 31: releaseIssue(next): the release, then the run's next claim. */
      next?: ClaimNext;
    }
  | { verb: "releaseIssues"; agent: string; run: RunRef; issues: number[]; outcome: "DONE" | "BLOCKED" | "FAILED" | "REQUEUE" }
  | { verb: "forceReleaseIssue"; issue: number }
  | { verb: "updateIssue"; issue: number; input: AbstractUpdate }
  | GraphAbstract
  | { verb: "runHeartbeat" }
  | { verb: "disableAgent"; agent: string; reason: string }
  | { verb: "enableAgent"; agent: string }
  | { verb: "tick"; by: number }
  | { verb: "sweep" };

/** A step as it ran, with model names: what a replayable test lists. */
export type Concrete = { one: Command } | { pair: [Command, Command]; gate: boolean };

export interface Scenario {
  initial: InitialStateInput;
  steps: Concrete[];
}

export const AGENTS = ["A", "B"] as const;
/** An agent of the wide companies that never acts: its assigned work only sits in keys (wideArb). */
export const IDLE_AGENT = "C";
/** An agent the company does not have (disableAgent, enableAgent: NOT_FOUND). */
export const UNKNOWN_AGENT = "Z";

// ---- resolving an abstract command against the model's state ----

function resolveRun(s: State, agent: string, ref: RunRef): string {
  if (ref === "unknown") return UNKNOWN_RUN;
  if (ref === "foreign") {
    const other = s.runs.filter((r) => r.agentId !== agent).at(-1);
    return other?.id ?? UNKNOWN_RUN;
  }
  const own = s.runs.filter((r) => r.agentId === agent);
  return own[own.length - 1 - ref.back]?.id ?? UNKNOWN_RUN;
}

const resolveIssue = (s: State, n: number) => (n < 0 ? UNKNOWN_ISSUE : s.issues[n % s.issues.length]!.id);

export function resolve(s: State, a: Abstract): Command {
  switch (a.verb) {
    case "startRun":
      return { verb: "startRun", agentId: a.agent };
    case "heartbeatRun":
      return { verb: "heartbeatRun", agentId: a.agent, runId: resolveRun(s, a.agent, a.run) };
    case "claimNext": {
      const c: Command = { verb: "claimIssue", agentId: a.agent, runId: resolveRun(s, a.agent, a.run), includeUnassigned: a.includeUnassigned ?? false };
      return a.startExecution ? { ...c, startExecution: true } : c;
    }
    case "finishRun":
      return { verb: "finishRun", agentId: a.agent, runId: resolveRun(s, a.agent, a.run), status: a.status };
    case "claimById": {
      const c: Command = { verb: "claimIssue", agentId: a.agent, runId: resolveRun(s, a.agent, a.run), issueId: resolveIssue(s, a.issue) };
      return { ...c, ...(a.expected === undefined ? {} : { expectedStatuses: [...a.expected] }), ...(a.startExecution ? { startExecution: true } : {}) };
    }
    case "claimIssues":
      return {
        verb: "claimIssues",
        agentId: a.agent,
        runId: resolveRun(s, a.agent, a.run),
        limit: a.limit,
        includeUnassigned: a.includeUnassigned,
        acquireExecution: a.acquireExecution,
      };
    case "acquireExecution":
      return { verb: "acquireExecution", agentId: a.agent, runId: resolveRun(s, a.agent, a.run), issueId: resolveIssue(s, a.issue) };
    case "releaseIssue": {
      const c: Command = {
        verb: "releaseIssue",
        agentId: a.agent,
        runId: resolveRun(s, a.agent, a.run),
        issueId: resolveIssue(s, a.issue),
        outcome: a.outcome,
      };
      return {
        ...c,
        ...(a.reason === undefined ? {} : { reason: a.reason }),
        ...(a.retryAfter === undefined ? {} : { retryAfterSeconds: a.retryAfter }),
        ...(a.result === undefined ? {} : { result: a.result }),
        ...(a.next === undefined ? {} : { next: { ...a.next } }),
      };
    }
    case "releaseIssues":
      return {
        verb: "releaseIssues",
        agentId: a.agent,
        runId: resolveRun(s, a.agent, a.run),
        issueIds: a.issues.map((n) => resolveIssue(s, n)),
        outcome: a.outcome,
      };
    case "forceReleaseIssue":
      return { verb: "forceReleaseIssue", issueId: resolveIssue(s, a.issue), reason: "operator" };
    case "updateIssue":
      return { verb: "updateIssue", issueId: resolveIssue(s, a.issue), input: resolveUpdate(s, a.input) };
    case "createIssues":
      return { verb: "createIssues", inputs: a.inputs.map((i) => resolveCreate(s, i, (n) => resolveIssue(s, n))) };
    case "createSubIssues":
      return {
        verb: "createSubIssues",
        agentId: a.agent,
        runId: resolveRun(s, a.agent, a.run),
        parentId: resolveIssue(s, a.parent),
        inputs: a.inputs.map((i) => resolveCreate(s, i, (n) => resolveIssue(s, n))),
        parentWaits: a.parentWaits,
      };
    case "addDependency":
    case "removeDependency": {
      const edge = { issueId: resolveIssue(s, a.issue), blockedById: resolveIssue(s, a.blocker) };
      return a.by === "board" ? { verb: a.verb, ...edge } : { verb: a.verb, ...edge, agentId: a.by.agent, runId: resolveRun(s, a.by.agent, a.by.run) };
    }
    case "runHeartbeat":
      return { verb: "runHeartbeat" };
    case "disableAgent":
      return { verb: "disableAgent", agentId: a.agent, reason: a.reason };
    case "enableAgent":
      return { verb: "enableAgent", agentId: a.agent };
    case "tick":
      return { verb: "tick", by: a.by };
    case "sweep":
      return { verb: "sweep" };
  }
}

// ---- the arbitraries ----

const agentArb = fc.constantFrom(...AGENTS);
const runArb: fc.Arbitrary<RunRef> = fc.oneof(
  { weight: 12, arbitrary: fc.constant({ back: 0 }) },
  { weight: 3, arbitrary: fc.constant({ back: 1 }) },
  { weight: 1, arbitrary: fc.constant<RunRef>("foreign") },
  { weight: 1, arbitrary: fc.constant<RunRef>("unknown") },
);
const issueArb = fc.oneof({ weight: 15, arbitrary: fc.integer({ min: 0, max: 3 }) }, { weight: 1, arbitrary: fc.constant(-1) });
const outcomeArb = fc.constantFrom("DONE", "BLOCKED", "FAILED", "REQUEUE") as fc.Arbitrary<"DONE" | "BLOCKED" | "FAILED" | "REQUEUE">;
export const UPDATES: readonly UpdateIssueInput[] = boardUpdates([...AGENTS], [1, 2, 3], [null, "k1", "k2"]);
/** disableAgent's target (now and then one the company does not have) and reason (trimmed; a blank one is BAD_USER_INPUT). */
const switchedAgentArb = fc.oneof({ weight: 8, arbitrary: agentArb }, { weight: 1, arbitrary: fc.constant(UNKNOWN_AGENT) });
const disableReasonArb = fc.constantFrom("operator", "operator", "  leaked key  ", "   ");
/** The fused calls (issue 31), a quarter of the claims and of the releases: claimIssue(startExecution), releaseIssue(next) with each ClaimNextInput. */
const startArb = fc.constantFrom(false, false, false, true);
const nextArb = fc.constantFrom<ClaimNext | undefined>(
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  undefined,
  {},
  { includeUnassigned: true },
  { includeUnassigned: true, startExecution: false },
);

/**
 * Every agent and board verb (disableAgent and enableAgent rarely), and time: the alphabet of one step. Each half of
 * a pair has the same alphabet but for tick (time is not a statement) and
 * runHeartbeat: the scheduler tick is several statements (find the agents with
 * work, start a run, claim, finish the run if it got nothing: "another tick,
 * or the agent itself, may have been faster"), not one atomic step, so beside
 * a concurrent claim it may end with a run that got nothing, which no serial
 * order of the model's tick gives.
 */
export function abstractArb(alone: boolean): fc.Arbitrary<Abstract> {
  const arbs: fc.WeightedArbitrary<Abstract>[] = [
    { weight: 4, arbitrary: agentArb.map((agent): Abstract => ({ verb: "startRun", agent })) },
    { weight: 2, arbitrary: fc.record({ agent: agentArb, run: runArb }).map((r): Abstract => ({ verb: "heartbeatRun", ...r })) },
    {
      weight: 2,
      arbitrary: fc
        .record({ agent: agentArb, run: runArb, status: fc.constantFrom("SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "SUCCEEDED", "RUNNING") })
        .map((r): Abstract => ({ verb: "finishRun", ...r }) as Abstract),
    },
    {
      weight: 4,
      arbitrary: fc
        .record({ agent: agentArb, run: runArb, includeUnassigned: fc.boolean(), startExecution: startArb })
        .map(({ startExecution, ...r }): Abstract => ({ verb: "claimNext", ...r, ...(startExecution ? { startExecution } : {}) })),
    },
    {
      weight: 4,
      arbitrary: fc.record({ agent: agentArb, run: runArb, issue: issueArb, expected: fc.constantFrom(...EXPECTED_CHOICES), startExecution: startArb }).map(
        (r): Abstract => ({
          verb: "claimById",
          agent: r.agent,
          run: r.run,
          issue: r.issue,
          ...(r.expected === undefined ? {} : { expected: r.expected }),
          ...(r.startExecution ? { startExecution: true } : {}),
        }),
      ),
    },
    {
      weight: 3,
      arbitrary: fc
        .record({ agent: agentArb, run: runArb, limit: fc.integer({ min: 1, max: 3 }), includeUnassigned: fc.boolean(), acquireExecution: fc.boolean() })
        .map((r): Abstract => ({ verb: "claimIssues", ...r })),
    },
    { weight: 4, arbitrary: fc.record({ agent: agentArb, run: runArb, issue: issueArb }).map((r): Abstract => ({ verb: "acquireExecution", ...r })) },
    {
      weight: 4,
      arbitrary: fc
        .record({
          agent: agentArb,
          run: runArb,
          issue: issueArb,
          outcome: outcomeArb,
          reason: fc.constantFrom(undefined, "tests red"),
          retryAfter: retryAfterArb,
          result: resultArb,
          next: nextArb,
        })
        .map(
          (r): Abstract => ({
            verb: "releaseIssue",
            agent: r.agent,
            run: r.run,
            issue: r.issue,
            outcome: r.outcome,
            ...(r.reason ? { reason: r.reason } : {}),
            // retryAfterSeconds mostly where it belongs (REQUEUE, FAILED), now and then with DONE or BLOCKED (BAD_USER_INPUT)
            ...(r.retryAfter !== undefined && (r.outcome === "REQUEUE" || r.outcome === "FAILED" || r.retryAfter === 2) ? { retryAfter: r.retryAfter } : {}),
            ...(r.result !== undefined ? { result: r.result } : {}),
            ...(r.next !== undefined ? { next: r.next } : {}),
          }),
        ),
    },
    {
      weight: 1,
      arbitrary: fc
        .record({ agent: agentArb, run: runArb, issues: fc.uniqueArray(issueArb, { minLength: 1, maxLength: 3 }), outcome: outcomeArb })
        .map((r): Abstract => ({ verb: "releaseIssues", ...r })),
    },
    { weight: 1, arbitrary: issueArb.map((issue): Abstract => ({ verb: "forceReleaseIssue", issue })) },
    { weight: 2, arbitrary: fc.record({ issue: issueArb, input: fc.constantFrom(...UPDATES) }).map((r): Abstract => ({ verb: "updateIssue", ...r })) },
    { weight: 1, arbitrary: fc.record({ issue: issueArb, input: fc.constantFrom(...TIME_UPDATES) }).map((r): Abstract => ({ verb: "updateIssue", ...r })) },
    ...graphArbs({ agentArb, runArb, issueArb }),
    { weight: 2, arbitrary: fc.constant<Abstract>({ verb: "sweep" }) },
    // rarely: a disabled agent has no run and gets none until it is enabled
    { weight: 1, arbitrary: fc.record({ agent: switchedAgentArb, reason: disableReasonArb }).map((r): Abstract => ({ verb: "disableAgent", ...r })) },
    { weight: 1, arbitrary: switchedAgentArb.map((agent): Abstract => ({ verb: "enableAgent", agent })) },
  ];
  if (alone) arbs.push({ weight: 1, arbitrary: fc.constant<Abstract>({ verb: "runHeartbeat" }) });
  if (alone) arbs.push({ weight: 4, arbitrary: fc.integer({ min: 1, max: 2 }).map((by): Abstract => ({ verb: "tick", by })) });
  return fc.oneof(...arbs);
}

/** A small company: agents A and B, 2–4 issues, keys k1 and k2 perhaps with limits, a lease of 1 or 2 clock units. */
const smallArb: fc.Arbitrary<InitialStateInput> = fc
  .record({
    leaseLength: fc.constantFrom(1, 2, 2),
    k1: fc.constantFrom<number | undefined>(undefined, 1, 2),
    k2: fc.constantFrom<number | undefined>(undefined, 1),
    issues: fc.array(
      fc.record({
        assignee: fc.constantFrom<string | null>("A", "A", "B", null),
        key: fc.constantFrom<string | null>(null, null, "k1", "k2"),
        status: fc.constantFrom<"OPEN" | "BACKLOG">("OPEN", "OPEN", "OPEN", "BACKLOG"),
        priority: fc.constantFrom("MEDIUM", "MEDIUM", "HIGH", "LOW") as fc.Arbitrary<"MEDIUM" | "HIGH" | "LOW">,
        maxAttempts: fc.constantFrom(1, 2, 2, 3),
        graph: issueGraphArb,
      }),
      { minLength: 2, maxLength: 4 },
    ),
    // a third of the companies start with a work graph (blockers, delays, backoff, limits, keys); the others as before issue 29
    graphed: fc.constantFrom(false, false, true),
  })
  .map(({ leaseLength, k1, k2, issues, graphed }) => {
    const limits: Record<string, number> = {};
    if (k1 !== undefined) limits.k1 = k1;
    if (k2 !== undefined) limits.k2 = k2;
    const keys = new Set<string>();
    const inputs: IssueInput[] = issues.map((i, n) => {
      const input: IssueInput = {
        id: `i${n + 1}`,
        status: i.status,
        priority: i.priority,
        assigneeAgentId: i.assignee,
        concurrencyKey: i.key,
        maxAttempts: i.maxAttempts,
      };
      return graphed ? withGraph(input, n, i.graph, keys) : input;
    });
    return { agents: [...AGENTS], issues: inputs, limits, leaseLength };
  });

/**
 * A wide company: 12–14 keys (k01…), some limited, most of their work
 * assigned to an agent that never claims (IDLE_AGENT), the rest to A, B or the
 * pool: the shape in which keys' turns decide what a pool claim finds.
 */
const wideArb: fc.Arbitrary<InitialStateInput> = fc
  .record({
    keys: fc.array(
      fc.record({
        max: fc.constantFrom<number | undefined>(undefined, undefined, 1, 2),
        assignee: fc.constantFrom<string | null>(IDLE_AGENT, IDLE_AGENT, IDLE_AGENT, IDLE_AGENT, IDLE_AGENT, "A", "B", null),
        priority: fc.constantFrom("MEDIUM", "MEDIUM", "HIGH") as fc.Arbitrary<"MEDIUM" | "HIGH">,
      }),
      { minLength: 12, maxLength: 14 },
    ),
    pool: fc.array(
      fc.record({ key: fc.option(fc.nat(13), { freq: 5, nil: null }), priority: fc.constantFrom("MEDIUM", "HIGH") as fc.Arbitrary<"MEDIUM" | "HIGH"> }),
      { minLength: 1, maxLength: 4 },
    ),
  })
  .map(({ keys, pool }) => {
    const name = (n: number) => `k${String((n % keys.length) + 1).padStart(2, "0")}`;
    const limits: Record<string, number> = {};
    for (const [n, k] of keys.entries()) {
      if (k.max !== undefined) limits[name(n)] = k.max;
    }
    // one issue in every key, most of them the idle agent's; then a few pool issues, mostly keyed
    const inputs: IssueInput[] = [
      ...keys.map((k, n) => ({ priority: k.priority, assigneeAgentId: k.assignee, concurrencyKey: name(n) })),
      ...pool.map((p) => ({ priority: p.priority, assigneeAgentId: null, concurrencyKey: p.key === null ? null : name(p.key) })),
    ].map((i, n) => ({ id: `i${n + 1}`, ...i, maxAttempts: 2 }));
    return { agents: [...AGENTS, IDLE_AGENT], issues: inputs, limits, leaseLength: 2 };
  });

export const initialArb: fc.Arbitrary<InitialStateInput> = fc.oneof({ weight: 3, arbitrary: smallArb }, { weight: 1, arbitrary: wideArb });

// ---- running a step on both sides ----

/** The model side of a sequence as it runs. */
export interface ModelBox {
  state: State;
  events: Event[];
  scenario: Scenario;
  reached: Reached;
}

/** How often the historical bugs' situations came up (part 4). */
export interface Reached {
  /** A pair: an adoption of a dead, still-RUNNING holder's issue while the other command times that holder out. */
  adoptWhileTimedOut: number;
  /** The same, with the gate: the adoption waits on the holder's row while the other statement writes it. */
  adoptWhileTimedOutGated: number;
  /** A batch claim by a run that has just been finished, with claimable work left (in sequence). */
  batchByFinishedRun: number;
  /** A batch claim racing the finishRun of its own run (a pair). */
  batchRacingFinish: number;
  /** A pair: disableAgent of an agent beside a command of that agent, or one naming an issue the agent's runs hold (or a sweep while they hold one). */
  disableRacing: number;
  /** The same, with the gate. */
  disableRacingGated: number;
  /**
   * A pool claim (alone) whose next pool issue's key comes, by turn, after 9
   * or more keys with room whose only claimable work is assigned: the shape
   * in which pool claims once answered NoIssueAvailable for ever.
   */
  poolPastAssignedKeys: number;
  /** The work graph (issue 29). A pair of edges that together would close a cycle (each alone would not). */
  cycleRace: number;
  /** A pair: a claim-next beside the DONE release of a blocker of an OPEN issue the claim could take once it is free. */
  claimBesideDone: number;
  /** A pair of creates with one idempotency key the company does not have yet. */
  keyRace: number;
  /** A claim by id (alone) of an OPEN issue that waits on a blocker or its notBefore (IssueWaiting). */
  claimOfWaiting: number;
  /** A claim (alone) of an issue once its notBefore came (it was set, and the clock passed it). */
  claimOnceDue: number;
  /** A claim (alone) of a parent that waited on its sub-issues, all DONE now. */
  parentBack: number;
  /** A sweep with an execution past maxExecutionSeconds held by a live run. */
  executionOverdue: number;
  /** A failed attempt that reopened an issue with a backoff (release FAILED, or a recovery) with retryDelaySeconds set. */
  backoff: number;
  /** REQUEUE with retryAfterSeconds from IN_PROGRESS (the attempt given back). */
  attemptGivenBack: number;
  /** Issue 31. A fused call alone that ran both its verbs: a claim that started the execution, a release whose next claim got an issue. */
  fusedAlone: number;
  /** A pair with a fused call by a live run. */
  fusedRacing: number;
  /** The same, with the gate. */
  fusedRacingGated: number;
  /** A pair that only an order with the other command between a fused call's two statements explains. */
  fusedSplit: number;
}
export const noneReached = (): Reached => ({
  adoptWhileTimedOut: 0,
  adoptWhileTimedOutGated: 0,
  batchByFinishedRun: 0,
  batchRacingFinish: 0,
  disableRacing: 0,
  disableRacingGated: 0,
  poolPastAssignedKeys: 0,
  cycleRace: 0,
  claimBesideDone: 0,
  keyRace: 0,
  claimOfWaiting: 0,
  claimOnceDue: 0,
  parentBack: 0,
  executionOverdue: 0,
  backoff: 0,
  attemptGivenBack: 0,
  fusedAlone: 0,
  fusedRacing: 0,
  fusedRacingGated: 0,
  fusedSplit: 0,
});

export class Mismatch extends Error {
  override name = "Mismatch";
}

const json = (x: unknown) => JSON.stringify(x);

function compare(what: string, model: unknown, real: unknown): string | null {
  return json(model) === json(real) ? null : `${what}\n    model: ${json(model)}\n    real:  ${json(real)}`;
}

const sortedKeys = <T>(r: Record<string, T>): Record<string, T> => Object.fromEntries(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : 1)));

/**
 * Where the model and the database differ, or null. The keys' turn order is
 * compared only after a step that ran alone (`turns`): statements running at
 * once draw their turn numbers in the order they reach the keys' trigger, not
 * in their commit order, and one that finds the unkeyed pool's row held does
 * not move it (migration 20261201000000_concurrency_keys), so after a race
 * the turns are the database's, and the model takes them (takeTurns).
 */
function stateDiff(model: NormState, real: NormState, turns = true): string | null {
  return (
    compare("issues", model.issues, real.issues) ??
    compare("runs", model.runs, real.runs) ??
    compare("disabled agents", model.disabled, real.disabled) ??
    compare("events", sortedKeys(model.events), sortedKeys(real.events)) ??
    (turns ? compare("keys' turns", model.turns, real.turns) : null)
  );
}

/** The model's state with the database's turn order (after a step whose turns are not compared). */
const takeTurns = (s: State, real: NormState): State => ({ ...s, turns: real.turns });

/** Every order of a list (the agents a scheduler tick serves concurrently). */
const permutations = <T>(xs: readonly T[]): T[][] =>
  xs.length <= 1 ? [[...xs]] : xs.flatMap((x, n) => permutations([...xs.slice(0, n), ...xs.slice(n + 1)]).map((rest) => [x, ...rest]));

/**
 * The model's possible steps for one command alone. runHeartbeat serves its
 * agents concurrently in the SQL (schedulerTick.ts) and one after another in
 * the model, which is one of those interleavings: with a key limit, which
 * agent is served first decides who gets the key's last slot. So each order of
 * the agents is a possible step.
 */
function modelSteps(s: State, c: Command) {
  if (c.verb !== "runHeartbeat") return [apply(s, c)];
  return permutations(s.agents).map((agents) => {
    const step = apply({ ...s, agents }, c);
    return { ...step, state: { ...step.state, agents: s.agents } };
  });
}

/**
 * A DependencyCycle the database answered must be a cycle of the model's graph
 * as the command found it (`s`): from blockedById along blockedBy edges to
 * issueId. (normAnswer compares only its ends and length: of several shortest
 * cycles, the two sides may walk different ones.)
 */
function cycleOfModel(s: State, real: RealAnswer, names: Names): string | null {
  if (real.__typename !== "DependencyCycle") return null;
  const path = (real.path as string[]).map((id) => names.model(id));
  const walks = path.every((id, k) => k === 0 || (s.issues.find((i) => i.id === path[k - 1])?.blockedBy.includes(id!) ?? false));
  return walks && new Set(path).size === path.length ? null : `DependencyCycle's path [${path.join(", ")}] is no cycle of the model's graph`;
}

/** One command alone, on instance 0. */
export async function runOne(m: ModelBox, seq: Sequence, c: Command): Promise<void> {
  noteReached(m, { one: c });
  m.scenario.steps.push({ one: c });
  seq.clock = m.state.clock;
  const real = await seq.exec(c);
  const nowMs = seq.world.nowMs();
  const diffs: string[] = [];
  for (const step of modelSteps(m.state, c)) {
    const names = seq.names.clone();
    bindNewRuns(names, step.answer, real);
    const events = [...m.events, ...step.events];
    const answerDiff =
      compare(`answer of ${describe(c)}`, normAnswer(step.answer, MODEL_SIDE), normAnswer(real, realSide(names, m.state.clock, nowMs))) ??
      cycleOfModel(m.state, real, names);
    // a scheduler tick serves its agents concurrently: its turns are the database's
    const alone = c.verb !== "runHeartbeat";
    const realState = await seq.state(names, step.state.clock);
    const diff = answerDiff ?? stateDiff(normModelState(step.state, events), realState, alone);
    if (!diff) {
      m.state = alone ? step.state : takeTurns(step.state, realState);
      m.events = events;
      seq.names = names;
      return;
    }
    diffs.push(diff);
  }
  throw new Mismatch(diffs.join("\n  or "));
}

/** The gate holds the company's run rows until both commands are done or waiting on a lock (at most `deadlineMs`). */
async function gateUntilInFlight(seq: Sequence, settled: () => [boolean, boolean], deadlineMs = 2000): Promise<void> {
  const admin = seq.world.admin;
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    await admin.query("SELECT pg_stat_clear_snapshot()");
    const { rows } = await admin.query<{ app: string }>(
      "SELECT DISTINCT application_name AS app FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name LIKE 'baton-conformance-_'",
    );
    const waiting = new Set(rows.map((r) => r.app));
    const done = settled();
    if ((done[0] || waiting.has("baton-conformance-0")) && (done[1] || waiting.has("baton-conformance-1"))) return;
    await new Promise((r) => setImmediate(r));
  }
}

/** Two commands at once, on two connections: the real outcome must be the model's for one of the two orders. */
export async function runPair(m: ModelBox, seq: Sequence, a: Command, b: Command, gate: boolean): Promise<void> {
  noteReached(m, { pair: [a, b], gate });
  m.scenario.steps.push({ pair: [a, b], gate });
  seq.clock = m.state.clock;
  const admin = seq.world.admin;
  if (gate) {
    await admin.query("BEGIN");
    await admin.query("SELECT id FROM heartbeat_runs WHERE company_id = $1 ORDER BY id FOR UPDATE", [seq.companyId]);
  }
  const done: [boolean, boolean] = [false, false];
  const pa = seq.exec(a, 0).finally(() => {
    done[0] = true;
  });
  const pb = seq.exec(b, 1).finally(() => {
    done[1] = true;
  });
  if (gate) {
    try {
      await gateUntilInFlight(seq, () => done);
    } finally {
      await admin.query("COMMIT");
    }
  }
  // both settle before anything else runs (a rejected one must not leave the other in flight)
  const settled = await Promise.allSettled([pa, pb]);
  for (const r of settled) if (r.status === "rejected") throw r.reason;
  const [ra, rb] = settled.map((r) => (r as PromiseFulfilledResult<RealAnswer>).value) as [RealAnswer, RealAnswer];
  const nowMs = seq.world.nowMs();
  const diffs: string[] = [];
  if (a.verb === "sweep" && b.verb === "sweep") {
    // Two sweepers share the work (each step takes rows SKIP LOCKED, batch by batch): their counts add up
    // to one sweep's, and the state is one sweep's (docs/invariants.md, 8).
    const step = apply(m.state, a);
    const sum = (x: RealAnswer, y: RealAnswer) => ({
      __typename: "SweepCounts",
      timedOutRuns: x.timedOutRuns + y.timedOutRuns,
      recoveredIssues: x.recoveredIssues + y.recoveredIssues,
      escalatedIssues: x.escalatedIssues + y.escalatedIssues,
    });
    const events = [...m.events, ...step.events];
    const diff =
      compare("the two sweeps' counts together", normAnswer(step.answer, MODEL_SIDE), normAnswer(sum(ra, rb), MODEL_SIDE)) ??
      stateDiff(normModelState(step.state, events), await seq.state(), false);
    if (diff) throw new Mismatch(diff);
    m.state = step.state;
    m.events = events;
    return;
  }
  const cmds = [a, b];
  const reals: RealAnswer[] = [ra, rb];
  const shown = (order: Part[]) => order.map((p) => `${p.k === 0 ? "first" : "second"}${p.kind === "whole" ? "" : ` (${p.kind})`}`).join(", ");
  // the orders that keep each fused call's two statements together come first: one that comes between them
  // is taken only when none of those explains the pair (Reached.fusedSplit)
  const orders = interleavings(parts(a, 0), parts(b, 1)).sort((x, y) => Number(splitsFused(x)) - Number(splitsFused(y)));
  const candidates = orders.flatMap((order) => subsets(passable(a, b, m.state)).map((skip) => ({ order, skip })));
  for (const { order, skip } of candidates) {
    const names: Names = seq.names.clone();
    let s = m.state;
    const events: Event[] = [...m.events];
    const answers: NormAnswer[] = [];
    const models: NormAnswer[] = [];
    const cycles: (string | null)[] = [null, null];
    /** A split fused call's first verb's answer, for its second (thenOf). */
    const firsts: (Answer | null)[] = [null, null];
    const counts = [
      { __typename: "SweepCounts" as const, timedOutRuns: 0, recoveredIssues: 0, escalatedIssues: 0 },
      { __typename: "SweepCounts" as const, timedOutRuns: 0, recoveredIssues: 0, escalatedIssues: 0 },
    ];
    for (const { k, kind } of order) {
      if (kind === "time-outs") {
        const expired = s.runs.filter((r) => isExpired(r, s.clock));
        counts[k]!.timedOutRuns += expired.length;
        s = { ...s, runs: s.runs.map((r) => (isExpired(r, s.clock) ? { ...r, status: "TIMED_OUT" as const, finishedAt: s.clock } : r)) };
        continue;
      }
      if (kind === "fused-first" || kind === "fused-then") {
        // the API's two statements: the checkout or the release, then acquireExecution or the claim of the next issue
        const c = cmds[k] as Fused;
        if (kind === "fused-first") {
          const step = apply(s, firstOf(c));
          firsts[k] = step.answer;
          s = step.state;
          events.push(...step.events);
          continue;
        }
        const then = thenOf(c, firsts[k]!);
        let answer = firsts[k]!;
        if (then) {
          const step = applyAllowingSkips(s, then, cmds[1 - k]!, thenReal(c, reals[k]!), names);
          s = step.state;
          events.push(...step.events);
          answer = fusedAnswer(c, firsts[k]!, step.answer);
        }
        models[k] = normAnswer(answer, MODEL_SIDE);
        continue;
      }
      if (kind === "take-back") {
        // only after the agent was stopped (a refused disableAgent takes nothing back)
        if (models[k]?.t === "Agent") {
          const back = takeBackLocks(s, (cmds[k] as { agentId: string }).agentId);
          s = back.state;
          events.push(...back.events);
        }
        continue;
      }
      const step =
        kind === "recovery"
          ? recoveryPassingOver(s, skip)
          : kind === "stop-agent"
            ? stopAgent(s, cmds[k] as { agentId: string; reason: string })
            : applyAllowingSkips(s, cmds[k]!, cmds[1 - k]!, reals[k]!, names);
      bindNewRuns(names, step.answer, reals[k]!);
      cycles[k] = cycleOfModel(s, reals[k]!, names);
      s = step.state;
      events.push(...step.events);
      if (kind === "recovery" && step.answer.__typename === "SweepCounts") {
        counts[k]!.timedOutRuns += step.answer.timedOutRuns;
        counts[k]!.recoveredIssues += step.answer.recoveredIssues;
        counts[k]!.escalatedIssues += step.answer.escalatedIssues;
        models[k] = normAnswer(counts[k]!, MODEL_SIDE);
      } else {
        models[k] = normAnswer(step.answer, MODEL_SIDE);
      }
    }
    for (const k of [0, 1]) answers[k] = normAnswer(reals[k]!, realSide(names, m.state.clock, nowMs));
    const realState = await seq.state(names);
    const diff =
      compare(`answer of ${describe(a)}`, models[0], answers[0]) ??
      compare(`answer of ${describe(b)}`, models[1], answers[1]) ??
      cycles[0] ??
      cycles[1] ??
      stateDiff(normModelState(s, events), realState, false);
    if (!diff) {
      if (splitsFused(order)) m.reached.fusedSplit++;
      m.state = takeTurns(s, realState);
      m.events = events;
      seq.names = names;
      return;
    }
    diffs.push(`in the order ${shown(order)}${skip.length ? ` (the sweep passing over ${skip.join(", ")})` : ""}: ${diff}`);
  }
  throw new Mismatch(`no serial order of the pair explains what the database did:\n  ${diffs.join("\n  ")}`);
}

/**
 * The atomic parts of a command, as the SQL runs it. Each verb is one
 * statement (or one transaction), but a sweep is several: it times out the
 * expired runs, then recovers the locks of dead runs and escalates (sweep.ts),
 * and another statement may come between. (Recovery and escalation are taken
 * as one part: the model's sweep does both.) So is disableAgent: it stops the
 * agent and its runs, then takes their locks back (disableAgent.ts). And so
 * are the fused calls the API runs as two statements (issue 31, isSplit): a
 * claim by id with startExecution is the checkout, then acquireExecution; a
 * release with next is the release, then the claim of the next issue
 * (claim-next with startExecution is one statement: whole).
 */
interface Part {
  k: 0 | 1;
  kind: "whole" | "time-outs" | "recovery" | "stop-agent" | "take-back" | "fused-first" | "fused-then";
}
const parts = (c: Command, k: 0 | 1): Part[] =>
  isSplit(c)
    ? [
        { k, kind: "fused-first" },
        { k, kind: "fused-then" },
      ]
    : c.verb === "sweep"
      ? [
          { k, kind: "time-outs" },
          { k, kind: "recovery" },
        ]
      : c.verb === "disableAgent"
        ? [
            { k, kind: "stop-agent" },
            { k, kind: "take-back" },
          ]
        : [{ k, kind: "whole" }];

/**
 * The issues a sweep beside `other` may pass over: its recovery and escalation
 * lock issue rows FOR UPDATE SKIP LOCKED, so a row the other statement holds
 * at that instant is left for the next sweep (sweep.ts). That is the rows the
 * other command names, or, for disableAgent, the rows its take-back locks:
 * the issues its agent's runs hold.
 */
function passable(a: Command, b: Command, s: State): string[] {
  if (a.verb === "sweep" && b.verb !== "sweep") return lockedBy(b, s);
  if (b.verb === "sweep" && a.verb !== "sweep") return lockedBy(a, s);
  return [];
}

function lockedBy(c: Command, s: State): string[] {
  if (c.verb !== "disableAgent") return namedIssues(c);
  const runs = new Set(s.runs.filter((r) => r.agentId === c.agentId).map((r) => r.id));
  return s.issues.filter((i) => i.checkoutRunId !== null && runs.has(i.checkoutRunId)).map((i) => i.id);
}

const subsets = (xs: string[]): string[][] => {
  const all: string[][] = [[]];
  for (const x of xs) all.push(...all.map((sub) => [...sub, x]));
  return all;
};

/** The model's sweep (recovery and escalation; the time-outs are done) leaving the issues in `skip` as they are. */
function recoveryPassingOver(s: State, skip: string[]) {
  if (skip.length === 0) return apply(s, { verb: "sweep" });
  const hidden: State = {
    ...s,
    issues: s.issues.map((i) => (skip.includes(i.id) ? { ...i, status: "DONE" as const, checkoutRunId: null, executionRunId: null } : i)),
  };
  const step = apply(hidden, { verb: "sweep" });
  return { ...step, state: { ...step.state, issues: step.state.issues.map((i) => (skip.includes(i.id) ? s.issues.find((o) => o.id === i.id)! : i)) } };
}

/** Whether an order puts the other command between a fused call's two statements. */
const splitsFused = (order: Part[]) => order.some((p, n) => p.kind === "fused-first" && order[n + 1]!.k !== p.k);

/**
 * What the database answered for a split fused call's second statement, as
 * far as it shows: a release's `next` (null: nothing claimed) for the claim's
 * passing over held rows (applyAllowingSkips); acquireExecution's is not
 * shown apart, and is not needed (it names its issue).
 */
const thenReal = (c: Fused, real: RealAnswer): RealAnswer =>
  c.verb === "releaseIssue" && real.__typename === "IssueReleased" && real.next ? real.next : { __typename: "NoIssueAvailable" };

/** Every merge of two commands' parts that keeps each command's own order. */
function interleavings(x: Part[], y: Part[]): Part[][] {
  if (x.length === 0) return [y];
  if (y.length === 0) return [x];
  return [...interleavings(x.slice(1), y).map((r) => [x[0]!, ...r]), ...interleavings(x, y.slice(1)).map((r) => [y[0]!, ...r])];
}

/** The issues a command names (the rows it locks by id). */
/**
 * The issues a command names (the rows it locks by id): for the work graph's
 * verbs also the blockers (FOR SHARE) and the parent (FOR UPDATE) they lock.
 */
function namedIssues(c: Command): string[] {
  const ids = c.verb === "releaseIssues" ? [...c.issueIds] : "issueId" in c && c.issueId !== undefined ? [c.issueId] : [];
  if (c.verb === "addDependency" || c.verb === "removeDependency") ids.push(c.blockedById);
  if (c.verb === "createSubIssues") ids.push(c.parentId);
  if (c.verb === "createIssues" || c.verb === "createSubIssues")
    ids.push(...c.inputs.flatMap((i) => [...(i.blockedBy ?? []), ...(i.parentId ? [i.parentId] : [])]));
  return ids;
}

const claimsNext = (c: Command) => c.verb === "claimIssues" || (c.verb === "claimIssue" && c.issueId === undefined);

/**
 * The model's step for `c`, run beside `other`. A claim without an issue id
 * locks its candidates FOR UPDATE SKIP LOCKED: it passes over a row that the
 * concurrent statement holds at that instant, even one that statement then
 * leaves as it was (docs/lifecycle.md: "Under contention the order is best
 * effort"). So when the real claim took later issues than the model would,
 * the step is taken again with the issues it passed over hidden, provided
 * each of them is one the other command may hold: one it names, or any
 * candidate when the other is a claim too (claims lock ahead of what they
 * take), or a later issue of a limited key whose earlier one is held (the
 * key's room went to that one; the fill comes from keys without a limit).
 * Nothing else is relaxed.
 */
function applyAllowingSkips(s: State, c: Command, other: Command, real: RealAnswer, names: Names) {
  const step = apply(s, c);
  if (!claimsNext(c) || (real.__typename !== "IssueClaimed" && real.__typename !== "IssuesClaimed" && real.__typename !== "NoIssueAvailable")) return step;
  const got = new Set<string>(
    real.__typename === "IssueClaimed"
      ? [names.model(real.issue.id)!]
      : real.__typename === "IssuesClaimed"
        ? real.issues.map((i: { id: string }) => names.model(i.id)!)
        : [],
  );
  const agentId = (c as { agentId: string }).agentId;
  const candidates = claimCandidates(s, agentId, (c as { includeUnassigned?: boolean }).includeUnassigned ?? false).map((i) => i.id);
  const last = Math.max(-1, ...candidates.map((id, n) => (got.has(id) ? n : -1)));
  // a claim that took fewer than it asked for may have passed over any later candidate too
  const short = real.__typename === "NoIssueAvailable" || (c.verb === "claimIssues" && got.size < c.limit);
  const upTo = short ? candidates.length - 1 : last;
  const skipped = candidates.slice(0, upTo + 1).filter((id) => !got.has(id));
  if (skipped.length === 0) return step;
  // the other command may hold any candidate when it claims next too (a release with next does, after its release)
  const mayHold = new Set([...(claimsNext(other) || (other.verb === "releaseIssue" && other.next) ? candidates : []), ...namedIssues(other)]);
  // A limited key's room goes to its first candidates: when one of them is held by a claim, the claim does
  // not take a later one of the key in its place (the key is full once the other commits).
  const heldKeys = new Set(
    s.issues.filter((i) => mayHold.has(i.id) && i.concurrencyKey !== null && s.limits[i.concurrencyKey] !== undefined).map((i) => i.concurrencyKey),
  );
  for (const id of candidates) if (heldKeys.has(s.issues.find((i) => i.id === id)!.concurrencyKey)) mayHold.add(id);
  if (!skipped.every((id) => mayHold.has(id))) return step;
  // the claim order is the one the statement's snapshot gives (keys' turns included); the held rows are passed by
  return apply(s, { ...(c as Extract<Command, { verb: "claimIssue" | "claimIssues" }>), passOver: skipped });
}

/** How many keys with room and only assigned claimable work go, by turn, before the key of the agent's next pool issue (0: no pool issue next). */
function poolBehindAssignedKeys(s: State, agentId: string): number {
  const next = takeInClaimOrder(s, agentId, true, 1)[0];
  if (!next || next.assigneeAgentId !== null || next.concurrencyKey === null) return 0;
  const served = (k: string) => s.turns.indexOf(k);
  const claimable = s.issues.filter((i) => isClaimable(i) && i.concurrencyKey !== null && (keyRoom(s, i.concurrencyKey) ?? 1) > 0);
  const assignedOnly = new Set(claimable.map((i) => i.concurrencyKey!));
  for (const i of claimable) if (i.assigneeAgentId === null) assignedOnly.delete(i.concurrencyKey!);
  const before = (k: string) => served(k) < served(next.concurrencyKey!) || (served(k) === served(next.concurrencyKey!) && k < next.concurrencyKey!);
  return [...assignedOnly].filter(before).length;
}

function noteReached(m: ModelBox, step: Concrete): void {
  const s = m.state;
  if ("one" in step) {
    const c = step.one;
    if ((c.verb === "claimIssue" && c.issueId === undefined) || c.verb === "claimIssues") {
      if (c.includeUnassigned && poolBehindAssignedKeys(s, c.agentId) >= 9) m.reached.poolPastAssignedKeys++;
    }
    if (c.verb === "claimIssues") {
      const run = s.runs.find((r) => r.id === c.runId);
      const work = s.issues.some((i) => i.status === "OPEN" && i.attemptCount < i.maxAttempts && i.assigneeAgentId === c.agentId);
      if (run && run.agentId === c.agentId && run.status !== "RUNNING" && run.finishedAt !== null && work) m.reached.batchByFinishedRun++;
    }
    noteGraphReached(m, c);
    if (isFused(c)) {
      const answer = apply(s, c).answer;
      if (
        (answer.__typename === "IssueClaimed" && answer.issue.status === "IN_PROGRESS" && !answer.alreadyHeld) ||
        (answer.__typename === "IssueReleased" && answer.next)
      ) {
        m.reached.fusedAlone++;
      }
    }
    return;
  }
  const [a, b] = step.pair;
  noteGraphRace(m, a, b);
  const byLiveRun = (c: Fused) => {
    const run = s.runs.find((r) => r.id === c.runId);
    return run !== undefined && run.agentId === c.agentId && isLive(run, s.clock);
  };
  if ([a, b].some((c) => isFused(c) && byLiveRun(c))) {
    m.reached.fusedRacing++;
    if (step.gate) m.reached.fusedRacingGated++;
  }
  for (const [x, y] of [
    [a, b],
    [b, a],
  ] as const) {
    if (x.verb === "disableAgent" && x.reason.trim() !== "" && s.agents.includes(x.agentId)) {
      const ours = (runId: string | null) => s.runs.some((r) => r.id === runId && r.agentId === x.agentId);
      const holds = s.issues.filter((i) => ours(i.checkoutRunId)).map((i) => i.id);
      const byAgent = "agentId" in y && y.agentId === x.agentId && y.verb !== "disableAgent" && y.verb !== "enableAgent";
      if (byAgent || namedIssues(y).some((id) => holds.includes(id)) || (y.verb === "sweep" && holds.length > 0)) {
        m.reached.disableRacing++;
        if (step.gate) m.reached.disableRacingGated++;
      }
    }
    if (
      x.verb === "claimIssues" &&
      y.verb === "finishRun" &&
      x.runId === y.runId &&
      x.agentId === y.agentId &&
      isLive(
        s.runs.find((r) => r.id === x.runId),
        s.clock,
      )
    ) {
      m.reached.batchRacingFinish++;
    }
    if (x.verb === "claimIssue" && x.issueId) {
      const issue = s.issues.find((i) => i.id === x.issueId);
      const holder = issue && s.runs.find((r) => r.id === issue.checkoutRunId);
      const adopter = s.runs.find((r) => r.id === x.runId);
      if (!issue || !holder || !isExpired(holder, s.clock) || !isLive(adopter, s.clock) || adopter!.agentId !== x.agentId) continue;
      if (!(x.expectedStatuses ?? ["OPEN"]).includes(issue.status)) continue;
      if (issue.assigneeAgentId !== null && issue.assigneeAgentId !== x.agentId) continue;
      const timesOut =
        y.verb === "sweep" ||
        (y.verb === "heartbeatRun" && y.runId === holder.id && y.agentId === holder.agentId) ||
        (y.verb === "claimIssue" &&
          y.issueId !== undefined &&
          y.issueId !== x.issueId &&
          s.issues.find((i) => i.id === y.issueId)?.checkoutRunId === holder.id);
      if (timesOut) {
        m.reached.adoptWhileTimedOut++;
        if (step.gate) m.reached.adoptWhileTimedOutGated++;
      }
    }
  }
}

/** The work graph's situations a step alone comes upon (Reached). */
function noteGraphReached(m: ModelBox, c: Command): void {
  const s = m.state;
  const live = (runId: string, agentId: string) => {
    const run = s.runs.find((r) => r.id === runId);
    return run !== undefined && run.agentId === agentId && isLive(run, s.clock);
  };
  if (c.verb === "claimIssue" && c.issueId && live(c.runId, c.agentId)) {
    const issue = s.issues.find((i) => i.id === c.issueId);
    if (issue && isWaiting(s, issue) && issue.checkoutRunId !== c.runId) m.reached.claimOfWaiting++;
  }
  if ((c.verb === "claimIssue" && !c.issueId) || c.verb === "claimIssues" || c.verb === "runHeartbeat") {
    const after = apply(s, c).state;
    for (const i of s.issues) {
      if (i.status !== "OPEN" || after.issues.find((x) => x.id === i.id)?.status === "OPEN") continue;
      if (i.notBefore !== null && i.notBefore > 0) m.reached.claimOnceDue++;
      if (i.blockedBy.length > 0 && s.issues.some((x) => x.parentId === i.id && i.blockedBy.includes(x.id))) m.reached.parentBack++;
    }
  }
  if (c.verb === "sweep" && overdueWhileLive(s)) m.reached.executionOverdue++;
  if (c.verb === "releaseIssue" && live(c.runId, c.agentId)) {
    const issue = s.issues.find((i) => i.id === c.issueId && i.checkoutRunId === c.runId);
    if (issue && c.outcome === "REQUEUE" && c.retryAfterSeconds !== undefined && issue.status === "IN_PROGRESS") m.reached.attemptGivenBack++;
    if (issue && c.outcome === "FAILED" && c.retryAfterSeconds === undefined && issue.retryDelaySeconds > 0 && issue.attemptCount < issue.maxAttempts) {
      m.reached.backoff++;
    }
  }
  if (c.verb === "sweep" || c.verb === "disableAgent") {
    const step = apply(s, c);
    if (step.events.some((e) => e.kind === "RECOVERED" && (s.issues.find((i) => i.id === e.issueId)?.retryDelaySeconds ?? 0) > 0)) m.reached.backoff++;
  }
}

/** Whether an execution is past its limit while its run is live: what a sweep takes back (EXECUTION_TIMED_OUT). */
const overdueWhileLive = (s: State) =>
  s.issues.some(
    (i) =>
      executionOverdue(i, s.clock) &&
      isLive(
        s.runs.find((r) => r.id === i.checkoutRunId),
        s.clock,
      ),
  );

/** The work graph's races a pair comes upon (Reached). */
function noteGraphRace(m: ModelBox, a: Command, b: Command): void {
  const s = m.state;
  const edge = (c: Command) => (c.verb === "addDependency" ? c : null);
  const [ea, eb] = [edge(a), edge(b)];
  if (ea && eb) {
    const alone = (e: typeof ea) => apply(s, e).answer.__typename === "DependencyAdded";
    const both = apply(apply(s, ea).state, eb).answer.__typename;
    if (alone(ea) && alone(eb) && both === "DependencyCycle") m.reached.cycleRace++;
  }
  for (const [x, y] of [
    [a, b],
    [b, a],
  ] as const) {
    if (claimsNext(x) && (y.verb === "releaseIssue" || y.verb === "releaseIssues") && y.outcome === "DONE") {
      const released = namedIssues(y);
      if (s.issues.some((i) => i.status === "OPEN" && i.blockedBy.some((id) => released.includes(id)))) m.reached.claimBesideDone++;
    }
    if (x.verb === "sweep" && overdueWhileLive(s)) m.reached.executionOverdue++;
    if (x.verb === "releaseIssue" && x.outcome === "FAILED" && x.retryAfterSeconds === undefined) {
      const issue = s.issues.find((i) => i.id === x.issueId && i.checkoutRunId === x.runId);
      if (issue && issue.retryDelaySeconds > 0 && issue.attemptCount < issue.maxAttempts) m.reached.backoff++;
    }
  }
  if (a.verb === "createIssues" && b.verb === "createIssues") {
    const keys = (c: typeof a) => c.inputs.map((i) => i.idempotencyKey).filter((k): k is string => k != null && !issueWithKey(s, k));
    if (keys(a).some((k) => keys(b).includes(k))) m.reached.keyRace++;
  }
}

// ---- fast-check commands ----

type Real = Sequence;

class StepCommand implements fc.AsyncCommand<ModelBox, Real> {
  private shown: string;
  private readonly items: Item[];
  constructor(abstract: Item | Item[]) {
    this.items = Array.isArray(abstract) ? abstract : [abstract];
    this.shown = this.items.map((i) => ("pair" in i ? `pair(${json(i.pair)}, gate ${i.gate})` : json(i))).join("; ");
  }
  private static resolved(s: State, a: Item): Concrete {
    return "pair" in a ? { pair: [resolve(s, a.pair[0]), resolve(s, a.pair[1])], gate: a.gate } : { one: resolve(s, a) };
  }
  check(): boolean {
    return true;
  }
  async run(m: ModelBox, real: Real): Promise<void> {
    const shown: string[] = [];
    for (const item of this.items) {
      const c = StepCommand.resolved(m.state, item);
      shown.push("one" in c ? describe(c.one) : `pair(${describe(c.pair[0])} ∥ ${describe(c.pair[1])}${c.gate ? ", gated" : ""})`);
      this.shown = shown.join("; ");
      if ("one" in c) await runOne(m, real, c.one);
      else await runPair(m, real, c.pair[0], c.pair[1], c.gate);
    }
  }
  toString(): string {
    return this.shown;
  }
}

/**
 * Pairs of the same alphabet, shaped like the races the SQL guards against, so
 * that they come up often (part 4): an adoption beside a statement that times
 * the dead holder out (its own heartbeat, a sweep, another adoption), and a
 * batch claim beside the finishRun of its own run.
 */
export type Item = Abstract | { pair: [Abstract, Abstract]; gate: boolean };

export const racePairArb: fc.Arbitrary<Item[]> = fc.oneof(
  { weight: 2, arbitrary: adoptRaceArb() },
  { weight: 2, arbitrary: batchRaceArb() },
  { weight: 1, arbitrary: disableRaceArb() },
  { weight: 3, arbitrary: graphRaceArb({ agentArb, runArb, issueArb }) },
  { weight: 2, arbitrary: fusedRaceArb() },
);

function adoptRaceArb(): fc.Arbitrary<Item[]> {
  return fc
    .record({
      adopter: agentArb,
      holder: agentArb,
      issue: issueArb,
      other: issueArb,
      which: fc.constantFrom("heartbeat", "sweep", "adopt"),
      gate: fc.boolean(),
      swap: fc.boolean(),
    })
    .map(({ adopter, holder, issue, other, which, gate, swap }): Item[] => {
      const adopt: Abstract = { verb: "claimById", agent: adopter, run: { back: 0 }, issue, expected: ["CLAIMED", "IN_PROGRESS"] };
      const timesOut: Abstract =
        which === "heartbeat"
          ? { verb: "heartbeatRun", agent: holder, run: { back: 0 } }
          : which === "sweep"
            ? { verb: "sweep" }
            : { verb: "claimById", agent: holder === adopter ? holder : adopter, run: { back: 0 }, issue: other, expected: ["CLAIMED", "IN_PROGRESS"] };
      // the holder takes the issue and dies (its lease runs out, still RUNNING); the adopter starts a run
      return [
        { verb: "startRun", agent: holder },
        { verb: "claimById", agent: holder, run: { back: 0 }, issue },
        { verb: "tick", by: 2 },
        { verb: "startRun", agent: adopter },
        { pair: swap ? [timesOut, adopt] : [adopt, timesOut], gate },
      ];
    });
}

function batchRaceArb(): fc.Arbitrary<Item[]> {
  return fc
    .record({ agent: agentArb, limit: fc.integer({ min: 1, max: 3 }), acquireExecution: fc.boolean(), gate: fc.boolean(), swap: fc.boolean() })
    .map(({ agent, limit, acquireExecution, gate, swap }): Item[] => {
      const batch: Abstract = { verb: "claimIssues", agent, run: { back: 0 }, limit, includeUnassigned: true, acquireExecution };
      const finish: Abstract = { verb: "finishRun", agent, run: { back: 0 }, status: "SUCCEEDED" };
      return [{ pair: swap ? [finish, batch] : [batch, finish], gate }];
    });
}

/**
 * disableAgent beside what its agent's runs do, or what others do to the
 * issues they hold: the agent claims an issue (and perhaps dies: its lease runs
 * out), the other agent starts a run, then the disable races a claim, an
 * acquire, a release, a heartbeat or a finish of the agent's run, a startRun
 * of the agent, the other agent's adoption of the issue, a force release, a
 * sweep, or a second disable; and the agent is perhaps enabled again after.
 */
function disableRaceArb(): fc.Arbitrary<Item[]> {
  return fc
    .record({
      agent: agentArb,
      issue: issueArb,
      dead: fc.boolean(),
      which: fc.constantFrom("claimNext", "claimIssues", "acquire", "release", "heartbeat", "finish", "start", "adopt", "force", "sweep", "disable"),
      gate: fc.boolean(),
      swap: fc.boolean(),
      reenable: fc.boolean(),
    })
    .map(({ agent, issue, dead, which, gate, swap, reenable }): Item[] => {
      const other = agent === "A" ? "B" : "A";
      const own = { agent, run: { back: 0 } } as const;
      const disable: Abstract = { verb: "disableAgent", agent, reason: "operator" };
      const beside: Abstract =
        which === "claimNext"
          ? { verb: "claimNext", ...own, includeUnassigned: true }
          : which === "claimIssues"
            ? { verb: "claimIssues", ...own, limit: 2, includeUnassigned: true, acquireExecution: true }
            : which === "acquire"
              ? { verb: "acquireExecution", ...own, issue }
              : which === "release"
                ? { verb: "releaseIssue", ...own, issue, outcome: "FAILED" }
                : which === "heartbeat"
                  ? { verb: "heartbeatRun", ...own }
                  : which === "finish"
                    ? { verb: "finishRun", ...own, status: "SUCCEEDED" }
                    : which === "start"
                      ? { verb: "startRun", agent }
                      : which === "adopt"
                        ? { verb: "claimById", agent: other, run: { back: 0 }, issue, expected: ["CLAIMED", "IN_PROGRESS"] }
                        : which === "force"
                          ? { verb: "forceReleaseIssue", issue }
                          : which === "sweep"
                            ? { verb: "sweep" }
                            : { verb: "disableAgent", agent, reason: "again" };
      return [
        { verb: "startRun", agent },
        { verb: "claimById", ...own, issue },
        ...(dead ? [{ verb: "tick", by: 2 } as const] : []),
        { verb: "startRun", agent: other },
        { pair: swap ? [beside, disable] : [disable, beside], gate },
        ...(reenable ? [{ verb: "enableAgent", agent } as const] : []),
      ];
    });
}

/**
 * The fused calls (issue 31) beside what may come between their two
 * statements: the agent claims an issue with startExecution, the other agent
 * starts a run (and perhaps claims one too); then the agent's release with
 * next races the other's claim-next or release with next (either may take the
 * released issue between the release and its own claim), the finishRun or
 * disableAgent of the agent (the claim then finds the run ended), or a sweep;
 * or the other agent's claim by id with startExecution races a force release
 * or cancellation of that issue or the finishRun of its own run (the hold
 * lost between the checkout and acquireExecution), or the agent's own claim
 * of the same issue with startExecution.
 *
 * The release beside its own run's finishRun or disableAgent is always gated:
 * RELEASE_IF_CHECKOUT_HELD reads the run without FOR SHARE, so ungated it may
 * judge the run live from its snapshot and then find the issue already
 * released by the finish (or the take-back) it waited for, answering
 * NotLockOwner where every serial order answers RunNotActive (a plain release
 * does it too: reported with issue 31). Gated, the release is done before the
 * gate opens, and its claim (FOR SHARE) races the finish or the disable.
 */
function fusedRaceArb(): fc.Arbitrary<Item[]> {
  return fc
    .record({
      agent: agentArb,
      issue: issueArb,
      otherIssue: issueArb,
      which: fc.constantFrom("claimNext", "releaseNext", "finish", "disable", "sweep", "force", "cancel", "finishClaim", "sameIssue"),
      outcome: fc.constantFrom<"DONE" | "REQUEUE" | "FAILED">("DONE", "REQUEUE", "REQUEUE", "FAILED"),
      start: fc.boolean(),
      otherStarts: fc.boolean(),
      gate: fc.boolean(),
      swap: fc.boolean(),
    })
    .map(({ agent, issue, otherIssue, which, outcome, start, otherStarts, gate, swap }): Item[] => {
      const other = agent === "A" ? "B" : "A";
      const next: ClaimNext = start ? { includeUnassigned: true } : { includeUnassigned: true, startExecution: false };
      const release: Abstract = { verb: "releaseIssue", agent, run: { back: 0 }, issue, outcome, next };
      const claimStart: Abstract = { verb: "claimById", agent: other, run: { back: 0 }, issue: otherIssue, startExecution: true };
      const setup: Item[] = [
        { verb: "startRun", agent },
        { verb: "claimById", agent, run: { back: 0 }, issue, startExecution: true },
        { verb: "startRun", agent: other },
      ];
      let pair: [Abstract, Abstract];
      switch (which) {
        case "claimNext":
          pair = [release, { verb: "claimNext", agent: other, run: { back: 0 }, includeUnassigned: true, ...(otherStarts ? { startExecution: true } : {}) }];
          break;
        case "releaseNext":
          setup.push({ verb: "claimById", agent: other, run: { back: 0 }, issue: otherIssue, startExecution: true });
          pair = [release, { verb: "releaseIssue", agent: other, run: { back: 0 }, issue: otherIssue, outcome: "REQUEUE", next: { includeUnassigned: true } }];
          break;
        case "finish":
          pair = [release, { verb: "finishRun", agent, run: { back: 0 }, status: "SUCCEEDED" }];
          break;
        case "disable":
          pair = [release, { verb: "disableAgent", agent, reason: "operator" }];
          break;
        case "sweep":
          pair = [release, { verb: "sweep" }];
          break;
        case "force":
          pair = [claimStart, { verb: "forceReleaseIssue", issue: otherIssue }];
          break;
        case "cancel":
          pair = [claimStart, { verb: "updateIssue", issue: otherIssue, input: { status: "CANCELLED" } }];
          break;
        case "finishClaim":
          pair = [claimStart, { verb: "finishRun", agent: other, run: { back: 0 }, status: "SUCCEEDED" }];
          break;
        default:
          pair = [claimStart, { verb: "claimById", agent, run: { back: 0 }, issue: otherIssue, startExecution: true }];
      }
      const gated = gate || which === "finish" || which === "disable";
      return [...setup, { pair: swap ? [pair[1], pair[0]] : pair, gate: gated }];
    });
}

export function commandsArb(maxCommands: number): fc.Arbitrary<Iterable<fc.AsyncCommand<ModelBox, Real>>> {
  return fc.commands(
    [
      abstractArb(true).map((a) => new StepCommand(a)),
      fc.record({ a: abstractArb(false), b: abstractArb(false), gate: fc.boolean() }).map(({ a, b, gate }) => new StepCommand({ pair: [a, b], gate })),
      racePairArb.map((items) => new StepCommand(items)),
    ],
    { maxCommands, size: "max" },
  );
}

// ---- a whole run ----

/** A failing sequence as a test to paste: replay(world, scenario) runs it through the same adapter. */
export function asReplayableTest(scenario: Scenario, message: string): string {
  const lines = scenario.steps.map((s) => `      ${json(s)},`);
  return [
    `it("conformance: replays a shrunk sequence", async () => {`,
    `  // ${message.split("\n").join("\n  // ")}`,
    `  await replay(world, {`,
    `    initial: ${json(scenario.initial)},`,
    `    steps: [`,
    ...lines,
    `    ],`,
    `  });`,
    `});`,
  ].join("\n");
}

export interface RunOptions {
  runs: number;
  seed: number;
  maxCommands?: number;
  /** Called after each sequence (for progress). */
  onSequence?: (n: number) => void;
}

export interface RunReport {
  result: { failed: boolean; numRuns: number; numShrinks: number; counterexamplePath: string | null; seed: number };
  reached: Reached;
  sequences: number;
  commands: number;
  /** The shrunk failure, as a replayable test (null when all passed). */
  replayable: string | null;
}

/** The property: `runs` generated sequences, each on a fresh company. */
export async function runConformance(world: RealWorld, options: RunOptions): Promise<RunReport> {
  const reached = noneReached();
  let sequences = 0;
  let commands = 0;
  let last: { scenario: Scenario; error: string } | null = null;
  const property = fc.asyncProperty(initialArb, commandsArb(options.maxCommands ?? 8), async (initial, cmds) => {
    const box: ModelBox = { state: initialState(initial), events: [], scenario: { initial, steps: [] }, reached };
    try {
      await fc.asyncModelRun(async () => ({ model: box, real: await world.setup(initial) }), cmds);
    } catch (err) {
      last = { scenario: box.scenario, error: err instanceof Error ? err.message || String(err.stack ?? err.name) : String(err) };
      throw err;
    } finally {
      sequences++;
      commands += box.scenario.steps.length;
      options.onSequence?.(sequences);
    }
  });
  const result = await fc.check(property, { numRuns: options.runs, seed: options.seed, endOnFailure: false });
  const failure = last as { scenario: Scenario; error: string } | null;
  return {
    result: { failed: result.failed, numRuns: result.numRuns, numShrinks: result.numShrinks, counterexamplePath: result.counterexamplePath, seed: result.seed },
    reached,
    sequences,
    commands,
    replayable: result.failed && failure ? asReplayableTest(failure.scenario, failure.error) : null,
  };
}

/** Runs a scenario's steps through the model and the real verbs, as the conformance run does; throws a Mismatch at the first disagreement. */
export async function replay(world: RealWorld, scenario: Scenario): Promise<ModelBox> {
  const box: ModelBox = { state: initialState(scenario.initial), events: [], scenario: { ...scenario, steps: [] }, reached: noneReached() };
  const seq = await world.setup(scenario.initial);
  for (const step of scenario.steps) {
    if ("one" in step) await runOne(box, seq, step.one);
    else await runPair(box, seq, step.pair[0], step.pair[1], step.gate);
  }
  return box;
}
