// The happy path and every outcome of the three lock mutations, through
// GraphQL against a real server and database.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

let h: Harness;
let acme: Company;

beforeAll(async () => {
  h = await startHarness();
  acme = await createCompany(h, 2);
});
afterAll(() => h?.close());

async function issueFor(agentIndex: number | null, extra: Partial<Ops.CreateIssueInput> = {}) {
  const assigneeAgentId = agentIndex === null ? null : acme.agents[agentIndex]!.id;
  const { createIssue } = await acme.board.ok(Ops.CreateIssueDocument, { input: { title: "Fix the bug", assigneeAgentId, ...extra } });
  return createIssue;
}

async function startRun(agentIndex: number) {
  const { startRun } = await acme.agents[agentIndex]!.client.ok(Ops.StartRunDocument);
  return startRun;
}

describe("claim → acquire → release", () => {
  // docs/invariants.md #11: every change writes exactly one event, in the same statement
  // docs/invariants.md #13: lockEpoch goes up by one per change of hands and never goes down
  it("runs the whole life cycle and writes one event per change", async () => {
    const agent = acme.agents[0]!;
    const issue = await issueFor(0);
    const run = await startRun(0);
    const claim = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
    expect(claim.claimIssue.__typename).toBe("IssueClaimed");
    if (claim.claimIssue.__typename !== "IssueClaimed") return;
    expect(claim.claimIssue.issue).toMatchObject({
      id: issue.id,
      status: "CLAIMED",
      checkoutRunId: run.id,
      executionRunId: null,
      lockEpoch: 1,
      attemptCount: 0,
    });
    expect(claim.claimIssue.alreadyHeld).toBe(false);
    expect(claim.claimIssue.issue.assigneeAgentId).toBe(agent.id);

    const acquired = await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: issue.id });
    expect(acquired.acquireExecution).toMatchObject({
      __typename: "ExecutionAcquired",
      alreadyHeld: false,
      issue: { status: "IN_PROGRESS", checkoutRunId: run.id, executionRunId: run.id, executionAgentNameKey: "agent-1", attemptCount: 1 },
    });

    const released = await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: issue.id, outcome: "DONE", reason: "shipped" });
    expect(released.releaseIssue).toMatchObject({
      __typename: "IssueReleased",
      issue: { status: "DONE", checkoutRunId: null, executionRunId: null, executionAgentNameKey: null, executionLockedAt: null },
    });

    await h.settled(acme.id);
    const { lockEvents } = await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, issueId: issue.id });
    expect(lockEvents.map((e) => [e.kind, e.status, e.runId, e.checkoutRunId, e.executionRunId])).toEqual([
      ["CLAIMED", "CLAIMED", run.id, run.id, null],
      ["EXECUTION_ACQUIRED", "IN_PROGRESS", run.id, run.id, run.id],
      ["RELEASED", "DONE", run.id, null, null],
    ]);
    expect(lockEvents[2]!.reason).toBe("DONE: shipped");
    expect(lockEvents[2]!.issue.status).toBe("DONE");
  });
});

describe("claimIssue without an issue id", () => {
  it("takes CRITICAL before LOW, then the oldest, and only the caller's own work unless asked", async () => {
    const co = await createCompany(h, 2);
    const mine = co.agents[0]!;
    const make = (title: string, priority: Ops.IssuePriority, assigneeAgentId: string | null) =>
      co.board.ok(Ops.CreateIssueDocument, { input: { title, priority, assigneeAgentId } }).then((r) => r.createIssue);
    const low = await make("low", "LOW", mine.id);
    const critOld = await make("crit old", "CRITICAL", mine.id);
    const critNew = await make("crit new", "CRITICAL", mine.id);
    const unassignedHigh = await make("pool high", "HIGH", null);
    await make("other agent's", "CRITICAL", co.agents[1]!.id);
    const { startRun: run } = await mine.client.ok(Ops.StartRunDocument);
    const order: string[] = [];
    for (;;) {
      const { claimIssue } = await mine.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
      if (claimIssue.__typename !== "IssueClaimed") {
        expect(claimIssue.__typename).toBe("NoIssueAvailable");
        break;
      }
      order.push(claimIssue.issue.id);
    }
    expect(order).toEqual([critOld.id, critNew.id, low.id]);
    const pooled = await mine.client.ok(Ops.ClaimIssueDocument, { runId: run.id, includeUnassigned: true });
    expect(pooled.claimIssue).toMatchObject({ __typename: "IssueClaimed", issue: { id: unassignedHigh.id, assigneeAgentId: null } });
  });

  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  it("never claims an issue without attempts left", async () => {
    const issue = await issueFor(1, { maxAttempts: 1 });
    await h.sql("UPDATE issues SET attempt_count = 1 WHERE id = $1", [issue.id]);
    const run = await startRun(1);
    const { claimIssue } = await acme.agents[1]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
    expect(claimIssue.__typename).toBe("NoIssueAvailable");
  });

  // docs/invariants.md #5: a dead run can never take a lock or act
  it("answers RunNotActive for a finished, an expired and an unknown run, and changes nothing", async () => {
    const agent = acme.agents[1]!;
    const issue = await issueFor(1);
    const finished = await startRun(1);
    await agent.client.ok(Ops.FinishRunDocument, { runId: finished.id, status: "SUCCEEDED" });
    const expired = await startRun(1);
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [expired.id]);
    const unknown = "00000000-0000-4000-8000-000000000000";
    for (const [runId, status] of [
      [finished.id, "SUCCEEDED"],
      [expired.id, "TIMED_OUT"],
      [unknown, null],
    ] as const) {
      const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId });
      expect(claimIssue).toMatchObject({ __typename: "RunNotActive", runId, runStatus: status });
      const named = await agent.client.ok(Ops.ClaimIssueDocument, { runId, issueId: issue.id });
      expect(named.claimIssue.__typename).toBe("RunNotActive");
    }
    const { issue: after } = await acme.board.ok(Ops.IssueDocument, { id: issue.id });
    expect(after).toMatchObject({ status: "OPEN", checkoutRunId: null, lockEpoch: 0 });
  });
});

describe("claimIssue with an issue id", () => {
  // docs/invariants.md #11: every change writes exactly one event, in the same statement
  // docs/invariants.md #13: lockEpoch goes up by one per change of hands and never goes down
  it("is idempotent for the run that holds it: alreadyHeld, no new event, whatever expectedStatuses says", async () => {
    const agent = acme.agents[0]!;
    const issue = await issueFor(0);
    const run = await startRun(0);
    const first = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    expect(first.claimIssue).toMatchObject({ __typename: "IssueClaimed", alreadyHeld: false, adopted: false });
    for (const expectedStatuses of [["OPEN"], ["BLOCKED"], ["DONE", "BACKLOG"], []] as Ops.IssueStatus[][]) {
      const again = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id, expectedStatuses });
      expect(again.claimIssue, JSON.stringify(expectedStatuses)).toMatchObject({ __typename: "IssueClaimed", alreadyHeld: true, issue: { lockEpoch: 1 } });
    }
    await h.settled(acme.id);
    const { lockEvents } = await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, issueId: issue.id });
    expect(lockEvents).toHaveLength(1);
  });

  it("checks expectedStatuses after IssueNotFound, and starts a checkout only from OPEN, CLAIMED or IN_PROGRESS", async () => {
    const b = acme.agents[1]!;
    const runB = await startRun(1);
    const missing = await b.client.ok(Ops.ClaimIssueDocument, {
      runId: runB.id,
      issueId: "00000000-0000-4000-8000-000000000002",
      expectedStatuses: ["BACKLOG"],
    });
    expect(missing.claimIssue.__typename).toBe("IssueNotFound");
    const open = await issueFor(1);
    const none = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: open.id, expectedStatuses: [] });
    expect(none.claimIssue).toMatchObject({ __typename: "UnexpectedStatus", status: "OPEN", expectedStatuses: [] });
    const listed = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: open.id, expectedStatuses: ["DONE", "OPEN"] });
    expect(listed.claimIssue).toMatchObject({ __typename: "IssueClaimed", alreadyHeld: false, issue: { status: "CLAIMED", checkoutRunId: runB.id } });
    // Listed, but no checkout starts from BACKLOG (nor DONE, BLOCKED, CANCELLED, ESCALATED).
    const backlog = await issueFor(1, { status: "BACKLOG" });
    const fromBacklog = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: backlog.id, expectedStatuses: ["BACKLOG"] });
    expect(fromBacklog.claimIssue).toMatchObject({ __typename: "UnexpectedStatus", status: "BACKLOG", expectedStatuses: ["BACKLOG"] });
    expect((await acme.board.ok(Ops.IssueDocument, { id: backlog.id })).issue).toMatchObject({ status: "BACKLOG", checkoutRunId: null, lockEpoch: 0 });
  });

  it("answers IssueNotFound, UnexpectedStatus and CheckoutConflict naming the owner", async () => {
    const [a, b] = acme.agents as [Company["agents"][0], Company["agents"][0]];
    const runA = await startRun(0);
    const runB = await startRun(1);
    const missing = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: "00000000-0000-4000-8000-000000000001" });
    expect(missing.claimIssue.__typename).toBe("IssueNotFound");

    const shared = await issueFor(null);
    await a.client.ok(Ops.ClaimIssueDocument, { runId: runA.id, issueId: shared.id });
    const unexpected = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: shared.id });
    expect(unexpected.claimIssue).toMatchObject({ __typename: "UnexpectedStatus", status: "CLAIMED", expectedStatuses: ["OPEN"] });
    const conflict = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: shared.id, expectedStatuses: ["OPEN", "CLAIMED"] });
    expect(conflict.claimIssue).toMatchObject({
      __typename: "CheckoutConflict",
      ownerAgentId: a.id,
      ownerRunId: runA.id,
      holderRunIsLive: true,
      status: "CLAIMED",
    });

    const assignedToA = await issueFor(0);
    const notYours = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: assignedToA.id });
    expect(notYours.claimIssue).toMatchObject({ __typename: "CheckoutConflict", ownerAgentId: a.id, ownerRunId: null, holderRunIsLive: false });

    const backlog = await issueFor(1, { status: "BACKLOG" });
    const notOpen = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: backlog.id });
    expect(notOpen.claimIssue).toMatchObject({ __typename: "UnexpectedStatus", status: "BACKLOG" });

    const exhausted = await issueFor(1, { maxAttempts: 2 });
    await h.sql("UPDATE issues SET attempt_count = 2 WHERE id = $1", [exhausted.id]);
    const used = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: exhausted.id });
    expect(used.claimIssue).toMatchObject({ __typename: "AttemptsExhausted", attemptCount: 2, maxAttempts: 2 });
  });

  // docs/invariants.md #13: lockEpoch goes up by one per change of hands and never goes down
  it("adopts a dead run's lock: CLAIMED costs the dead holder an attempt, IN_PROGRESS comes back CLAIMED", async () => {
    const [a, b] = acme.agents as [Company["agents"][0], Company["agents"][0]];
    const claimedIssue = await issueFor(null);
    const workingIssue = await issueFor(null);
    const dead = await startRun(0);
    await a.client.ok(Ops.ClaimIssueDocument, { runId: dead.id, issueId: claimedIssue.id });
    await a.client.ok(Ops.ClaimIssueDocument, { runId: dead.id, issueId: workingIssue.id });
    await a.client.ok(Ops.AcquireExecutionDocument, { runId: dead.id, issueId: workingIssue.id });
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [dead.id]);

    const adopter = await startRun(1);
    const any = ["OPEN", "CLAIMED", "IN_PROGRESS"] as Ops.IssueStatus[];
    const took = await b.client.ok(Ops.ClaimIssueDocument, { runId: adopter.id, issueId: claimedIssue.id, expectedStatuses: any });
    expect(took.claimIssue).toMatchObject({
      __typename: "IssueClaimed",
      adopted: true,
      issue: { status: "CLAIMED", checkoutRunId: adopter.id, attemptCount: 1, lockEpoch: 2 },
    });
    const took2 = await b.client.ok(Ops.ClaimIssueDocument, { runId: adopter.id, issueId: workingIssue.id, expectedStatuses: any });
    expect(took2.claimIssue).toMatchObject({
      __typename: "IssueClaimed",
      adopted: true,
      issue: { status: "CLAIMED", checkoutRunId: adopter.id, executionRunId: null, attemptCount: 1, lockEpoch: 2 },
    });
    // The dead run is written down as TIMED_OUT, and can do nothing more.
    const { run } = await acme.board.ok(Ops.RunDocument, { id: dead.id });
    expect(run?.status).toBe("TIMED_OUT");
    await h.settled(acme.id);
    const { lockEvents } = await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, issueId: workingIssue.id });
    expect(lockEvents.map((e) => e.kind)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "ADOPTED"]);
    // The adopter must acquire execution again, which counts a new attempt; the dead run can do neither.
    const resumed = await b.client.ok(Ops.AcquireExecutionDocument, { runId: adopter.id, issueId: workingIssue.id });
    expect(resumed.acquireExecution).toMatchObject({
      __typename: "ExecutionAcquired",
      issue: { status: "IN_PROGRESS", executionRunId: adopter.id, attemptCount: 2 },
    });
    const ghost = await a.client.ok(Ops.AcquireExecutionDocument, { runId: dead.id, issueId: claimedIssue.id });
    expect(ghost.acquireExecution).toMatchObject({ __typename: "RunNotActive", runId: dead.id });
    expect((await acme.board.ok(Ops.IssueDocument, { id: claimedIssue.id })).issue).toMatchObject({
      status: "CLAIMED",
      checkoutRunId: adopter.id,
      executionRunId: null,
    });
  });

  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  it("escalates when adoption uses the last attempt, and refuses adoption of another agent's assigned issue", async () => {
    const [a, b] = acme.agents as [Company["agents"][0], Company["agents"][0]];
    const lastTry = await issueFor(null, { maxAttempts: 1 });
    const assignedToA = await issueFor(0);
    const dead = await startRun(0);
    await a.client.ok(Ops.ClaimIssueDocument, { runId: dead.id, issueId: lastTry.id });
    await a.client.ok(Ops.ClaimIssueDocument, { runId: dead.id, issueId: assignedToA.id });
    await h.sql("UPDATE heartbeat_runs SET status = 'FAILED', finished_at = now() WHERE id = $1", [dead.id]);
    const adopter = await startRun(1);
    const exhausted = await b.client.ok(Ops.ClaimIssueDocument, { runId: adopter.id, issueId: lastTry.id, expectedStatuses: ["CLAIMED"] });
    expect(exhausted.claimIssue).toMatchObject({ __typename: "AttemptsExhausted", attemptCount: 1, maxAttempts: 1 });
    const { issue } = await acme.board.ok(Ops.IssueDocument, { id: lastTry.id });
    expect(issue).toMatchObject({ status: "ESCALATED", checkoutRunId: null });
    await h.settled(acme.id);
    const escalation = (await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, issueId: lastTry.id })).lockEvents.at(-1);
    expect(escalation).toMatchObject({ kind: "ESCALATED", status: "ESCALATED", runId: adopter.id });
    const refused = await b.client.ok(Ops.ClaimIssueDocument, { runId: adopter.id, issueId: assignedToA.id, expectedStatuses: ["CLAIMED"] });
    expect(refused.claimIssue).toMatchObject({ __typename: "CheckoutConflict", ownerAgentId: a.id, ownerRunId: dead.id, holderRunIsLive: false });
  });
});

describe("acquireExecution", () => {
  // docs/invariants.md #2: no attempt of an issue is worked by two runs
  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  it("needs the checkout, is idempotent, conflicts with another run, and respects attempts", async () => {
    const [a, b] = acme.agents as [Company["agents"][0], Company["agents"][0]];
    const issue = await issueFor(null, { maxAttempts: 2 });
    const runA = await startRun(0);
    const runB = await startRun(1);
    const early = await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: issue.id });
    expect(early.acquireExecution.__typename).toBe("NotCheckedOut");
    await a.client.ok(Ops.ClaimIssueDocument, { runId: runA.id, issueId: issue.id });
    const other = await b.client.ok(Ops.AcquireExecutionDocument, { runId: runB.id, issueId: issue.id });
    expect(other.acquireExecution.__typename).toBe("NotCheckedOut");
    const ok = await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: issue.id });
    expect(ok.acquireExecution).toMatchObject({ __typename: "ExecutionAcquired", alreadyHeld: false, issue: { attemptCount: 1 } });
    const again = await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: issue.id });
    expect(again.acquireExecution).toMatchObject({ __typename: "ExecutionAcquired", alreadyHeld: true, issue: { attemptCount: 1 } });
    const conflict = await b.client.ok(Ops.AcquireExecutionDocument, { runId: runB.id, issueId: issue.id });
    expect(conflict.acquireExecution).toMatchObject({ __typename: "ExecutionConflict", ownerAgentId: a.id, ownerRunId: runA.id });
    const missing = await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: "00000000-0000-4000-8000-000000000002" });
    expect(missing.acquireExecution.__typename).toBe("IssueNotFound");

    const lowered = await issueFor(0, { maxAttempts: 3 });
    await a.client.ok(Ops.ClaimIssueDocument, { runId: runA.id, issueId: lowered.id });
    await h.sql("UPDATE issues SET attempt_count = 1 WHERE id = $1", [lowered.id]);
    await acme.board.ok(Ops.UpdateIssueDocument, { id: lowered.id, input: { maxAttempts: 1 } });
    const spent = await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: lowered.id });
    expect(spent.acquireExecution).toMatchObject({ __typename: "AttemptsExhausted", attemptCount: 1, maxAttempts: 1 });
  });
});

describe("releaseIssue", () => {
  it("maps outcomes to statuses and uses no attempt when releasing from CLAIMED", async () => {
    const a = acme.agents[0]!;
    const run = await startRun(0);
    const cases: [Ops.ReleaseOutcome, boolean, Ops.IssueStatus][] = [
      ["DONE", true, "DONE"],
      ["BLOCKED", true, "BLOCKED"],
      ["FAILED", true, "OPEN"],
      ["REQUEUE", true, "OPEN"],
      ["BLOCKED", false, "BLOCKED"],
      ["FAILED", false, "OPEN"],
      ["REQUEUE", false, "OPEN"],
    ];
    for (const [outcome, acquire, expected] of cases) {
      const issue = await issueFor(0);
      await a.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
      if (acquire) await a.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: issue.id });
      const { releaseIssue } = await a.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: issue.id, outcome });
      expect(releaseIssue, `${outcome} after ${acquire ? "IN_PROGRESS" : "CLAIMED"}`).toMatchObject({
        __typename: "IssueReleased",
        issue: { status: expected, checkoutRunId: null, executionRunId: null, attemptCount: acquire ? 1 : 0 },
      });
    }
  });

  // docs/invariants.md #4: only the checkout holder releases, and DONE needs the execution lock
  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  it("refuses DONE from CLAIMED, a release by a non-holder, and escalates when the last attempt failed", async () => {
    const [a, b] = acme.agents as [Company["agents"][0], Company["agents"][0]];
    const runA = await startRun(0);
    const runB = await startRun(1);
    const issue = await issueFor(null, { maxAttempts: 1 });
    await a.client.ok(Ops.ClaimIssueDocument, { runId: runA.id, issueId: issue.id });
    const done = await a.client.ok(Ops.ReleaseIssueDocument, { runId: runA.id, issueId: issue.id, outcome: "DONE" });
    expect(done.releaseIssue).toMatchObject({ __typename: "InvalidTransition", from: "CLAIMED", to: "DONE" });
    const notMine = await b.client.ok(Ops.ReleaseIssueDocument, { runId: runB.id, issueId: issue.id, outcome: "REQUEUE" });
    expect(notMine.releaseIssue).toMatchObject({ __typename: "NotLockOwner", ownerRunId: runA.id });
    await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: issue.id });
    const failed = await a.client.ok(Ops.ReleaseIssueDocument, { runId: runA.id, issueId: issue.id, outcome: "FAILED" });
    expect(failed.releaseIssue).toMatchObject({ __typename: "IssueReleased", issue: { status: "ESCALATED", attemptCount: 1 } });
    await h.settled(acme.id);
    const { lockEvents } = await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, issueId: issue.id });
    expect(lockEvents.at(-1)).toMatchObject({ kind: "RELEASED", status: "ESCALATED", reason: "FAILED" });
    const gone = await a.client.ok(Ops.ReleaseIssueDocument, { runId: runA.id, issueId: "00000000-0000-4000-8000-000000000003", outcome: "DONE" });
    expect(gone.releaseIssue.__typename).toBe("IssueNotFound");
  });

  // docs/invariants.md #5: a dead run can never take a lock or act
  it("refuses a release by a dead run, leaving the lock for recovery", async () => {
    const a = acme.agents[0]!;
    const run = await startRun(0);
    const issue = await issueFor(0);
    await a.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [run.id]);
    const late = await a.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: issue.id, outcome: "REQUEUE" });
    expect(late.releaseIssue.__typename).toBe("RunNotActive");
    const { issue: after } = await acme.board.ok(Ops.IssueDocument, { id: issue.id });
    expect(after).toMatchObject({ status: "CLAIMED", checkoutRunId: run.id });
  });
});
