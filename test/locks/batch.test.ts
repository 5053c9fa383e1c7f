// claimIssues and releaseIssues: many issues in one statement, same guards.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { race } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

describe("claimIssues", () => {
  // docs/invariants.md #11: every change writes exactly one event, in the same statement
  it("claims up to limit in claim order, one event each, and says when nothing is left", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: (["LOW", "CRITICAL", "MEDIUM", "HIGH", "CRITICAL"] as const).map((priority, i) => ({ title: `t${i}`, priority, assigneeAgentId: agent.id })),
    });
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
    const first = await agent.client.ok(Ops.ClaimIssuesDocument, { runId: run.id, limit: 3 });
    if (first.claimIssues.__typename !== "IssuesClaimed") throw new Error(first.claimIssues.__typename);
    expect(first.claimIssues.issues.map((i) => i.priority)).toEqual(["CRITICAL", "CRITICAL", "HIGH"]);
    expect(first.claimIssues.issues.every((i) => i.status === "CLAIMED" && i.checkoutRunId === run.id && i.lockEpoch === 1)).toBe(true);
    const rest = await agent.client.ok(Ops.ClaimIssuesDocument, { runId: run.id, limit: 10 });
    expect(rest.claimIssues).toMatchObject({ __typename: "IssuesClaimed", issues: [{ priority: "MEDIUM" }, { priority: "LOW" }] });
    const none = await agent.client.ok(Ops.ClaimIssuesDocument, { runId: run.id, limit: 10 });
    expect(none.claimIssues.__typename).toBe("NoIssueAvailable");
    const events = await h.sql<{ seq: string }>("SELECT seq FROM lock_events WHERE company_id = $1 AND kind = 'CLAIMED' ORDER BY seq", [co.id]);
    expect(events).toHaveLength(5);
    // One statement, one transaction: the first batch's three events share its xid (seq >> 20).
    expect(new Set(events.slice(0, 3).map((e) => BigInt(e.seq) >> 20n)).size).toBe(1);
    expect(BigInt(events[3]!.seq) >> 20n).toBeGreaterThan(BigInt(events[2]!.seq) >> 20n);
    for (const limit of [0, 1001]) {
      expect(await agent.client.errorCode(Ops.ClaimIssuesDocument, { runId: run.id, limit })).toBe("BAD_USER_INPUT");
    }
    await agent.client.ok(Ops.FinishRunDocument, { runId: run.id, status: "SUCCEEDED" });
    const dead = await agent.client.ok(Ops.ClaimIssuesDocument, { runId: run.id, limit: 1 });
    expect(dead.claimIssues).toMatchObject({ __typename: "RunNotActive", runStatus: "SUCCEEDED" });
  });

  // docs/invariants.md #11: every change writes exactly one event, in the same statement
  it("with acquireExecution: true takes both locks, counts the attempt, and records CLAIMED then EXECUTION_ACQUIRED", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 3 }, (_, i) => ({ title: `t${i}`, assigneeAgentId: agent.id })) });
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
    const { claimIssues } = await agent.client.ok(Ops.ClaimIssuesDocument, { runId: run.id, limit: 2, acquireExecution: true });
    if (claimIssues.__typename !== "IssuesClaimed") throw new Error(claimIssues.__typename);
    for (const issue of claimIssues.issues) {
      expect(issue).toMatchObject({ status: "IN_PROGRESS", checkoutRunId: run.id, executionRunId: run.id, attemptCount: 1, lockEpoch: 1 });
    }
    const events = await h.sql<{ issue_id: string; kind: string; status: string; execution_run_id: string | null }>(
      "SELECT issue_id, kind, status, execution_run_id FROM lock_events WHERE company_id = $1 ORDER BY seq",
      [co.id],
    );
    expect(events).toHaveLength(4);
    for (const issue of claimIssues.issues) {
      expect(events.filter((e) => e.issue_id === issue.id).map((e) => [e.kind, e.status, e.execution_run_id])).toEqual([
        ["CLAIMED", "CLAIMED", null],
        ["EXECUTION_ACQUIRED", "IN_PROGRESS", run.id],
      ]);
    }
    const ids = claimIssues.issues.map((i) => i.id);
    const done = await agent.client.ok(Ops.ReleaseIssuesDocument, { runId: run.id, issueIds: ids, outcome: "DONE" });
    expect(done.releaseIssues).toMatchObject({ __typename: "IssuesReleased", refused: [] });
    const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
    expect(lockAudit).toMatchObject({ doubleClaims: 0, locksHeldByDeadRuns: 0, halfReleasedLocks: 0 });
  });

  // docs/invariants.md #1: at most one run holds an issue's checkout
  it("16 batch claimers draining 600 issues never receive the same issue", async () => {
    const co = await createCompany(h, 16);
    await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 600 }, (_, i) => ({ title: `job ${i}` })) });
    const runs = await Promise.all(co.agents.map(async (a) => (await a.client.ok(Ops.StartRunDocument)).startRun));
    const got = await race(16, async (i) => {
      const mine: string[] = [];
      for (;;) {
        const { claimIssues } = await co.agents[i]!.client.ok(Ops.ClaimIssuesDocument, { runId: runs[i]!.id, limit: 25, includeUnassigned: true });
        if (claimIssues.__typename !== "IssuesClaimed") return mine;
        mine.push(...claimIssues.issues.map((x) => x.id));
      }
    });
    const all = got.flat();
    expect(all).toHaveLength(600);
    expect(new Set(all).size).toBe(600);
    const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
    expect(lockAudit).toMatchObject({ doubleClaims: 0, halfReleasedLocks: 0 });
  });
});

describe("releaseIssues", () => {
  // docs/invariants.md #4: only the checkout holder releases, and DONE needs the execution lock
  it("releases what the run holds and refuses the rest, issue by issue", async () => {
    const co = await createCompany(h, 2);
    const [a, b] = [co.agents[0]!, co.agents[1]!];
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: Array.from({ length: 5 }, (_, i) => ({ title: `t${i}`, assigneeAgentId: i < 4 ? a.id : b.id })),
    });
    const runA = (await a.client.ok(Ops.StartRunDocument)).startRun;
    const runB = (await b.client.ok(Ops.StartRunDocument)).startRun;
    const claimed = await a.client.ok(Ops.ClaimIssuesDocument, { runId: runA.id, limit: 4 });
    if (claimed.claimIssues.__typename !== "IssuesClaimed") throw new Error("no claim");
    await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id });
    const [i0, i1, i2, i3, i4] = createIssues.map((i) => i.id) as [string, string, string, string, string];
    await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: i0 });
    await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: i1 });
    const unknown = "00000000-0000-4000-8000-0000000000ff";
    const { releaseIssues } = await a.client.ok(Ops.ReleaseIssuesDocument, {
      runId: runA.id,
      issueIds: [i0, i1, i2, i4, unknown],
      outcome: "DONE",
      reason: "batch",
    });
    if (releaseIssues.__typename !== "IssuesReleased") throw new Error(releaseIssues.__typename);
    expect(releaseIssues.issues.map((i) => i.id).sort()).toEqual([i0, i1].sort());
    expect(releaseIssues.issues.every((i) => i.status === "DONE" && i.checkoutRunId === null)).toBe(true);
    expect(releaseIssues.refused).toEqual([
      expect.objectContaining({ __typename: "InvalidTransition", issueId: i2, from: "CLAIMED", to: "DONE" }),
      expect.objectContaining({ __typename: "NotLockOwner", issueId: i4, ownerRunId: runB.id }),
      expect.objectContaining({ __typename: "IssueNotFound", issueId: unknown }),
    ]);
    const requeue = await a.client.ok(Ops.ReleaseIssuesDocument, { runId: runA.id, issueIds: [i2, i3], outcome: "REQUEUE" });
    expect(requeue.releaseIssues).toMatchObject({ __typename: "IssuesReleased", refused: [] });
    const events = await h.sql<{ kind: string; reason: string }>(
      "SELECT kind, reason FROM lock_events WHERE company_id = $1 AND kind = 'RELEASED' ORDER BY seq",
      [co.id],
    );
    expect(events.map((e) => e.reason)).toEqual(["DONE: batch", "DONE: batch", "REQUEUE", "REQUEUE"]);
    expect(await a.client.errorCode(Ops.ReleaseIssuesDocument, { runId: runA.id, issueIds: [], outcome: "DONE" })).toBe("BAD_USER_INPUT");
  });
});
