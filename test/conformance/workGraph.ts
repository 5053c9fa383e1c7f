// The work graph's part of the conformance run (issue 29): its abstract
// commands (creation, sub-issues, edges; releases and board updates with
// delays), their arbitraries, the initial graphs and delays of a company, and
// the race shapes that make the graph's races common: two opposite edges (or
// the last edge of a triangle) at once, a claim beside the DONE release of a
// blocker, two creates with one idempotency key, a split beside its parent's
// release, and a split that comes back (parentWaits, REQUEUE, the sub-issue
// DONE, the parent claimed again).
import fc from "fast-check";
import type { CreateInput, IssueInput, State, UpdateIssueInput } from "../../src/model/index.js";
import type { Abstract, Item, RunRef } from "./conformance.js";

/** An input of createIssues or createSubIssues: issues by index (as Abstract names them), time relative to the clock. */
export interface AbstractCreate {
  assignee?: string | null;
  blockedBy?: number[];
  /** createIssues only. */
  parent?: number;
  notBeforeIn?: number;
  key?: string;
  retryDelay?: number;
  maxExecution?: number;
  payload?: unknown;
}

/** A board update whose notBefore is relative to the clock (notBeforeIn), or as UpdateIssueInput says. */
export type AbstractUpdate = UpdateIssueInput & { notBeforeIn?: number };

export type GraphAbstract =
  | { verb: "createIssues"; inputs: AbstractCreate[] }
  | { verb: "createSubIssues"; agent: string; run: RunRef; parent: number; inputs: AbstractCreate[]; parentWaits: boolean }
  | { verb: "addDependency" | "removeDependency"; issue: number; blocker: number; by: "board" | { agent: string; run: RunRef } };

/** An AbstractCreate against the model's state. */
export function resolveCreate(s: State, a: AbstractCreate, issue: (n: number) => string): CreateInput {
  const input: CreateInput = {};
  if (a.assignee !== undefined) input.assigneeAgentId = a.assignee;
  if (a.blockedBy?.length) input.blockedBy = a.blockedBy.map(issue);
  if (a.parent !== undefined) input.parentId = issue(a.parent);
  if (a.notBeforeIn !== undefined) input.notBefore = s.clock + a.notBeforeIn;
  if (a.key !== undefined) input.idempotencyKey = a.key;
  if (a.retryDelay !== undefined) input.retryDelaySeconds = a.retryDelay;
  if (a.maxExecution !== undefined) input.maxExecutionSeconds = a.maxExecution;
  if (a.payload !== undefined) input.payload = a.payload;
  return input;
}

/** An AbstractUpdate against the model's state. */
export function resolveUpdate(s: State, a: AbstractUpdate): UpdateIssueInput {
  const { notBeforeIn, ...input } = a;
  return notBeforeIn === undefined ? input : { ...input, notBefore: s.clock + notBeforeIn };
}

/** The board's time updates (in clock units): a delay set and cleared, a backoff base, an execution limit set and lifted. */
export const TIME_UPDATES: readonly AbstractUpdate[] = [
  { notBeforeIn: 1 },
  { notBeforeIn: 0 },
  { notBefore: null },
  { retryDelaySeconds: 1 },
  { retryDelaySeconds: null },
  { maxExecutionSeconds: 1 },
  { maxExecutionSeconds: null },
];

/** What Abstract's arbitraries are built from (conformance.ts). */
export interface BaseArbs {
  agentArb: fc.Arbitrary<string>;
  runArb: fc.Arbitrary<RunRef>;
  issueArb: fc.Arbitrary<number>;
}

const undef = <T>(...xs: T[]) => fc.constantFrom<T | undefined>(undefined, undefined, undefined, ...xs);

function createArb(base: BaseArbs, withParent: boolean): fc.Arbitrary<AbstractCreate> {
  return fc
    .record({
      assignee: fc.constantFrom<string | null | undefined>(undefined, undefined, null, "A", "B"),
      blockedBy: fc.oneof({ weight: 3, arbitrary: fc.constant<number[]>([]) }, { weight: 2, arbitrary: fc.uniqueArray(base.issueArb, { maxLength: 2 }) }),
      parent: withParent ? undef(0, 1, 2) : fc.constant(undefined),
      notBeforeIn: undef(0, 1, 2),
      key: undef("job-1", "job-2"),
      retryDelay: undef(1, 16),
      maxExecution: undef(1, 2),
      payload: undef<unknown>({ part: 1 }, "text"),
    })
    .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as AbstractCreate);
}

/** The work graph's verbs as weighted arbitraries of one step. */
export function graphArbs(base: BaseArbs): fc.WeightedArbitrary<Abstract>[] {
  const inputs = (withParent: boolean) => fc.array(createArb(base, withParent), { minLength: 1, maxLength: 2 });
  const by = fc.oneof({ weight: 2, arbitrary: fc.constant<"board">("board") }, { weight: 1, arbitrary: fc.record({ agent: base.agentArb, run: base.runArb }) });
  return [
    { weight: 2, arbitrary: inputs(true).map((i): Abstract => ({ verb: "createIssues", inputs: i })) },
    {
      weight: 2,
      arbitrary: fc
        .record({ agent: base.agentArb, run: base.runArb, parent: base.issueArb, inputs: inputs(false), parentWaits: fc.boolean() })
        .map((r): Abstract => ({ verb: "createSubIssues", ...r })),
    },
    { weight: 3, arbitrary: fc.record({ issue: base.issueArb, blocker: base.issueArb, by }).map((r): Abstract => ({ verb: "addDependency", ...r })) },
    { weight: 1, arbitrary: fc.record({ issue: base.issueArb, blocker: base.issueArb, by }).map((r): Abstract => ({ verb: "removeDependency", ...r })) },
  ];
}

/** retryAfterSeconds and result for a release: mostly none. */
export const retryAfterArb = fc.constantFrom<number | undefined>(undefined, undefined, undefined, undefined, 0, 1, 2);
export const resultArb = fc.constantFrom<unknown>(undefined, undefined, undefined, { pr: 7 });

/**
 * The work-graph fields of a small company's issues: now and then a blocker
 * among the issues before it, a delay, a backoff base (16 units reaches the
 * day's cap on the second attempt), an execution limit, an idempotency key.
 */
export const issueGraphArb = fc.record({
  blockedBy: fc.constantFrom<number[]>([], [], [], [0], [1], [0, 1]),
  notBefore: fc.constantFrom<number | undefined>(undefined, undefined, undefined, undefined, 1, 2),
  retryDelaySeconds: fc.constantFrom<number | undefined>(undefined, undefined, 1, 16),
  maxExecutionSeconds: fc.constantFrom<number | undefined>(undefined, undefined, undefined, 1, 2),
  idempotencyKey: fc.constantFrom<string | undefined>(undefined, undefined, undefined, "job-1"),
});

/** An IssueInput with the graph fields of issue `n` (blockers only among earlier issues; one issue per key). */
export function withGraph(input: IssueInput, n: number, g: GraphFields, keys: Set<string>): IssueInput {
  const blockedBy = g.blockedBy.filter((b) => b < n).map((b) => `i${b + 1}`);
  const key = g.idempotencyKey !== undefined && !keys.has(g.idempotencyKey) ? g.idempotencyKey : undefined;
  if (key) keys.add(key);
  return {
    ...input,
    ...(blockedBy.length ? { blockedBy } : {}),
    ...(g.notBefore !== undefined ? { notBefore: g.notBefore } : {}),
    ...(g.retryDelaySeconds !== undefined ? { retryDelaySeconds: g.retryDelaySeconds } : {}),
    ...(g.maxExecutionSeconds !== undefined ? { maxExecutionSeconds: g.maxExecutionSeconds } : {}),
    ...(key ? { idempotencyKey: key } : {}),
  };
}
export type GraphFields = typeof issueGraphArb extends fc.Arbitrary<infer T> ? T : never;

/**
 * The work graph's races (part 4's shapes for issue 29), each a few steps
 * ending in a pair, gated or not:
 *  - two opposite edges at once (exactly one is added), or the closing edge
 *    of a triangle beside another;
 *  - a claim beside the DONE release of the blocker of the claimer's issue;
 *  - two creates with one idempotency key (one issue);
 *  - a split (createSubIssues with parentWaits) beside its parent's release;
 *  - an execution past maxExecutionSeconds: the sweep beside the holder's
 *    own release; a failure's backoff beside another agent's claim;
 *  - and, alone, a split that comes back (the parent requeued waits on its
 *    sub-issue, which is done, and the parent is claimed again), and a requeue
 *    with retryAfterSeconds that gives its attempt back.
 */
export function graphRaceArb(base: BaseArbs): fc.Arbitrary<Item[]> {
  const { agentArb } = base;
  const own = (agent: string) => ({ agent, run: { back: 0 } as RunRef });
  const cycle = fc
    .record({ a: fc.nat(3), b: fc.nat(3), c: fc.nat(3), triangle: fc.boolean(), gate: fc.boolean(), byAgent: fc.boolean(), agent: agentArb })
    .map(({ a, b, c, triangle, gate, byAgent, agent }): Item[] => {
      // an agent edits an issue its run holds: it claims it first (assigned elsewhere, it answers NotLockOwner: also a race)
      const by = byAgent ? own(agent) : ("board" as const);
      const edge = (issue: number, blocker: number): Abstract => ({ verb: "addDependency", issue, blocker, by });
      const prefix: Item[] = byAgent
        ? [
            { verb: "startRun", agent },
            { verb: "claimById", ...own(agent), issue: a },
            { verb: "claimById", ...own(agent), issue: b },
          ]
        : [];
      return triangle ? [...prefix, edge(a, b), { pair: [edge(b, c), edge(c, a)], gate }] : [...prefix, { pair: [edge(a, b), edge(b, a)], gate }];
    });
  const claimBesideDone = fc
    .record({ holder: agentArb, claimer: agentArb, blocker: fc.nat(3), dependent: fc.nat(3), batch: fc.boolean(), gate: fc.boolean(), swap: fc.boolean() })
    .map(({ holder, claimer, blocker, dependent, batch, gate, swap }): Item[] => {
      const release: Abstract = { verb: "releaseIssue", ...own(holder), issue: blocker, outcome: "DONE" };
      const claim: Abstract = batch
        ? { verb: "claimIssues", ...own(claimer), limit: 2, includeUnassigned: true, acquireExecution: false }
        : { verb: "claimNext", ...own(claimer), includeUnassigned: true };
      return [
        { verb: "addDependency", issue: dependent, blocker, by: "board" },
        { verb: "startRun", agent: holder },
        { verb: "claimById", ...own(holder), issue: blocker },
        { verb: "acquireExecution", ...own(holder), issue: blocker },
        ...(claimer === holder ? [] : [{ verb: "startRun", agent: claimer } as const]),
        { pair: swap ? [claim, release] : [release, claim], gate },
      ];
    });
  const keyRace = fc.record({ key: fc.constantFrom("job-1", "job-2"), blocker: fc.nat(3), gate: fc.boolean() }).map(({ key, blocker, gate }): Item[] => {
    const create = (payload: unknown): Abstract => ({ verb: "createIssues", inputs: [{ key, payload, blockedBy: [blocker] }] });
    return [{ pair: [create({ from: 0 }), create({ from: 1 })], gate }];
  });
  const splitBesideRelease = fc
    .record({ agent: agentArb, parent: fc.nat(3), outcome: fc.constantFrom("REQUEUE", "FAILED", "BLOCKED"), gate: fc.boolean(), swap: fc.boolean() })
    .map(({ agent, parent, outcome, gate, swap }): Item[] => {
      const split: Abstract = { verb: "createSubIssues", ...own(agent), parent, inputs: [{}], parentWaits: true };
      const release: Abstract = { verb: "releaseIssue", ...own(agent), issue: parent, outcome: outcome as "REQUEUE" | "FAILED" | "BLOCKED" };
      return [
        { verb: "startRun", agent },
        { verb: "claimById", ...own(agent), issue: parent },
        { pair: swap ? [release, split] : [split, release], gate },
      ];
    });
  // the parent is issue 0 or 1: a company has at least two, and a new issue's id sorts after them, so the index still names it
  const splitComesBack = fc
    .record({ agent: agentArb, parent: fc.nat(1), retryAfter: fc.constantFrom<number | undefined>(undefined, 0) })
    .map(({ agent, parent, retryAfter }): Item[] => [
      { verb: "startRun", agent },
      { verb: "claimById", ...own(agent), issue: parent },
      { verb: "createSubIssues", ...own(agent), parent, inputs: [{ assignee: agent }], parentWaits: true },
      { verb: "releaseIssue", ...own(agent), issue: parent, outcome: "REQUEUE", ...(retryAfter === undefined ? {} : { retryAfter }) },
      // the agent's ready work, the sub-issue among it, done; the parent waited, and is ready now
      { verb: "claimIssues", ...own(agent), limit: 4, includeUnassigned: false, acquireExecution: true },
      { verb: "releaseIssues", ...own(agent), issues: [0, 1, 2, 3, 4, 5], outcome: "DONE" },
      { verb: "claimNext", ...own(agent), includeUnassigned: true },
    ]);
  // time on one issue (0 or 1) of an agent's: an execution past its limit beside its own release, the attempt given back by a
  // requeue with retryAfterSeconds, a failure's backoff beside another agent's claim; the clock then passes the delay
  const time = fc
    .record({ agent: agentArb, issue: fc.nat(1), which: fc.constantFrom("overdue", "givenBack", "backoff"), gate: fc.boolean(), swap: fc.boolean() })
    .map(({ agent, issue, which, gate, swap }): Item[] => {
      const other = agent === "A" ? "B" : "A";
      const start: Item[] = [
        { verb: "startRun", agent },
        { verb: "claimById", ...own(agent), issue },
        { verb: "acquireExecution", ...own(agent), issue },
      ];
      const order = (x: Abstract, y: Abstract): Item => ({ pair: swap ? [y, x] : [x, y], gate });
      if (which === "overdue") {
        return [
          { verb: "updateIssue", issue, input: { maxExecutionSeconds: 1 } },
          ...start,
          { verb: "tick", by: 1 },
          order({ verb: "sweep" }, { verb: "releaseIssue", ...own(agent), issue, outcome: "DONE" }),
        ];
      }
      if (which === "givenBack") {
        return [
          ...start,
          { verb: "releaseIssue", ...own(agent), issue, outcome: "REQUEUE", retryAfter: 1 },
          { verb: "claimById", ...own(agent), issue },
          { verb: "tick", by: 1 },
          { verb: "claimNext", ...own(agent), includeUnassigned: true },
        ];
      }
      return [
        { verb: "updateIssue", issue, input: { retryDelaySeconds: 1 } },
        ...start,
        { verb: "startRun", agent: other },
        order({ verb: "releaseIssue", ...own(agent), issue, outcome: "FAILED" }, { verb: "claimNext", ...own(other), includeUnassigned: true }),
        { verb: "tick", by: 1 },
        { verb: "claimNext", ...own(other), includeUnassigned: true },
      ];
    });
  return fc.oneof(
    { weight: 2, arbitrary: cycle },
    { weight: 2, arbitrary: claimBesideDone },
    { weight: 1, arbitrary: keyRace },
    { weight: 1, arbitrary: splitBesideRelease },
    { weight: 1, arbitrary: splitComesBack },
    { weight: 2, arbitrary: time },
  );
}
