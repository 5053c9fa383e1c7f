// Runs and leases (runs.ts), the board's mutations (updateIssue.ts,
// forceReleaseIssue.ts) and the scheduler's tick (schedulerTick.ts). The read
// queries: reads.test.ts; the audit: lockAudit.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

let h: Harness;
let acme: Company;

beforeAll(async () => {
  h = await startHarness({ leaseSeconds: 30 });
  acme = await createCompany(h, 2);
});
afterAll(() => h?.close());

const newIssue = (input: Partial<Ops.CreateIssueInput> = {}) =>
  acme.board.ok(Ops.CreateIssueDocument, { input: { title: "Task", assigneeAgentId: acme.agents[0]!.id, ...input } }).then((r) => r.createIssue);
const newRun = (agent = 0) => acme.agents[agent]!.client.ok(Ops.StartRunDocument).then((r) => r.startRun);

describe("runs and leases", () => {
  // docs/invariants.md #6: a lease is extended only while live; a run times out only when expired
  it("starts a run with a lease on the database clock and extends it on heartbeat", async () => {
    const run = await newRun();
    expect(run.status).toBe("RUNNING");
    const { lease } = await h.one<{ lease: number }>("SELECT extract(epoch FROM lease_expires_at - now())::float AS lease FROM heartbeat_runs WHERE id = $1", [
      run.id,
    ]);
    expect(lease).toBeGreaterThan(25);
    expect(lease).toBeLessThanOrEqual(30);
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() + interval '5 seconds' WHERE id = $1", [run.id]);
    const { heartbeatRun } = await acme.agents[0]!.client.ok(Ops.HeartbeatRunDocument, { runId: run.id });
    expect(heartbeatRun.__typename).toBe("RunUpdated");
    const { left } = await h.one<{ left: number }>("SELECT extract(epoch FROM lease_expires_at - now())::float AS left FROM heartbeat_runs WHERE id = $1", [
      run.id,
    ]);
    expect(left).toBeGreaterThan(25);
  });

  // docs/invariants.md #6: a lease is extended only while live; a run times out only when expired
  it("refuses to heartbeat an expired run and writes it down as TIMED_OUT, keeping its locks for recovery", async () => {
    const run = await newRun();
    const issue = await newIssue();
    await acme.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 millisecond' WHERE id = $1", [run.id]);
    const { heartbeatRun } = await acme.agents[0]!.client.ok(Ops.HeartbeatRunDocument, { runId: run.id });
    expect(heartbeatRun).toMatchObject({ __typename: "RunNotActive", runId: run.id, runStatus: "TIMED_OUT" });
    const { run: after } = await acme.board.ok(Ops.RunDocument, { id: run.id });
    expect(after).toMatchObject({ status: "TIMED_OUT" });
    expect(after?.finishedAt).not.toBeNull();
    const { issue: held } = await acme.board.ok(Ops.IssueDocument, { id: issue.id });
    expect(held?.checkoutRunId).toBe(run.id);
  });

  // docs/invariants.md #7: finishRun releases everything the run held, atomically with ending it
  it("refuses to finish an expired run and changes nothing: the run row and its locks stay for recovery", async () => {
    const run = await newRun();
    const issue = await newIssue();
    await acme.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 millisecond' WHERE id = $1", [run.id]);
    const before = await h.sql("SELECT status, finished_at, lease_expires_at FROM heartbeat_runs WHERE id = $1", [run.id]);
    const { finishRun } = await acme.agents[0]!.client.ok(Ops.FinishRunDocument, { runId: run.id, status: "SUCCEEDED" });
    expect(finishRun).toMatchObject({ __typename: "RunNotActive", runId: run.id, runStatus: "TIMED_OUT" });
    expect(await h.sql("SELECT status, finished_at, lease_expires_at FROM heartbeat_runs WHERE id = $1", [run.id])).toEqual(before);
    const { issue: held } = await acme.board.ok(Ops.IssueDocument, { id: issue.id });
    expect(held).toMatchObject({ status: "CLAIMED", checkoutRunId: run.id });
  });

  // docs/invariants.md #7: finishRun releases everything the run held, atomically with ending it
  // docs/invariants.md #11: every change writes exactly one event, in the same statement
  it("finishRun releases everything the run holds, one RELEASED event each, without spending attempts", async () => {
    const agent = acme.agents[1]!;
    const run = await newRun(1);
    const claimed = await newIssue({ assigneeAgentId: agent.id });
    const working = await newIssue({ assigneeAgentId: agent.id });
    const lastTry = await newIssue({ assigneeAgentId: agent.id, maxAttempts: 1 });
    for (const issue of [claimed, working, lastTry]) await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: working.id });
    await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: lastTry.id });
    const { finishRun } = await agent.client.ok(Ops.FinishRunDocument, { runId: run.id, status: "FAILED" });
    expect(finishRun).toMatchObject({ __typename: "RunUpdated", run: { status: "FAILED" } });
    const statuses = await h.sql<{ id: string; status: string; attempt_count: number; checkout_run_id: string | null }>(
      "SELECT id, status, attempt_count, checkout_run_id FROM issues WHERE id = ANY($1)",
      [[claimed.id, working.id, lastTry.id]],
    );
    const byId = new Map(statuses.map((s) => [s.id, s]));
    expect(byId.get(claimed.id)).toMatchObject({ status: "OPEN", attempt_count: 0, checkout_run_id: null });
    expect(byId.get(working.id)).toMatchObject({ status: "OPEN", attempt_count: 1, checkout_run_id: null });
    expect(byId.get(lastTry.id)).toMatchObject({ status: "ESCALATED", attempt_count: 1, checkout_run_id: null });
    const events = await h.sql<{ kind: string; reason: string }>("SELECT kind, reason FROM lock_events WHERE run_id = $1 AND kind = 'RELEASED'", [run.id]);
    expect(events).toHaveLength(3);
    expect(events.every((e) => e.reason === "RUN_FINISHED")).toBe(true);
    const twice = await agent.client.ok(Ops.FinishRunDocument, { runId: run.id, status: "SUCCEEDED" });
    expect(twice.finishRun).toMatchObject({ __typename: "RunNotActive", runStatus: "FAILED" });
    const claimAfter = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
    expect(claimAfter.claimIssue.__typename).toBe("RunNotActive");
  });
});

describe("board mutations", () => {
  // docs/invariants.md #10: the board moves a status only along its edges
  it("moves issues only along the board's edges", async () => {
    const backlog = await newIssue({ status: "BACKLOG" });
    const toOpen = await acme.board.ok(Ops.UpdateIssueDocument, { id: backlog.id, input: { status: "OPEN" } });
    expect(toOpen.updateIssue).toMatchObject({ __typename: "IssueUpdated", issue: { status: "OPEN" } });
    const back = await acme.board.ok(Ops.UpdateIssueDocument, { id: backlog.id, input: { status: "BACKLOG" } });
    expect(back.updateIssue).toMatchObject({ __typename: "InvalidTransition", from: "OPEN", to: "BACKLOG" });
    const toDone = await acme.board.ok(Ops.UpdateIssueDocument, { id: backlog.id, input: { status: "DONE" } });
    expect(toDone.updateIssue).toMatchObject({ __typename: "InvalidTransition", from: "OPEN", to: "DONE" });
    const cancelled = await acme.board.ok(Ops.UpdateIssueDocument, { id: backlog.id, input: { status: "CANCELLED" } });
    expect(cancelled.updateIssue).toMatchObject({ __typename: "IssueUpdated", issue: { status: "CANCELLED" } });
    const revive = await acme.board.ok(Ops.UpdateIssueDocument, { id: backlog.id, input: { status: "OPEN" } });
    expect(revive.updateIssue).toMatchObject({ __typename: "InvalidTransition", from: "CANCELLED", to: "OPEN" });
    const missing = await acme.board.ok(Ops.UpdateIssueDocument, { id: "00000000-0000-4000-8000-000000000009", input: { title: "x" } });
    expect(missing.updateIssue.__typename).toBe("IssueNotFound");
    const events = await h.sql<{ kind: string; status: string }>("SELECT kind, status FROM lock_events WHERE issue_id = $1 ORDER BY seq", [backlog.id]);
    expect(events).toEqual([
      { kind: "STATUS_CHANGED", status: "OPEN" },
      { kind: "STATUS_CHANGED", status: "CANCELLED" },
    ]);
  });

  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  // docs/invariants.md #10: the board moves a status only along its edges
  it("reopens an ESCALATED issue only with an attempt left, and edits fields without events", async () => {
    const issue = await newIssue({ maxAttempts: 1 });
    await h.sql("UPDATE issues SET attempt_count = 1, status = 'ESCALATED' WHERE id = $1", [issue.id]);
    const refused = await acme.board.ok(Ops.UpdateIssueDocument, { id: issue.id, input: { status: "OPEN" } });
    expect(refused.updateIssue).toMatchObject({ __typename: "InvalidTransition", from: "ESCALATED", to: "OPEN" });
    const raised = await acme.board.ok(Ops.UpdateIssueDocument, { id: issue.id, input: { status: "OPEN", maxAttempts: 3 } });
    expect(raised.updateIssue).toMatchObject({ __typename: "IssueUpdated", issue: { status: "OPEN", maxAttempts: 3, attemptCount: 1 } });
    const before = await h.sql("SELECT 1 FROM lock_events WHERE issue_id = $1", [issue.id]);
    const edited = await acme.board.ok(Ops.UpdateIssueDocument, {
      id: issue.id,
      input: { title: "Renamed", description: "more", priority: "CRITICAL", assigneeAgentId: null },
    });
    expect(edited.updateIssue).toMatchObject({
      __typename: "IssueUpdated",
      issue: { title: "Renamed", description: "more", priority: "CRITICAL", assigneeAgentId: null, status: "OPEN" },
    });
    const after = await h.sql("SELECT 1 FROM lock_events WHERE issue_id = $1", [issue.id]);
    expect(after.length).toBe(before.length);
  });

  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  // docs/invariants.md #10: the board moves a status only along its edges
  it("a BLOCKED issue with no attempt left that the board reopens becomes ESCALATED instead; with maxAttempts raised it opens", async () => {
    const agent = acme.agents[0]!;
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
    const blocked = async () => {
      const issue = await newIssue({ assigneeAgentId: agent.id, maxAttempts: 1 });
      await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
      await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: issue.id });
      const released = await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: issue.id, outcome: "BLOCKED" });
      expect(released.releaseIssue).toMatchObject({ issue: { status: "BLOCKED", attemptCount: 1, maxAttempts: 1 } });
      return issue;
    };
    const spent = await blocked();
    const reopened = await acme.board.ok(Ops.UpdateIssueDocument, { id: spent.id, input: { status: "OPEN", title: "looked at" } });
    expect(reopened.updateIssue).toMatchObject({ __typename: "IssueUpdated", issue: { status: "ESCALATED", title: "looked at", checkoutRunId: null } });
    const events = await h.sql<{ kind: string; status: string; reason: string }>(
      "SELECT kind, status, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq",
      [spent.id],
    );
    expect(events.at(-1)).toEqual({ kind: "STATUS_CHANGED", status: "ESCALATED", reason: "BLOCKED -> ESCALATED" });
    const raised = await blocked();
    const opened = await acme.board.ok(Ops.UpdateIssueDocument, { id: raised.id, input: { status: "OPEN", maxAttempts: 2 } });
    expect(opened.updateIssue).toMatchObject({ __typename: "IssueUpdated", issue: { status: "OPEN", maxAttempts: 2 } });
  });

  // docs/invariants.md #3: the two locks change together with the status, in one row update
  // docs/invariants.md #10: the board moves a status only along its edges
  it("cancelling a held issue clears both locks in the same change", async () => {
    const run = await newRun();
    const issue = await newIssue();
    await acme.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    await acme.agents[0]!.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: issue.id });
    const { updateIssue } = await acme.board.ok(Ops.UpdateIssueDocument, { id: issue.id, input: { status: "CANCELLED" } });
    expect(updateIssue).toMatchObject({ __typename: "IssueUpdated", issue: { status: "CANCELLED", checkoutRunId: null, executionRunId: null } });
    const release = await acme.agents[0]!.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: issue.id, outcome: "DONE" });
    expect(release.releaseIssue.__typename).toBe("NotLockOwner");
  });

  it("forceReleaseIssue frees whatever holds an issue and says why; an unheld issue is left alone", async () => {
    const run = await newRun();
    const issue = await newIssue();
    await acme.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    await acme.agents[0]!.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: issue.id });
    const { forceReleaseIssue } = await acme.board.ok(Ops.ForceReleaseDocument, { issueId: issue.id, reason: "agent wedged" });
    expect(forceReleaseIssue).toMatchObject({
      __typename: "IssueReleased",
      issue: { status: "OPEN", checkoutRunId: null, executionRunId: null, attemptCount: 1 },
    });
    const again = await acme.board.ok(Ops.ForceReleaseDocument, { issueId: issue.id, reason: "again" });
    expect(again.forceReleaseIssue).toMatchObject({ __typename: "IssueReleased", issue: { status: "OPEN" } });
    const events = await h.sql<{ kind: string; reason: string; run_id: string; agent_id: string }>(
      "SELECT kind, reason, run_id, agent_id FROM lock_events WHERE issue_id = $1 ORDER BY seq",
      [issue.id],
    );
    expect(events.map((e) => e.kind)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "FORCE_RELEASED"]);
    expect(events[2]).toMatchObject({ reason: "agent wedged", run_id: run.id, agent_id: acme.agents[0]!.id });
    const missing = await acme.board.ok(Ops.ForceReleaseDocument, { issueId: "00000000-0000-4000-8000-00000000000a", reason: "x" });
    expect(missing.forceReleaseIssue.__typename).toBe("IssueNotFound");
  });

  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  it("forceReleaseIssue returns a CLAIMED issue to OPEN at no attempt's cost, and escalates an IN_PROGRESS one on its last attempt", async () => {
    const run = await newRun();
    const agent = acme.agents[0]!.client;
    const claimed = await newIssue();
    await agent.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: claimed.id });
    const freed = await acme.board.ok(Ops.ForceReleaseDocument, { issueId: claimed.id, reason: "reassigning" });
    expect(freed.forceReleaseIssue).toMatchObject({ __typename: "IssueReleased", issue: { status: "OPEN", checkoutRunId: null, attemptCount: 0 } });
    const last = await newIssue({ maxAttempts: 1 });
    await agent.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: last.id });
    await agent.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: last.id });
    const escalated = await acme.board.ok(Ops.ForceReleaseDocument, { issueId: last.id, reason: "stuck" });
    expect(escalated.forceReleaseIssue).toMatchObject({
      __typename: "IssueReleased",
      issue: { status: "ESCALATED", checkoutRunId: null, executionRunId: null, attemptCount: 1 },
    });
    const events = await h.sql<{ kind: string; status: string; reason: string }>(
      "SELECT kind, status, reason FROM lock_events WHERE issue_id = ANY($1) AND kind = 'FORCE_RELEASED' ORDER BY seq",
      [[claimed.id, last.id]],
    );
    expect(events).toEqual([
      { kind: "FORCE_RELEASED", status: "OPEN", reason: "reassigning" },
      { kind: "FORCE_RELEASED", status: "ESCALATED", reason: "stuck" },
    ]);
  });

  it("runHeartbeat starts a run per agent with assigned work, claims its next issue, and finishes idle runs", async () => {
    const co = await createCompany(h, 3);
    const [a, b] = co.agents as [Company["agents"][0], Company["agents"][0]];
    const forA = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "a", assigneeAgentId: a.id, priority: "HIGH" } });
    await co.board.ok(Ops.CreateIssueDocument, { input: { title: "a2", assigneeAgentId: a.id, priority: "LOW" } });
    const forB = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "b", assigneeAgentId: b.id } });
    await co.board.ok(Ops.CreateIssueDocument, { input: { title: "pool", assigneeAgentId: null } });
    const { runHeartbeat } = await co.board.ok(Ops.RunHeartbeatDocument);
    expect(runHeartbeat.runs).toHaveLength(2);
    expect(runHeartbeat.claims.map((c) => c.issue.id).sort()).toEqual([forA.createIssue.id, forB.createIssue.id].sort());
    for (const claim of runHeartbeat.claims) expect(claim.issue.checkoutRunId).toBe(claim.run.id);
  });
});
