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
  it("runs the whole life cycle and writes one event per change", async () => {
    const agent = acme.agents[0]!;
    const issue = await issueFor(0);
    const run = await startRun(0);
    const claim = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
    expect(claim.claimIssue.__typename).toBe("IssueClaimed");
    if (claim.claimIssue.__typename !== "IssueClaimed") return;
    expect(claim.claimIssue.issue).toMatchObject({ id: issue.id, status: "CLAIMED", checkoutRunId: run.id, executionRunId: null, lockEpoch: 1, attemptCount: 0 });
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
