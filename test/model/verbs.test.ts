// The model's verbs on the examples docs/lifecycle.md gives: claim order, the
// order of claimIssue's checks, decision 9's order, attempts, leases. The
// exhaustive exploration (explore.test.ts) checks the invariants; these pin
// the answers themselves.
import { describe, expect, it } from "vitest";
import type { Answer, Command, State, Step } from "../../src/model/index.js";
import { apply, initialState } from "../../src/model/index.js";

/** Runs commands one after another; returns every step. */
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

const company = () =>
  initialState({
    agents: ["A", "B"],
    issues: [
      { id: "i1", assigneeAgentId: "A", maxAttempts: 2 },
      { id: "i2", maxAttempts: 2 },
    ],
    leaseLength: 2,
  });

describe("claim order", () => {
  it("takes priority first, then the agent's own before unassigned, then the oldest", () => {
    const s = initialState({
      agents: ["A"],
      issues: [
        { id: "a", priority: "LOW", assigneeAgentId: "A" },
        { id: "b", priority: "HIGH" },
        { id: "c", priority: "HIGH", assigneeAgentId: "A" },
        { id: "d", priority: "HIGH", assigneeAgentId: "A" },
      ],
    });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      ...Array.from({ length: 5 }, (): Command => ({ verb: "claimIssue", agentId: "A", runId: "r1", includeUnassigned: true })),
    ]);
    expect(steps.slice(1).map((x) => (x.answer.__typename === "IssueClaimed" ? x.answer.issue.id : x.answer.__typename))).toEqual([
      "c",
      "d",
      "b",
      "a",
      "NoIssueAvailable",
    ]);
  });

  it("claimIssues takes what that many claims one after another would, never more of a key than its room", () => {
    const s = initialState({
      agents: ["A"],
      issues: [
        { id: "a", concurrencyKey: "k", assigneeAgentId: "A" },
        { id: "b", concurrencyKey: "k", assigneeAgentId: "A" },
        { id: "c", assigneeAgentId: "A" },
      ],
      limits: { k: 1 },
    });
    const [, claimed] = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssues", agentId: "A", runId: "r1", limit: 3, acquireExecution: true },
    ]);
    expect(claimed!.answer.__typename === "IssuesClaimed" && claimed!.answer.issues.map((i) => [i.id, i.status, i.attemptCount])).toEqual([
      ["a", "IN_PROGRESS", 1],
      ["c", "IN_PROGRESS", 1],
    ]);
    expect(claimed!.events.map((e) => `${e.issueId}:${e.kind}`)).toEqual(["a:CLAIMED", "a:EXECUTION_ACQUIRED", "c:CLAIMED", "c:EXECUTION_ACQUIRED"]);
  });
});

describe("claimIssue with an issue id, in the order of docs/lifecycle.md", () => {
  it("answers alreadyHeld whatever expectedStatuses says, with no event", () => {
    const steps = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1", expectedStatuses: [] },
    ]);
    expect(last(steps).answer).toMatchObject({ __typename: "IssueClaimed", alreadyHeld: true, adopted: false });
    expect(last(steps).events).toEqual([]);
    expect(issue(last(steps).state, "i1").lockEpoch).toBe(1);
  });

  it("checks the status before the holder: a live holder's issue with the default [OPEN] is UnexpectedStatus, with [CLAIMED] CheckoutConflict", () => {
    const base = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "startRun", agentId: "B" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i2" },
    ]);
    const s = last(base).state;
    expect(apply(s, { verb: "claimIssue", agentId: "B", runId: "r2", issueId: "i2" }).answer).toMatchObject({
      __typename: "UnexpectedStatus",
      status: "CLAIMED",
    });
    expect(apply(s, { verb: "claimIssue", agentId: "B", runId: "r2", issueId: "i2", expectedStatuses: ["CLAIMED"] }).answer).toMatchObject({
      __typename: "CheckoutConflict",
      holderRunIsLive: true,
      ownerAgentId: "A",
      ownerRunId: "r1",
    });
  });

  it("adopts a dead holder's CLAIMED issue at the cost of its attempt, times the holder out, and escalates when no attempt would be left", () => {
    const steps = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i2" },
      { verb: "tick", by: 2 },
      { verb: "startRun", agentId: "B" },
      { verb: "claimIssue", agentId: "B", runId: "r2", issueId: "i2", expectedStatuses: ["CLAIMED"] },
    ]);
    const adopted = last(steps);
    expect(adopted.answer).toMatchObject({ __typename: "IssueClaimed", adopted: true });
    expect(issue(adopted.state, "i2")).toMatchObject({ status: "CLAIMED", checkoutRunId: "r2", attemptCount: 1, lockEpoch: 2 });
    expect(adopted.state.runs[0]).toMatchObject({ id: "r1", status: "TIMED_OUT" });
    expect(adopted.events).toEqual([expect.objectContaining({ kind: "ADOPTED", runId: "r2", agentId: "B", reason: "HOLDER_DEAD" })]);

    const again = play(adopted.state, [
      { verb: "tick", by: 2 },
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r3", issueId: "i2", expectedStatuses: ["CLAIMED", "IN_PROGRESS"] },
    ]);
    expect(last(again).answer).toMatchObject({ __typename: "AttemptsExhausted", attemptCount: 2, maxAttempts: 2 });
    expect(issue(last(again).state, "i2")).toMatchObject({ status: "ESCALATED", checkoutRunId: null, lockEpoch: 2 });
    expect(last(again).events).toEqual([expect.objectContaining({ kind: "ESCALATED", runId: "r3", reason: "HOLDER_DEAD" })]);
  });

  it("refuses to adopt another agent's assigned issue from a dead holder: CheckoutConflict naming the assignee, not live", () => {
    const steps = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "tick", by: 2 },
      { verb: "startRun", agentId: "B" },
      { verb: "claimIssue", agentId: "B", runId: "r2", issueId: "i1", expectedStatuses: ["CLAIMED"] },
    ]);
    expect(last(steps).answer).toMatchObject({ __typename: "CheckoutConflict", holderRunIsLive: false, ownerAgentId: "A", ownerRunId: "r1" });
    expect(last(steps).events).toEqual([]);
  });

  it("answers ConcurrencyLimitReached for an issue of a full key before looking at its status", () => {
    const s = initialState({
      agents: ["A"],
      issues: [
        { id: "a", concurrencyKey: "k" },
        { id: "b", concurrencyKey: "k", status: "BACKLOG" },
      ],
      limits: { k: 1 },
    });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "a" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "b" },
    ]);
    expect(last(steps).answer).toEqual({ __typename: "ConcurrencyLimitReached", key: "k", maxActive: 1 });
  });
});

describe("acquireExecution, releases and runs", () => {
  it("checks in decision 9's order, and counts the attempt", () => {
    const steps = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "startRun", agentId: "B" },
      { verb: "acquireExecution", agentId: "A", runId: "r1", issueId: "i2" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i2" },
      { verb: "acquireExecution", agentId: "A", runId: "r1", issueId: "i2" },
      { verb: "acquireExecution", agentId: "A", runId: "r1", issueId: "i2" },
      { verb: "acquireExecution", agentId: "B", runId: "r2", issueId: "i2" },
    ]);
    expect(steps.slice(2).map((x) => x.answer.__typename)).toEqual([
      "NotCheckedOut",
      "IssueClaimed",
      "ExecutionAcquired",
      "ExecutionAcquired",
      "ExecutionConflict",
    ]);
    expect(steps[5]!.answer).toMatchObject({ alreadyHeld: true });
    expect(issue(last(steps).state, "i2")).toMatchObject({ status: "IN_PROGRESS", attemptCount: 1 });
  });

  it("refuses DONE from CLAIMED, releases FAILED on the last attempt to ESCALATED", () => {
    const steps = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "DONE" },
      { verb: "acquireExecution", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "FAILED" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "updateIssue", issueId: "i1", input: { maxAttempts: 1 } },
      { verb: "acquireExecution", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "FAILED", reason: " tests red " },
    ]);
    expect(steps[2]!.answer).toMatchObject({ __typename: "InvalidTransition", from: "CLAIMED", to: "DONE" });
    expect(steps[4]!.answer).toMatchObject({ __typename: "IssueReleased", issue: { status: "OPEN", attemptCount: 1 } });
    expect(steps[7]!.answer).toMatchObject({ __typename: "AttemptsExhausted", attemptCount: 1, maxAttempts: 1 });
    expect(issue(last(steps).state, "i1")).toMatchObject({ status: "ESCALATED", attemptCount: 1, checkoutRunId: null });
    expect(last(steps).events).toEqual([expect.objectContaining({ kind: "RELEASED", status: "ESCALATED", reason: "FAILED: tests red" })]);
  });

  it("heartbeats extend a live lease; an expired run is written TIMED_OUT by its heartbeat, refused by finishRun, and keeps its locks until a sweep", () => {
    const steps = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "tick" },
      { verb: "heartbeatRun", agentId: "A", runId: "r1" },
      { verb: "tick", by: 2 },
      { verb: "finishRun", agentId: "A", runId: "r1", status: "SUCCEEDED" },
      { verb: "heartbeatRun", agentId: "A", runId: "r1" },
      { verb: "sweep" },
    ]);
    expect(steps[3]!.answer).toMatchObject({ __typename: "RunUpdated", run: { leaseExpiresAt: 3 } });
    expect(steps[5]!.answer).toEqual({ __typename: "RunNotActive", runId: "r1", status: "TIMED_OUT" });
    expect(steps[5]!.state).toBe(steps[4]!.state);
    expect(steps[6]!.state.runs[0]).toMatchObject({ status: "TIMED_OUT" });
    expect(issue(steps[6]!.state, "i1")).toMatchObject({ status: "CLAIMED", checkoutRunId: "r1" });
    expect(last(steps).answer).toEqual({ __typename: "SweepCounts", timedOutRuns: 0, recoveredIssues: 1, escalatedIssues: 0 });
    expect(issue(last(steps).state, "i1")).toMatchObject({ status: "OPEN", attemptCount: 1, checkoutRunId: null });
    expect(last(steps).events).toEqual([expect.objectContaining({ kind: "RECOVERED", runId: "r1", agentId: "A", reason: "LEASE_EXPIRED" })]);
  });

  it("finishRun releases everything the run holds at no attempt's cost; the scheduler tick claims for agents with assigned work", () => {
    const steps = play(company(), [
      { verb: "runHeartbeat" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i2" },
      { verb: "acquireExecution", agentId: "A", runId: "r1", issueId: "i2" },
      { verb: "finishRun", agentId: "A", runId: "r1", status: "CANCELLED" },
    ]);
    expect(steps[0]!.answer).toMatchObject({
      __typename: "HeartbeatTick",
      runs: [{ id: "r1", agentId: "A", status: "RUNNING" }],
      claims: [{ issue: { id: "i1" } }],
    });
    expect(last(steps).events.map((e) => [e.issueId, e.kind, e.status, e.reason])).toEqual([
      ["i1", "RELEASED", "OPEN", "RUN_FINISHED"],
      ["i2", "RELEASED", "OPEN", "RUN_FINISHED"],
    ]);
    expect(last(steps).state.issues.map((i) => i.attemptCount)).toEqual([0, 1]);
  });
});

describe("the board", () => {
  it("reopens BLOCKED without an attempt left to ESCALATED, refuses ESCALATED → OPEN unless maxAttempts is raised in the same call", () => {
    const steps = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssues", agentId: "A", runId: "r1", limit: 1, acquireExecution: true },
      { verb: "updateIssue", issueId: "i1", input: { maxAttempts: 1 } },
      { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "BLOCKED" },
      { verb: "updateIssue", issueId: "i1", input: { status: "OPEN" } },
      { verb: "updateIssue", issueId: "i1", input: { status: "OPEN" } },
      { verb: "updateIssue", issueId: "i1", input: { status: "OPEN", maxAttempts: 2 } },
      { verb: "updateIssue", issueId: "i1", input: { status: "BACKLOG" } },
    ]);
    expect(steps[4]!.events).toEqual([expect.objectContaining({ kind: "STATUS_CHANGED", status: "ESCALATED", reason: "BLOCKED -> ESCALATED" })]);
    expect(steps[5]!.answer).toMatchObject({ __typename: "InvalidTransition", from: "ESCALATED", to: "OPEN" });
    expect(steps[6]!.answer).toMatchObject({ __typename: "IssueUpdated", issue: { status: "OPEN", maxAttempts: 2 } });
    expect(last(steps).answer).toMatchObject({ __typename: "InvalidTransition", from: "OPEN", to: "BACKLOG" });
  });

  it("force-releases a held issue at no attempt's cost, and answers an unheld one as it is, with no event", () => {
    const steps = play(company(), [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1" },
      { verb: "forceReleaseIssue", issueId: "i1", reason: "  stuck  " },
      { verb: "forceReleaseIssue", issueId: "i1", reason: "again" },
    ]);
    expect(steps[2]!.events).toEqual([expect.objectContaining({ kind: "FORCE_RELEASED", status: "OPEN", runId: "r1", agentId: "A", reason: "stuck" })]);
    expect(issue(steps[2]!.state, "i1").attemptCount).toBe(0);
    expect(last(steps).answer).toMatchObject({ __typename: "IssueReleased", issue: { status: "OPEN" } });
    expect(last(steps).events).toEqual([]);
  });
});

describe("disabling an agent", () => {
  it("cancels its RUNNING runs, live or expired, and recovers every lock its runs hold as the sweep would, with reason AGENT_DISABLED", () => {
    const s = initialState({
      agents: ["A", "B"],
      issues: [
        { id: "i1", assigneeAgentId: "A", maxAttempts: 2 },
        { id: "i2", maxAttempts: 1 },
        { id: "i3", maxAttempts: 2 },
      ],
      leaseLength: 2,
    });
    const steps = play(s, [
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" },
      { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i2" },
      { verb: "tick", by: 2 },
      { verb: "startRun", agentId: "A" },
      { verb: "claimIssue", agentId: "A", runId: "r2", issueId: "i3" },
      { verb: "acquireExecution", agentId: "A", runId: "r2", issueId: "i3" },
      { verb: "startRun", agentId: "B" },
      { verb: "disableAgent", agentId: "A", reason: "  leaked key " },
    ]);
    const disabled = last(steps);
    expect(disabled.answer).toEqual({ __typename: "Agent", agentId: "A", disabled: true, disabledReason: "leaked key" });
    // r1 expired (not yet written down) and r2 live: both CANCELLED; B's run untouched
    expect(disabled.state.runs.map((r) => [r.id, r.status])).toEqual([
      ["r1", "CANCELLED"],
      ["r2", "CANCELLED"],
      ["r3", "RUNNING"],
    ]);
    // i1 CLAIMED: its attempt charged; i2 CLAIMED on its last attempt: ESCALATED; i3 IN_PROGRESS: already counted
    expect(disabled.state.issues.map((i) => [i.id, i.status, i.attemptCount, i.checkoutRunId])).toEqual([
      ["i1", "OPEN", 1, null],
      ["i2", "ESCALATED", 1, null],
      ["i3", "OPEN", 1, null],
    ]);
    expect(disabled.events.map((e) => [e.issueId, e.kind, e.runId, e.agentId, e.reason])).toEqual([
      ["i1", "RECOVERED", "r1", "A", "AGENT_DISABLED"],
      ["i2", "ESCALATED", "r1", "A", "AGENT_DISABLED"],
      ["i3", "RECOVERED", "r2", "A", "AGENT_DISABLED"],
    ]);
    expect(disabled.state.disabled).toEqual(["A"]);
  });

  it("refuses the disabled agent a run, from startRun and from the scheduler tick, until it is enabled; disabling again changes nothing but the reason", () => {
    const steps = play(company(), [
      { verb: "disableAgent", agentId: "A", reason: "off" },
      { verb: "startRun", agentId: "A" },
      { verb: "runHeartbeat" },
      { verb: "disableAgent", agentId: "A", reason: "still off" },
      { verb: "enableAgent", agentId: "A" },
      { verb: "runHeartbeat" },
    ]);
    expect(steps[1]!.answer).toMatchObject({ __typename: "Error", code: "FORBIDDEN" });
    expect(steps[1]!.state).toBe(steps[0]!.state);
    expect(steps[2]!.answer).toEqual({ __typename: "HeartbeatTick", runs: [], claims: [] });
    expect(steps[3]!.answer).toMatchObject({ __typename: "Agent", disabled: true, disabledReason: "still off" });
    expect(steps[3]!.state).toBe(steps[2]!.state);
    expect(steps[4]!.answer).toEqual({ __typename: "Agent", agentId: "A", disabled: false, disabledReason: null });
    expect(last(steps).answer).toMatchObject({ __typename: "HeartbeatTick", claims: [{ issue: { id: "i1" } }] });
  });

  it("answers a blank reason BAD_USER_INPUT (before looking for the agent) and an unknown agent NOT_FOUND, changing nothing", () => {
    const s = company();
    for (const [c, code] of [
      [{ verb: "disableAgent", agentId: "A", reason: "   " }, "BAD_USER_INPUT"],
      [{ verb: "disableAgent", agentId: "Z", reason: "   " }, "BAD_USER_INPUT"],
      [{ verb: "disableAgent", agentId: "Z", reason: "gone" }, "NOT_FOUND"],
      [{ verb: "enableAgent", agentId: "Z" }, "NOT_FOUND"],
    ] as [Command, string][]) {
      const step = apply(s, c);
      expect(step.answer).toMatchObject({ __typename: "Error", code });
      expect(step.state).toBe(s);
    }
  });
});
