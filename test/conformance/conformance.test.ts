// Conformance of the real lock verbs to the executable model (issue 17, parts
// 3 and 4; the work graph, issue 29; the fused calls, issue 31): test/conformance/conformance.ts. CI runs a fixed seed of 1,000
// generated sequences; `npm run conformance -- --runs N [--seed S]` runs longer.
import { expect, it } from "vitest";
import { useRealWorld } from "../helpers/realWorld.js";
import { racePairArb, replay, runConformance } from "./conformance.js";
import type { Scenario } from "./conformance.js";
import fc from "fast-check";

const real = useRealWorld();

let reached: Awaited<ReturnType<typeof runConformance>>["reached"] | null = null;

it("1,000 generated sequences (fixed seed): every answer and the state after every step agree with the model", async () => {
  const report = await runConformance(real.world, { runs: 1000, seed: 20261201, maxCommands: 12 });
  reached = report.reached;
  expect(report.replayable, report.replayable ?? "").toBeNull();
  expect(report.result.numRuns).toBe(1000);
}, 180_000);

// Part 4: the sequences behind the bugs found so far.
const deadHolderTimedOutConcurrently: Scenario = {
  initial: {
    agents: ["A", "B"],
    issues: [
      { id: "i1", assigneeAgentId: null },
      { id: "i2", assigneeAgentId: "A" },
    ],
    leaseLength: 2,
  },
  steps: [
    { one: { verb: "startRun", agentId: "A" } },
    { one: { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" } },
    { one: { verb: "tick", by: 2 } },
    { one: { verb: "startRun", agentId: "B" } },
    // A's own late heartbeat writes r1 TIMED_OUT while B's adoption waits on r1's row (the gate holds it until both are in flight)
    {
      pair: [
        { verb: "claimIssue", agentId: "B", runId: "r2", issueId: "i1", expectedStatuses: ["CLAIMED", "IN_PROGRESS"] },
        { verb: "heartbeatRun", agentId: "A", runId: "r1" },
      ],
      gate: true,
    },
  ],
};
const batchByJustFinishedRun: Scenario = {
  initial: {
    agents: ["A", "B"],
    issues: [
      { id: "i1", assigneeAgentId: "A" },
      { id: "i2", assigneeAgentId: "A" },
    ],
    leaseLength: 2,
  },
  steps: [
    { one: { verb: "startRun", agentId: "A" } },
    {
      pair: [
        { verb: "claimIssues", agentId: "A", runId: "r1", limit: 2 },
        { verb: "finishRun", agentId: "A", runId: "r1", status: "SUCCEEDED" },
      ],
      gate: true,
    },
    { one: { verb: "finishRun", agentId: "A", runId: "r1", status: "SUCCEEDED" } },
    { one: { verb: "claimIssues", agentId: "A", runId: "r1", limit: 2, acquireExecution: true } },
  ],
};

// Issue 29's races, written out: two opposite edges at once (gated: both in flight before either commits), and two
// creates with one idempotency key on the two instances.
const oppositeEdges: Scenario = {
  initial: { agents: ["A", "B"], issues: [{ id: "i1" }, { id: "i2" }, { id: "i3", blockedBy: ["i1"] }], leaseLength: 2 },
  steps: [
    {
      pair: [
        { verb: "addDependency", issueId: "i1", blockedById: "i2" },
        { verb: "addDependency", issueId: "i2", blockedById: "i1" },
      ],
      gate: true,
    },
    {
      pair: [
        { verb: "addDependency", issueId: "i2", blockedById: "i3" },
        { verb: "addDependency", issueId: "i3", blockedById: "i2" },
      ],
      gate: false,
    },
  ],
};
const oneKeyTwice: Scenario = {
  initial: { agents: ["A", "B"], issues: [{ id: "i1" }, { id: "i2" }], leaseLength: 2 },
  steps: [
    {
      pair: [
        { verb: "createIssues", inputs: [{ idempotencyKey: "job-1", blockedBy: ["i1"], payload: { from: 0 } }] },
        { verb: "createIssues", inputs: [{ idempotencyKey: "job-1", payload: { from: 1 } }, { idempotencyKey: "job-1" }] },
      ],
      gate: false,
    },
  ],
};

it("the work graph's races (issue 29): the CI run came upon each, and opposite edges and one key twice, written out, agree with the model", async () => {
  expect(reached, "the CI run").not.toBeNull();
  // two edges that together close a cycle, a claim beside its blocker's DONE, two creates with one new key
  expect(reached!.cycleRace).toBeGreaterThan(0);
  expect(reached!.claimBesideDone).toBeGreaterThan(0);
  expect(reached!.keyRace).toBeGreaterThan(0);
  // IssueWaiting, a delayed issue claimed once due, a parent back after its sub-issues, an execution past its limit
  // taken from a live run, a failure's backoff, an attempt given back by a requeue with retryAfterSeconds
  for (const k of ["claimOfWaiting", "claimOnceDue", "parentBack", "executionOverdue", "backoff", "attemptGivenBack"] as const) {
    expect(reached![k], k).toBeGreaterThan(0);
  }
  for (let round = 0; round < 5; round++) {
    const edges = await replay(real.world, oppositeEdges);
    // one of each pair was refused: i1-i2 one way, and i2 waits on i3 or i3 on i2 (i3 already waited on i1 only)
    expect(edges.state.issues.flatMap((i) => i.blockedBy.map((b) => `${i.id}<${b}`))).toHaveLength(3);
    const keys = await replay(real.world, oneKeyTwice);
    expect(keys.state.issues.filter((i) => i.idempotencyKey === "job-1")).toHaveLength(1);
  }
}, 60_000);

// Issue 31: A's release with next (REQUEUE) beside B's claim-next with startExecution, both in the pool, gated: whichever
// order (B may take the requeued issue between A's release and A's claim), each run ends with one issue, IN_PROGRESS.
const releaseNextBesideClaim: Scenario = {
  initial: { agents: ["A", "B"], issues: [{ id: "i1" }, { id: "i2" }], leaseLength: 2 },
  steps: [
    { one: { verb: "startRun", agentId: "A" } },
    { one: { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1", startExecution: true } },
    { one: { verb: "startRun", agentId: "B" } },
    {
      pair: [
        { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "REQUEUE", next: { includeUnassigned: true } },
        { verb: "claimIssue", agentId: "B", runId: "r2", includeUnassigned: true, startExecution: true },
      ],
      gate: true,
    },
  ],
};

it("the fused calls (issue 31): the CI run came upon them alone, racing, and split by the other command between their statements; a release with next beside a claim, written out, agrees with the model", async () => {
  expect(reached, "the CI run").not.toBeNull();
  for (const k of ["fusedAlone", "fusedRacing", "fusedRacingGated", "fusedSplit"] as const) expect(reached![k], k).toBeGreaterThan(0);
  const shapes = fc.sample(racePairArb, { numRuns: 200, seed: 1 }).map((items) => JSON.stringify(items.at(-1)));
  expect(shapes.some((s) => s.includes('"next"') && s.includes('"claimNext"'))).toBe(true);
  expect(shapes.some((s) => s.includes('"startExecution":true') && s.includes('"forceReleaseIssue"'))).toBe(true);
  for (let round = 0; round < 5; round++) {
    const box = await replay(real.world, releaseNextBesideClaim);
    const held = box.state.issues.map((i) => `${i.checkoutRunId}:${i.status}`).sort();
    expect(held).toEqual(["r1:IN_PROGRESS", "r2:IN_PROGRESS"]);
  }
}, 60_000);

it("reaches the historical bugs' sequences: an adoption while the dead holder is timed out concurrently, a batch claim by a run that just finished (and disableAgent racing its agent's runs)", async () => {
  // the CI run above came upon each situation, gated too
  expect(reached, "the CI run").not.toBeNull();
  expect(reached!.adoptWhileTimedOut).toBeGreaterThan(0);
  expect(reached!.adoptWhileTimedOutGated).toBeGreaterThan(0);
  expect(reached!.batchRacingFinish).toBeGreaterThan(0);
  expect(reached!.batchByFinishedRun).toBeGreaterThan(0);
  // and disableAgent raced what its agent's runs do, and what others do to the issues they hold
  expect(reached!.disableRacing).toBeGreaterThan(0);
  expect(reached!.disableRacingGated).toBeGreaterThan(0);
  // and pool claims whose next issue's key comes after 9 or more keys holding only assigned work (issue 26)
  expect(reached!.poolPastAssignedKeys).toBeGreaterThan(0);
  // the race arbitrary makes exactly these shapes (the adoption beside its holder's heartbeat, the batch beside its run's finish)
  const shapes = fc.sample(racePairArb, { numRuns: 200, seed: 1 }).map((items) => JSON.stringify(items.at(-1)));
  expect(shapes.some((s) => s.includes('"heartbeatRun"') && s.includes('"claimById"'))).toBe(true);
  expect(shapes.some((s) => s.includes('"finishRun"') && s.includes('"claimIssues"'))).toBe(true);
  expect(shapes.some((s) => s.includes('"disableAgent"'))).toBe(true);
  // and written out, they run through the same adapter, model and database agreeing (B adopts; the batch gets nothing or is released)
  for (let round = 0; round < 5; round++) {
    const adopted = await replay(real.world, deadHolderTimedOutConcurrently);
    expect(adopted.state.issues.find((i) => i.id === "i1")).toMatchObject({ status: "CLAIMED", checkoutRunId: "r2" });
    const batch = await replay(real.world, batchByJustFinishedRun);
    expect(batch.state.issues.every((i) => i.status === "OPEN" && i.checkoutRunId === null)).toBe(true);
  }
}, 60_000);
