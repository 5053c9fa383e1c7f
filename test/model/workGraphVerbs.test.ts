// The work graph's verbs in the model (issue 29), on small examples: readiness
// and IssueWaiting's place among claimIssue's checks, cycles and their path,
// sub-issues with parentWaits, idempotent creation, backoff, retryAfterSeconds
// giving the attempt back, executions past maxExecutionSeconds, results.
// workGraphExplore.test.ts checks the invariants in every reachable state;
// these pin the answers themselves.
import { describe, expect, it } from "vitest";
import type { Answer, Command, State, Step } from "../../src/model/index.js";
import { apply, initialState, lockAudit } from "../../src/model/index.js";

function play(state: State, commands: Command[]): Step<Answer>[] {
  const steps: Step<Answer>[] = [];
  for (const c of commands) {
    const step = apply(state, c);
    steps.push(step);
    state = step.state;
  }
  return steps;
}
const last = (steps: Step<Answer>[]) => steps[steps.length - 1]!;
const issue = (s: State, id: string) => s.issues.find((i) => i.id === id)!;
const claimedIds = (steps: Step<Answer>[]) =>
  steps.map((x) =>
    x.answer.__typename === "IssueClaimed"
      ? x.answer.issue.id
      : x.answer.__typename === "IssuesClaimed"
        ? x.answer.issues.map((i) => i.id).join("+")
        : x.answer.__typename,
  );

describe("readiness", () => {
  it("claim-next takes an issue only once every blocker is DONE; a batch never takes an issue with its blocker; a CANCELLED blocker keeps it waiting until the edge goes", () => {
    const s = initialState({
      agents: ["A"],
      issues: [
        { id: "i1", assigneeAgentId: "A" },
        { id: "i2", assigneeAgentId: "A", blockedBy: ["i1"] },
        { id: "i3", assigneeAgentId: "A", blockedBy: ["i2"] },
      ],
    });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssues", agentId: "A", runId: "r1", limit: 3, acquireExecution: true },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "DONE" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "updateIssue", issueId: "i2", input: { status: "CANCELLED" } },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "removeDependency", issueId: "i3", blockedById: "i2" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
    ]);
    expect(claimedIds(steps.slice(1))).toEqual([
      "i1",
      "NoIssueAvailable",
      "IssueReleased",
      "i2",
      "IssueUpdated",
      "NoIssueAvailable",
      "DependencyRemoved",
      "i3",
    ]);
    expect(lockAudit(steps[5]!.state).waitingOnCancelled).toBe(1);
  });

  it("a claim by id of a waiting OPEN issue answers IssueWaiting after alreadyHeld and before ConcurrencyLimitReached and UnexpectedStatus, changing nothing", () => {
    const s = initialState({
      agents: ["A"],
      issues: [
        { id: "i1", concurrencyKey: "k" },
        { id: "i2", concurrencyKey: "k", blockedBy: ["i1"], notBefore: 5 },
      ],
      limits: { k: 1 },
    });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
      // the key is full and [CLAIMED] does not list OPEN: IssueWaiting all the same
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i2", expectedStatuses: ["CLAIMED"] },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
    ]);
    expect(steps[2]!.answer).toEqual({ __typename: "IssueWaiting", issueId: "i2", waitingOn: ["i1"], notBefore: 5 });
    expect(steps[2]!.state).toBe(steps[1]!.state);
    expect(last(steps).answer).toMatchObject({ __typename: "IssueClaimed", alreadyHeld: true });
  });

  it("a delayed issue is claimable from its notBefore on the clock, by id and by claim-next", () => {
    const s = initialState({ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A", notBefore: 2 }] });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "tick" },
      { verb: "heartbeatRun", agentId: "A", runId: "r1" },
      { verb: "tick" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
    ]);
    expect(steps[1]!.answer).toEqual({ __typename: "NoIssueAvailable" });
    expect(steps[2]!.answer).toEqual({ __typename: "IssueWaiting", issueId: "i1", waitingOn: [], notBefore: 2 });
    expect(last(steps).answer).toMatchObject({ __typename: "IssueClaimed", issue: { id: "i1" } });
  });

  it("adopting a dead holder's issue ignores a dependency added while it was held", () => {
    const s = initialState({ agents: ["A", "B"], issues: [{ id: "i1" }, { id: "i2" }], leaseLength: 1 });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "addDependency", issueId: "i1", blockedById: "i2", agentId: "A", runId: "r1" },
      { verb: "tick" },
      { verb: "startRun", agentId: "B" },
      { verb: "claimIssue", agentId: "B", runId: "r2", issueId: "i1", expectedStatuses: ["CLAIMED"] },
    ]);
    expect(steps[2]!.answer).toMatchObject({ __typename: "DependencyAdded", issue: { id: "i1", status: "CLAIMED", blockedBy: ["i2"] } });
    expect(last(steps).answer).toMatchObject({ __typename: "IssueClaimed", adopted: true });
  });
});

describe("dependencies", () => {
  it("refuses an edge that closes a cycle with its path from blockedById along blockedBy edges to issueId; a self-edge is a cycle of one; an edge already there is answered as added", () => {
    const s = initialState({
      agents: ["A"],
      issues: [{ id: "a" }, { id: "b", blockedBy: ["a"] }, { id: "c", blockedBy: ["b"] }],
    });
    expect(apply(s, { verb: "addDependency", issueId: "a", blockedById: "c" }).answer).toEqual({ __typename: "DependencyCycle", path: ["c", "b", "a"] });
    expect(apply(s, { verb: "addDependency", issueId: "b", blockedById: "b" }).answer).toEqual({ __typename: "DependencyCycle", path: ["b"] });
    const again = apply(s, { verb: "addDependency", issueId: "c", blockedById: "b" });
    expect(again.answer).toMatchObject({ __typename: "DependencyAdded", issue: { id: "c", blockedBy: ["b"] } });
    expect(again.state).toBe(s);
    expect(apply(s, { verb: "addDependency", issueId: "c", blockedById: "a" }).answer).toMatchObject({
      __typename: "DependencyAdded",
      issue: { blockedBy: ["a", "b"] },
    });
  });

  it("lets the board, or an agent whose live run holds the issue, change its edges; anyone else is NotLockOwner; a missing issue or blocker IssueNotFound", () => {
    const s = initialState({ agents: ["A", "B"], issues: [{ id: "i1" }, { id: "i2" }] });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "startRun", agentId: "B" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "addDependency", issueId: "i1", blockedById: "i2", agentId: "B", runId: "r2" },
      { verb: "addDependency", issueId: "i1", blockedById: "i2", agentId: "A", runId: "r1" },
      { verb: "removeDependency", issueId: "i1", blockedById: "i2", agentId: "B", runId: "r2" },
      { verb: "removeDependency", issueId: "i1", blockedById: "i-unknown" },
      { verb: "removeDependency", issueId: "i1", blockedById: "i2" },
      { verb: "removeDependency", issueId: "i1", blockedById: "i2" },
    ]);
    expect(steps.slice(3).map((x) => x.answer.__typename)).toEqual([
      "NotLockOwner",
      "DependencyAdded",
      "NotLockOwner",
      "IssueNotFound",
      "DependencyRemoved",
      "DependencyRemoved",
    ]);
    expect(issue(last(steps).state, "i1")).toMatchObject({ status: "CLAIMED", checkoutRunId: "r1", blockedBy: [] });
  });
});

describe("sub-issues", () => {
  it("an agent splits its issue with parentWaits, requeues it, and gets it back (still assigned) once every sub-issue is DONE", () => {
    const s = initialState({ agents: ["A", "B"], issues: [{ id: "i1", assigneeAgentId: "A" }] });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      {
        verb: "createSubIssues",
        agentId: "A",
        runId: "r1",
        parentId: "i1",
        inputs: [{ assigneeAgentId: "B", payload: { part: 1 } }, { assigneeAgentId: "A", idempotencyKey: "part-2" }, { idempotencyKey: "part-2" }],
        parentWaits: true,
      },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "REQUEUE" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "acquireExecution", agentId: "A", runId: "r1", issueId: "i3" },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i3", outcome: "DONE", result: { pr: 7 } },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "startRun", agentId: "B" },
      { verb: "claimIssues", agentId: "B", runId: "r2", limit: 1, acquireExecution: true },
      { verb: "releaseIssue", agentId: "B", runId: "r2", issueId: "i2", outcome: "DONE" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
    ]);
    const split = steps[2]!.answer;
    expect(split).toMatchObject({ __typename: "SubIssuesCreated", parent: { id: "i1", status: "CLAIMED", blockedBy: ["i2", "i3"] } });
    expect(split.__typename === "SubIssuesCreated" && split.issues.map((i) => [i.id, i.parentId, i.assigneeAgentId])).toEqual([
      ["i2", "i1", "B"],
      ["i3", "i1", "A"],
      ["i3", "i1", "A"],
    ]);
    expect(claimedIds(steps.slice(4))).toEqual(["i3", "ExecutionAcquired", "IssueReleased", "NoIssueAvailable", "HeartbeatRun", "i2", "IssueReleased", "i1"]);
    expect(issue(last(steps).state, "i3").result).toEqual({ pr: 7 });
  });

  it("refuses a sub-issue blocked by its parent, however indirectly, while parentWaits; a run that does not hold the parent is NotLockOwner", () => {
    const s = initialState({ agents: ["A"], issues: [{ id: "p" }, { id: "x", blockedBy: ["p"] }] });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "createSubIssues", agentId: "A", runId: "r1", parentId: "p", inputs: [{}] },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "p" },
      { verb: "createSubIssues", agentId: "A", runId: "r1", parentId: "p", inputs: [{ blockedBy: ["p"] }], parentWaits: true },
      { verb: "createSubIssues", agentId: "A", runId: "r1", parentId: "p", inputs: [{ blockedBy: ["x"] }], parentWaits: true },
      { verb: "createSubIssues", agentId: "A", runId: "r1", parentId: "p", inputs: [{ blockedBy: ["x"] }], parentWaits: false },
    ]);
    expect(steps[1]!.answer).toEqual({ __typename: "NotLockOwner", issueId: "p", ownerRunId: null });
    expect(steps[3]!.answer).toMatchObject({ __typename: "Error", code: "BAD_USER_INPUT" });
    expect(steps[4]!.answer).toMatchObject({ __typename: "Error", code: "BAD_USER_INPUT" });
    expect(steps[4]!.state).toBe(steps[2]!.state);
    expect(last(steps).answer).toMatchObject({ __typename: "SubIssuesCreated", issues: [{ id: "i3", parentId: "p", blockedBy: ["x"] }] });
  });
});

describe("idempotent creation", () => {
  it("a create whose key exists answers the existing issue whatever the other fields say; a missing blocker is NOT_FOUND and creates nothing", () => {
    const s = initialState({ agents: ["A"], issues: [{ id: "i1" }] });
    const steps = play(s, [
      {
        verb: "createIssues",
        inputs: [
          { idempotencyKey: "job-1", priority: "HIGH" },
          { idempotencyKey: "job-1", priority: "LOW" },
        ],
      },
      { verb: "createIssues", inputs: [{ idempotencyKey: "job-1", blockedBy: ["i1"], retryDelaySeconds: 5 }] },
      { verb: "createIssues", inputs: [{ blockedBy: ["i1", "i-unknown"] }] },
      { verb: "createIssues", inputs: [{ idempotencyKey: "" }] },
    ]);
    const made = (x: Step<Answer>) => (x.answer.__typename === "IssuesCreated" ? x.answer.issues.map((i) => [i.id, i.priority]) : x.answer.__typename);
    expect(made(steps[0]!)).toEqual([
      ["i2", "HIGH"],
      ["i2", "HIGH"],
    ]);
    expect(made(steps[1]!)).toEqual([["i2", "HIGH"]]);
    expect(steps[1]!.state).toBe(steps[0]!.state);
    expect(steps[2]!.answer).toMatchObject({ __typename: "Error", code: "NOT_FOUND" });
    expect(last(steps).answer).toMatchObject({ __typename: "Error", code: "BAD_USER_INPUT" });
    expect(last(steps).state.issues.map((i) => i.id)).toEqual(["i1", "i2"]);
  });
});

describe("idempotent creation, whatever the other fields say", () => {
  it("an input whose key the company has is not held to what it names (blockers, parent, assignee, the cycle parentWaits would close); its own fields must still be well formed", () => {
    const s = initialState({
      agents: ["A"],
      issues: [
        { id: "p", assigneeAgentId: "A" },
        { id: "x", blockedBy: ["p"], idempotencyKey: "job-1" },
      ],
    });
    const steps = play(s, [
      { verb: "createIssues", inputs: [{ idempotencyKey: "job-1", blockedBy: ["i-unknown"], assigneeAgentId: "Z" }] },
      { verb: "createIssues", inputs: [{ idempotencyKey: "job-1", retryDelaySeconds: -1 }] },
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "p" },
      // x waits on p: a new sub-issue blocked by x would close a cycle, but job-1 is x itself, answered
      { verb: "createSubIssues", agentId: "A", runId: "r1", parentId: "p", inputs: [{ idempotencyKey: "job-1", blockedBy: ["x"] }], parentWaits: true },
      { verb: "createSubIssues", agentId: "A", runId: "r1", parentId: "p", inputs: [{ blockedBy: ["x"] }], parentWaits: true },
    ]);
    expect(steps[0]!.answer).toMatchObject({ __typename: "IssuesCreated", issues: [{ id: "x" }] });
    expect(steps[0]!.state).toBe(s);
    expect(steps[1]!.answer).toMatchObject({ __typename: "Error", code: "BAD_USER_INPUT" });
    expect(steps[4]!.answer).toMatchObject({ __typename: "SubIssuesCreated", parent: { blockedBy: [] }, issues: [{ id: "x" }] });
    expect(last(steps).answer).toMatchObject({ __typename: "Error", code: "BAD_USER_INPUT" });
  });
});

describe("delays, backoff and execution limits", () => {
  const company = (extra: { retryDelaySeconds?: number; maxExecutionSeconds?: number; maxAttempts?: number }) =>
    initialState({ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A", ...extra }], leaseLength: 10, tickSeconds: 3600 });

  it("a failed attempt that reopens the issue waits retryDelaySeconds × 2^(attempts − 1), capped at a day; one that escalates keeps its notBefore", () => {
    const attempt = (outcome: "FAILED"): Command[] => [
      { verb: "claimIssues", agentId: "A", runId: "r1", limit: 1, acquireExecution: true },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome },
    ];
    const steps = play(company({ retryDelaySeconds: 7, maxAttempts: 4 }), [
      { verb: "startRun", agentId: "A" },
      ...attempt("FAILED"),
      { verb: "tick", by: 7 },
      { verb: "heartbeatRun", agentId: "A", runId: "r1" },
      ...attempt("FAILED"),
      { verb: "tick", by: 14 },
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssues", agentId: "A", runId: "r2", limit: 1, acquireExecution: true },
      { verb: "releaseIssue", agentId: "A", runId: "r2", issueId: "i1", outcome: "FAILED" },
    ]);
    expect([steps[2], steps[6], last(steps)].map((x) => issue(x!.state, "i1").notBefore)).toEqual([7, 7 + 14, 21 + 24]);
    const escalated = play(last(steps).state, [
      { verb: "tick", by: 24 },
      { verb: "startRun", agentId: "A" },
      ...attempt("FAILED").map((c) => ({ ...c, runId: "r3" }) as Command),
    ]);
    expect(issue(last(escalated).state, "i1")).toMatchObject({ status: "ESCALATED", attemptCount: 4, notBefore: 45 });
  });

  it("REQUEUE with retryAfterSeconds from IN_PROGRESS gives the attempt back and waits; with DONE it is BAD_USER_INPUT", () => {
    const steps = play(company({ maxAttempts: 1 }), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssues", agentId: "A", runId: "r1", limit: 1, acquireExecution: true },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "DONE", retryAfterSeconds: 3 },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "REQUEUE", retryAfterSeconds: 3 },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "tick", by: 3 },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
    ]);
    expect(steps[2]!.answer).toMatchObject({ __typename: "Error", code: "BAD_USER_INPUT" });
    expect(steps[3]!.answer).toMatchObject({ __typename: "IssueReleased", issue: { status: "OPEN", attemptCount: 0, notBefore: 3 } });
    expect(steps[4]!.answer).toEqual({ __typename: "NoIssueAvailable" });
    expect(last(steps).answer).toMatchObject({ __typename: "IssueClaimed", issue: { lockEpoch: 2 } });
  });

  it("the sweep takes back an execution held maxExecutionSeconds, though its run is live: RECOVERED, EXECUTION_TIMED_OUT, attempt kept, backoff applied", () => {
    const steps = play(company({ maxExecutionSeconds: 2, retryDelaySeconds: 1 }), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssues", agentId: "A", runId: "r1", limit: 1, acquireExecution: true },
      { verb: "tick" },
      { verb: "sweep" },
      { verb: "tick" },
      { verb: "sweep" },
    ]);
    expect(steps[3]!.events).toEqual([]);
    expect(last(steps).answer).toEqual({ __typename: "SweepCounts", timedOutRuns: 0, recoveredIssues: 1, escalatedIssues: 0 });
    expect(last(steps).events).toEqual([expect.objectContaining({ kind: "RECOVERED", runId: "r1", agentId: "A", reason: "EXECUTION_TIMED_OUT" })]);
    expect(issue(last(steps).state, "i1")).toMatchObject({ status: "OPEN", attemptCount: 1, notBefore: 3, executionLockedAt: null });
    expect(last(steps).state.runs[0]).toMatchObject({ status: "RUNNING" });
  });
});
