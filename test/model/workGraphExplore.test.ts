// The work graph (issue 29) explored exhaustively: dependencies and readiness,
// cycles, sub-issues with parentWaits and idempotency keys, delays, backoff and
// execution limits, each from small companies, every invariant (graphInvariants.ts
// with the lock protocol's) in every reachable state and on every transition;
// then readiness broken on purpose, which the exploration must catch with the
// shortest sequence that shows it, and a random walk over a larger company
// must catch and fast-check shrink. Pure computation: no database.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Alphabet, Answer, Command, InitialStateInput, Issue, State, Step } from "../../src/model/index.js";
import {
  GRAPH_VERBS,
  REACHABLE_STATE_CHECKS,
  TRANSITION_INVARIANTS,
  apply,
  commandsFor,
  describe as describeCommand,
  explore,
  initialState,
  isLive,
} from "../../src/model/index.js";
import { Coverage, noViolations } from "./coverage.js";

/** What the work graph's explorations saw besides Coverage's answers, reasons and rows. */
class GraphCoverage {
  readonly seen = new Set<string>();
  observe = (before: State, c: Command, step: Step<Answer>): void => {
    const a = step.answer;
    const was = (id: string) => before.issues.find((i) => i.id === id);
    if (a.__typename === "DependencyCycle") this.seen.add(`cycle of ${a.path.length}`);
    if (a.__typename === "IssueWaiting") {
      if (a.waitingOn.some((id) => was(id)?.status === "CANCELLED")) this.seen.add("waiting on a CANCELLED blocker");
      if (a.waitingOn.length === 0) this.seen.add("waiting for notBefore alone");
    }
    if (a.__typename === "SubIssuesCreated" && c.verb === "createSubIssues") {
      if (c.parentWaits && a.parent.blockedBy.length > 0) this.seen.add("parentWaits");
      if (a.issues.some((i) => was(i.id))) this.seen.add("a sub-issue answered by its key");
    }
    if (a.__typename === "IssuesCreated" && a.issues.some((i) => was(i.id))) this.seen.add("an issue answered by its key");
    if (step.state === before) return;
    for (const after of step.state.issues) {
      const b = was(after.id);
      if (!b) continue;
      const claimed = b.status === "OPEN" && after.status === "CLAIMED";
      if (claimed && b.blockedBy.length > 0) this.seen.add("claimed once its blockers were DONE");
      if (claimed && b.notBefore !== null) this.seen.add("claimed once its notBefore was due");
      if (claimed && b.blockedBy.length > 0 && step.state.issues.some((i) => i.parentId === b.id))
        this.seen.add("a parent claimed again once its sub-issues were DONE");
      if (after.notBefore !== null && after.notBefore !== b.notBefore && after.status === "OPEN" && c.verb !== "updateIssue") {
        const by = c.verb === "releaseIssue" && c.retryAfterSeconds !== undefined ? "retryAfterSeconds" : c.verb;
        this.seen.add(`delayed ${after.notBefore - before.clock} by ${by}`);
      }
      if (c.verb === "releaseIssue" && after.attemptCount < b.attemptCount) this.seen.add("an attempt given back");
      const holder = before.runs.find((r) => r.id === b.checkoutRunId);
      if (c.verb === "sweep" && isLive(holder, before.clock) && after.checkoutRunId === null) this.seen.add("an execution taken from a live run");
    }
  };
}

/** One exploration, with Coverage and GraphCoverage watching; prints its figures as coverage.ts's run() does. */
function explored(name: string, roots: InitialStateInput[], alphabet: Alphabet, maxRuns: number) {
  const base = new Coverage();
  const graph = new GraphCoverage();
  const result = explore({
    roots: roots.map(initialState),
    maxRuns,
    alphabet,
    observe: (before, c, step) => {
      base.observe(before, c, step);
      graph.observe(before, c, step);
    },
  });
  console.log(
    `model exploration (${name}): ${result.states} states, ${result.transitions} transitions, depth ${result.depth}, ${result.pruned} pruned (run bound), ${Math.round(result.ms)} ms`,
  );
  return { result, coverage: { answers: base.answers, reasons: base.reasons, verbs: base.verbs, seen: graph.seen } };
}

/** The board's and the agents' moves kept small: cancel only, finish SUCCEEDED, DONE and REQUEUE (FAILED: the time exploration). */
const SMALL: Alphabet = {
  updates: [{ status: "CANCELLED" }],
  finishStatuses: ["SUCCEEDED"],
  agentSwitches: false,
  outcomes: ["DONE", "REQUEUE"],
  claimLimits: [2],
};

const DEPENDENCIES: [InitialStateInput[], Alphabet, number] = [
  [
    {
      agents: ["A", "B"],
      issues: [
        { id: "i1", maxAttempts: 1 },
        { id: "i2", assigneeAgentId: "B", maxAttempts: 1, blockedBy: ["i1"] },
      ],
      leaseLength: 1,
    },
  ],
  { ...SMALL, expectedStatuses: [undefined, ["CLAIMED", "IN_PROGRESS"]], graph: {} },
  2,
];

describe("the work graph, explored exhaustively", () => {
  it("dependencies: 2 agents, i2 (B's) blocked by i1, edges added and removed by the board and by holders, up to 2 runs: never early, IssueWaiting exactly when waiting, cycles refused", () => {
    const [roots, alphabet, maxRuns] = DEPENDENCIES;
    const { result, coverage } = explored("dependencies", roots, alphabet, maxRuns);
    noViolations(result);
    expect(result.complete).toBe(true);
    for (const a of [
      "claimIssue:IssueWaiting",
      "addDependency:DependencyAdded",
      "addDependency:DependencyCycle",
      "addDependency:IssueNotFound",
      "addDependency:NotLockOwner",
      "removeDependency:DependencyRemoved",
      "removeDependency:IssueNotFound",
      "removeDependency:NotLockOwner",
    ]) {
      expect(coverage.answers).toContain(a);
    }
    for (const s of ["cycle of 1", "cycle of 2", "waiting on a CANCELLED blocker", "claimed once its blockers were DONE"]) expect(coverage.seen).toContain(s);
  });

  it("cycles: 3 issues and the board's edges (and cancellations): the graph stays acyclic, and every refused edge names its cycle", () => {
    const { result, coverage } = explored(
      "cycles",
      [{ agents: [], issues: [{ id: "i1" }, { id: "i2" }, { id: "i3" }] }],
      { updates: [{ status: "CANCELLED" }], probes: false, agentSwitches: false, graph: {} },
      0,
    );
    noViolations(result);
    expect(result.complete).toBe(true);
    for (const s of ["cycle of 1", "cycle of 2", "cycle of 3"]) expect(coverage.seen).toContain(s);
  });

  it("sub-issues and creation: an agent splits its issue (parentWaits or not, by key), requeues it and gets it back; the board creates with blockers and keys: one issue per key, no cycle", () => {
    const { result, coverage } = explored(
      "sub-issues",
      [{ agents: ["A"], issues: [{ id: "i1", maxAttempts: 1 }], leaseLength: 1 }],
      {
        ...SMALL,
        expectedStatuses: [undefined],
        graph: { edges: false, creates: [{ idempotencyKey: "k" }], subIssues: [{}, { idempotencyKey: "k" }], maxIssues: 2 },
      },
      1,
    );
    noViolations(result);
    expect(result.complete).toBe(true);
    const nested = explored(
      "sub-issues under a dependent",
      [
        {
          agents: ["A"],
          issues: [
            { id: "i1", maxAttempts: 1 },
            { id: "i2", maxAttempts: 1, blockedBy: ["i1"] },
          ],
          leaseLength: 1,
        },
      ],
      {
        ...SMALL,
        expectedStatuses: [undefined],
        graph: { edges: false, creates: [{ blockedByEach: true }], subIssues: [{ blockedByEach: true }], maxIssues: 3 },
      },
      1,
    );
    noViolations(nested.result);
    expect(nested.result.complete).toBe(true);
    for (const a of [
      "createSubIssues:SubIssuesCreated",
      "createSubIssues:NotLockOwner",
      "createSubIssues:IssueNotFound",
      "createSubIssues:RunNotActive",
      "createSubIssues:Error(BAD_USER_INPUT)",
      "createSubIssues:Error(NOT_FOUND)",
      "createIssues:IssuesCreated",
      "createIssues:Error(NOT_FOUND)",
      "createIssues:Error(BAD_USER_INPUT)",
    ]) {
      expect(new Set([...coverage.answers, ...nested.coverage.answers])).toContain(a);
    }
    for (const s of [
      "parentWaits",
      "a sub-issue answered by its key",
      "an issue answered by its key",
      "a parent claimed again once its sub-issues were DONE",
    ]) {
      expect(coverage.seen).toContain(s);
    }
    expect([...coverage.verbs, ...nested.coverage.verbs]).toEqual(
      expect.arrayContaining(GRAPH_VERBS.filter((v) => v !== "addDependency" && v !== "removeDependency")),
    );
  });

  it("delays, backoff, retryAfterSeconds and maxExecutionSeconds on the integer clock (a day is 2 units): every delay as the rules say, the cap, the attempt given back, overdue executions taken back", () => {
    const { result, coverage } = explored(
      "time",
      [{ agents: ["A"], issues: [{ id: "i1", maxAttempts: 3, retryDelaySeconds: 1, maxExecutionSeconds: 1 }], leaseLength: 2, tickSeconds: 43_200 }],
      {
        updates: [{ status: "CANCELLED" }, { maxExecutionSeconds: 2 }, { retryDelaySeconds: 2 }],
        expectedStatuses: [undefined],
        finishStatuses: ["SUCCEEDED"],
        agentSwitches: false,
        time: { retryAfter: [1], delays: [1], results: true },
      },
      2,
    );
    noViolations(result);
    expect(result.complete).toBe(true);
    for (const s of [
      "delayed 1 by releaseIssue",
      "delayed 2 by releaseIssue",
      "delayed 1 by retryAfterSeconds",
      "delayed 1 by sweep",
      "delayed 2 by sweep",
      "an attempt given back",
      "an execution taken from a live run",
      "claimed once its notBefore was due",
      "waiting for notBefore alone",
    ]) {
      expect(coverage.seen).toContain(s);
    }
    for (const r of ["RECOVERED:EXECUTION_TIMED_OUT", "ESCALATED:EXECUTION_TIMED_OUT", "RECOVERED:LEASE_EXPIRED"]) expect(coverage.reasons).toContain(r);
    expect(coverage.answers).toContain("releaseIssue:Error(BAD_USER_INPUT)");
  });
});

// ---------------------------------------------------------------------------
// Readiness broken on purpose.

type Mutant = (state: State, c: Command) => Step<Answer> | null;

/** The state with every blocker (and, with `delays`, every notBefore) forgotten: what a readiness check that ignores them sees. */
const blind = (state: State, what: { blockers?: boolean; delays?: boolean }): State => ({
  ...state,
  issues: state.issues.map((i) => ({ ...i, blockedBy: what.blockers ? [] : i.blockedBy, notBefore: what.delays ? null : i.notBefore })),
});

/** The step of `c` taken on the blind state, with what it changed put back on the real one (blockers and notBefore as they were). */
function onBlind(state: State, c: Command, what: { blockers?: boolean; delays?: boolean }): Step<Answer> {
  return restoring(state, apply(blind(state, what), c), (i, was) => ({ ...i, blockedBy: was.blockedBy, notBefore: was.notBefore }));
}

/** A mutant's step on a doctored copy of `state`, the doctored fields put back (`back`); a step that changed nothing keeps `state` itself. */
function restoring(state: State, step: Step<Answer>, back: (issue: Issue, was: Issue) => Issue): Step<Answer> {
  const untouched =
    step.events.length === 0 &&
    step.state.runs === state.runs &&
    step.state.issues.length === state.issues.length &&
    step.state.issues.every((i) => {
      const was = state.issues.find((x) => x.id === i.id)!;
      return JSON.stringify(back(i, was)) === JSON.stringify(was);
    });
  if (untouched && step.state.clock === state.clock && step.state.turns.join() === state.turns.join() && step.state.disabled === state.disabled)
    return { ...step, state };
  return {
    ...step,
    state: {
      ...step.state,
      issues: step.state.issues.map((i) => {
        const was = state.issues.find((x) => x.id === i.id);
        return was ? back(i, was) : i;
      }),
    },
  };
}

/** Claim-next (claimIssue without an id, claimIssues, the scheduler tick) that ignores waitingOn. */
const claimNextIgnoringWaitingOn: Mutant = (state, c) =>
  (c.verb === "claimIssue" && !c.issueId) || c.verb === "claimIssues" || c.verb === "runHeartbeat" ? onBlind(state, c, { blockers: true }) : null;
/** The same, ignoring notBefore. */
const claimNextIgnoringNotBefore: Mutant = (state, c) =>
  (c.verb === "claimIssue" && !c.issueId) || c.verb === "claimIssues" ? onBlind(state, c, { delays: true }) : null;

function catches(mutant: Mutant, roots: InitialStateInput[], alphabet: Alphabet, maxRuns: number) {
  const result = explore({
    roots: roots.map(initialState),
    maxRuns,
    maxViolations: 1,
    alphabet,
    apply: (state, c) => mutant(state, c) ?? apply(state, c),
  });
  expect(result.violations.length).toBeGreaterThan(0);
  return result.violations[0]!;
}

describe("the exploration catches broken readiness, with the shortest sequence that shows it", () => {
  const [roots, alphabet, maxRuns] = DEPENDENCIES;

  it("claimIssue without an id that ignores waitingOn: B's first claim takes its i2, which waits on i1", () => {
    const v = catches((state, c) => (c.verb === "claimIssue" && !c.issueId ? claimNextIgnoringWaitingOn(state, c) : null), roots, alphabet, maxRuns);
    expect(v.invariant).toMatch(/^never early/);
    expect(v.message).toBe("claimIssue claimed i2 while its blocker(s) i1 were not DONE");
    // breadth first: no shorter sequence breaks the rule
    expect(v.trace).toEqual(["startRun(B)", "claimIssue(B, r1, false)"]);
  });

  it("claim-next everywhere (claimIssue, claimIssues, the scheduler tick) ignoring waitingOn: the first scheduler tick gives B its waiting i2", () => {
    const v = catches(claimNextIgnoringWaitingOn, roots, alphabet, maxRuns);
    expect(v.invariant).toMatch(/^never early/);
    expect(v.message).toBe("runHeartbeat claimed i2 while its blocker(s) i1 were not DONE");
    expect(v.trace).toEqual(["runHeartbeat()"]);
  });

  it("claim-next that ignores notBefore: the scheduler's claim, a requeue with retryAfterSeconds, and the same run's claim takes the issue back at once", () => {
    const v = catches(
      claimNextIgnoringNotBefore,
      [{ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A" }], leaseLength: 2 }],
      { ...SMALL, expectedStatuses: [undefined], time: { retryAfter: [1] } },
      1,
    );
    expect(v.invariant).toMatch(/^never early/);
    expect(v.trace).toEqual(["runHeartbeat()", "releaseIssue(A, r1, i1, REQUEUE, 1)", "claimIssue(A, r1, false)"]);
  });

  it("a claim by id that ignores waitingOn (no IssueWaiting)", () => {
    const v = catches((state, c) => (c.verb === "claimIssue" && c.issueId ? onBlind(state, c, { blockers: true }) : null), roots, alphabet, maxRuns);
    expect(v.invariant).toMatch(/^never early|answers IssueWaiting/);
    expect(v.trace).toHaveLength(2);
  });

  it("addDependency without its cycle check", () => {
    const v = catches(
      (state, c) => {
        if (c.verb !== "addDependency") return null;
        const cur = state.issues.find((i) => i.id === c.issueId);
        if (!cur || !state.issues.some((i) => i.id === c.blockedById) || cur.blockedBy.includes(c.blockedById)) return null;
        const after = { ...cur, blockedBy: [...cur.blockedBy, c.blockedById].sort() };
        return {
          answer: { __typename: "DependencyAdded", issue: after },
          state: { ...state, issues: state.issues.map((i) => (i.id === cur.id ? after : i)) },
          events: [],
        };
      },
      roots,
      alphabet,
      maxRuns,
    );
    expect(v.invariant).toMatch(/cycle/);
    expect(v.trace).toEqual(["addDependency(i1, i1)"]);
  });

  it("a release FAILED that forgets the backoff", () => {
    const v = catches(
      (state, c) =>
        c.verb === "releaseIssue" && c.outcome === "FAILED" ? restoring(state, apply(state, c), (i, was) => ({ ...i, notBefore: was.notBefore })) : null,
      [{ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A", retryDelaySeconds: 1 }], leaseLength: 2 }],
      { ...SMALL, outcomes: ["FAILED"], expectedStatuses: [undefined] },
      1,
    );
    expect(v.invariant).toMatch(/^notBefore moves only as the rules say/);
    expect(v.trace).toEqual(["runHeartbeat()", "releaseIssue(A, r1, i1, FAILED)"]);
  });

  it("a requeue with retryAfterSeconds that keeps the attempt", () => {
    const v = catches(
      (state, c) =>
        c.verb === "releaseIssue" && c.retryAfterSeconds !== undefined ? apply(state, { ...c, retryAfterSeconds: undefined, outcome: c.outcome }) : null,
      [{ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A" }], leaseLength: 2 }],
      { ...SMALL, expectedStatuses: [undefined], time: { retryAfter: [1] } },
      1,
    );
    expect(v.invariant).toMatch(/attemptCount goes up by exactly|notBefore moves only/);
  });

  it("createIssues that ignores the keys the company has", () => {
    const v = catches(
      (state, c) =>
        c.verb === "createIssues"
          ? restoring(state, apply({ ...state, issues: state.issues.map((i) => ({ ...i, idempotencyKey: null })) }, c), (i, was) => ({
              ...i,
              idempotencyKey: was.idempotencyKey,
            }))
          : null,
      [{ agents: [], issues: [{ id: "i1" }] }],
      { probes: false, agentSwitches: false, updates: [], graph: { creates: [{ idempotencyKey: "k" }], edges: false } },
      0,
    );
    expect(v.invariant).toMatch(/idempotency key/);
    expect(v.trace).toEqual(['createIssues([{"idempotencyKey":"k"}])', 'createIssues([{"idempotencyKey":"k"}])']);
  });

  it("a sweep that takes back no overdue execution", () => {
    const v = catches(
      (state, c) =>
        c.verb === "sweep"
          ? restoring(state, apply({ ...state, issues: state.issues.map((i) => ({ ...i, maxExecutionSeconds: null })) }, c), (i, was) => ({
              ...i,
              maxExecutionSeconds: was.maxExecutionSeconds,
            }))
          : null,
      [{ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A", maxExecutionSeconds: 1 }], leaseLength: 3 }],
      { ...SMALL, expectedStatuses: [undefined] },
      1,
    );
    expect(v.invariant).toMatch(/^a sweep leaves no execution overdue/);
    expect(v.trace).toEqual(["startRun(A)", "claimIssues(A, r1, 2, false, true)", "tick()", "sweep()"]);
  });
});

describe("a random walk over a larger company finds broken readiness, and fast-check shrinks it", () => {
  // 2 agents, 5 issues in a small DAG (i3 waits on i1 and i2, i5 on i3, i4 on nothing), some delayed:
  // too large to explore exhaustively at CI's pace, walked at random instead
  const root = initialState({
    agents: ["A", "B"],
    issues: [
      { id: "i1", maxAttempts: 2 },
      { id: "i2", assigneeAgentId: "A", maxAttempts: 2, retryDelaySeconds: 1 },
      { id: "i3", blockedBy: ["i1", "i2"], maxAttempts: 2 },
      { id: "i4", assigneeAgentId: "B", notBefore: 2 },
      { id: "i5", assigneeAgentId: "B", blockedBy: ["i3"] },
    ],
    leaseLength: 2,
  });
  const alphabet: Alphabet = { ...SMALL, outcomes: ["DONE", "FAILED", "REQUEUE"], expectedStatuses: [undefined], graph: {}, time: { retryAfter: [1] } };

  /** Walks the commands the choices pick (each an index into commandsFor), checking every invariant; the first failure, with the commands taken. */
  function walk(choices: readonly number[], mutant: Mutant | null): { failure: string | null; trace: string[] } {
    let state = root;
    const trace: string[] = [];
    for (const n of choices) {
      const commands = commandsFor(state, alphabet);
      const c = commands[n % commands.length]!;
      const step = mutant?.(state, c) ?? apply(state, c);
      trace.push(describeCommand(c));
      const refusal = step.state === state && step.events.length === 0;
      for (const inv of TRANSITION_INVARIANTS) {
        if (refusal && !inv.onRefusals) continue;
        const message = inv.check(state, c, step);
        if (message) return { failure: `${inv.name}: ${message}`, trace };
      }
      state = step.state;
      for (const inv of REACHABLE_STATE_CHECKS) {
        const message = inv.check(state);
        if (message) return { failure: `${inv.name}: ${message}`, trace };
      }
    }
    return { failure: null, trace };
  }

  const choicesArb = fc.array(fc.nat(), { minLength: 1, maxLength: 40 });

  it("the model itself: 300 walks of up to 40 commands break no invariant", () => {
    fc.assert(
      fc.property(choicesArb, (choices) => walk(choices, null).failure === null),
      { numRuns: 300, seed: 29 },
    );
  });

  it("claim-next that ignores waitingOn: found, and shrunk to a few commands that end in the early claim", () => {
    const report = fc.check(
      fc.property(choicesArb, (choices) => walk(choices, claimNextIgnoringWaitingOn).failure === null),
      { numRuns: 2000, seed: 29 },
    );
    expect(report.failed).toBe(true);
    const shrunk = walk(report.counterexample![0], claimNextIgnoringWaitingOn);
    expect(shrunk.failure).toMatch(/^never early/);
    // a run and a claim are enough (the claim of i3 or i5 before their blockers are DONE), plus a command or two fast-check could not remove
    expect(shrunk.trace.length).toBeLessThanOrEqual(4);
    expect(shrunk.trace.at(-1)).toMatch(/^(claimIssue|claimIssues|runHeartbeat)\(/);
    console.log(`random walk: broken readiness found after ${report.numRuns} walk(s), shrunk ${report.numShrinks} times to: ${shrunk.trace.join(" → ")}`);
  });
});
