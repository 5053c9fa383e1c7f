// The recovery sweep: rows on both sides of every cut-off, concurrent
// sweepers, and the heartbeat/sweep race.
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { previewSweep, sweep } from "../../src/locks/recovery/sweep.js";
import type { LockEvent } from "../../src/domain/types.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually, race } from "../helpers/race.js";

let h: Harness;
const published: LockEvent[] = [];
const sink = { publish: (events: readonly LockEvent[]) => void published.push(...events) };

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());
// sweep() covers the whole database: runs a test leaves alive must not expire
// into the next test's counts, however slowly this machine runs today.
afterEach(() => h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() + interval '1 day' WHERE status = 'RUNNING'"));

async function heldIssues(co: Company, agentIndex: number, count: number, acquire: number) {
  const agent = co.agents[agentIndex]!;
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: Array.from({ length: count }, () => ({ title: "work", assigneeAgentId: agent.id })),
  });
  for (const [i, issue] of createIssues.entries()) {
    await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    if (i < acquire) await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: issue.id });
  }
  return { run, ids: createIssues.map((i) => i.id) };
}

const expire = (runId: string, offset: string) => h.sql(`UPDATE heartbeat_runs SET lease_expires_at = now() + $2::interval WHERE id = $1`, [runId, offset]);

describe("recovery sweep", () => {
  // docs/invariants.md #6: a lease is extended only while live; a run times out only when expired
  // docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
  it("times out only expired leases, frees only dead runs' locks, and counts the dead holder's attempt", async () => {
    const co = await createCompany(h, 4);
    const expired = await heldIssues(co, 0, 3, 1);
    const almost = await heldIssues(co, 1, 2, 1);
    const finishedByHand = await heldIssues(co, 2, 1, 0);
    const healthy = await heldIssues(co, 3, 1, 1);
    await expire(expired.run.id, "-1 millisecond");
    await expire(almost.run.id, "1 second");
    await h.sql("UPDATE heartbeat_runs SET status = 'CANCELLED', finished_at = now() WHERE id = $1", [finishedByHand.run.id]);

    const counts = await sweep(h.db.prisma, sink);
    expect(counts).toEqual({ timedOutRuns: 1, recoveredIssues: 4, escalatedIssues: 0 });
    const runs = await h.sql<{ id: string; status: string }>("SELECT id, status FROM heartbeat_runs WHERE company_id = $1", [co.id]);
    expect(Object.fromEntries(runs.map((r) => [r.id, r.status]))).toMatchObject({
      [expired.run.id]: "TIMED_OUT",
      [almost.run.id]: "RUNNING",
      [healthy.run.id]: "RUNNING",
    });
    const issues = await h.sql<{ id: string; status: string; attempt_count: number; checkout_run_id: string | null }>(
      "SELECT id, status, attempt_count, checkout_run_id FROM issues WHERE company_id = $1",
      [co.id],
    );
    const byId = new Map(issues.map((i) => [i.id, i]));
    // in progress (attempt already counted), then two that died while CLAIMED (+1 each)
    expect(expired.ids.map((id) => [byId.get(id)!.status, byId.get(id)!.attempt_count])).toEqual([
      ["OPEN", 1],
      ["OPEN", 1],
      ["OPEN", 1],
    ]);
    expect(byId.get(finishedByHand.ids[0]!)).toMatchObject({ status: "OPEN", attempt_count: 1 });
    for (const id of [...almost.ids, ...healthy.ids]) expect(byId.get(id)!.checkout_run_id).not.toBeNull();
    const events = await h.sql<{ kind: string; reason: string; run_id: string }>(
      "SELECT kind, reason, run_id FROM lock_events WHERE company_id = $1 AND kind = 'RECOVERED' ORDER BY seq",
      [co.id],
    );
    expect(events).toHaveLength(4);
    expect(events.filter((e) => e.reason === "LEASE_EXPIRED").map((e) => e.run_id)).toEqual(Array(3).fill(expired.run.id));
    expect(events.filter((e) => e.reason === "RUN_FINISHED").map((e) => e.run_id)).toEqual([finishedByHand.run.id]);
    expect(published.filter((e) => e.companyId === co.id)).toHaveLength(4);

    const again = await sweep(h.db.prisma, sink);
    expect(again).toEqual({ timedOutRuns: 0, recoveredIssues: 0, escalatedIssues: 0 });
  });

  // docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  it("escalates exhausted issues: a dead holder's last attempt, and OPEN issues left without one", async () => {
    const co = await createCompany(h, 1);
    const held = await heldIssues(co, 0, 2, 1);
    await h.sql("UPDATE issues SET max_attempts = 1 WHERE id = ANY($1)", [held.ids]);
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "lowered", maxAttempts: 2 } });
    await h.sql("UPDATE issues SET attempt_count = 2 WHERE id = $1", [createIssue.id]);
    await expire(held.run.id, "-1 second");
    const counts = await sweep(h.db.prisma, sink);
    expect(counts).toEqual({ timedOutRuns: 1, recoveredIssues: 0, escalatedIssues: 3 });
    const statuses = await h.sql<{ status: string }>("SELECT DISTINCT status FROM issues WHERE company_id = $1", [co.id]);
    expect(statuses).toEqual([{ status: "ESCALATED" }]);
    const events = await h.sql<{ kind: string; reason: string }>(
      "SELECT kind, reason FROM lock_events WHERE company_id = $1 AND kind = 'ESCALATED' ORDER BY reason",
      [co.id],
    );
    expect(events.map((e) => e.reason)).toEqual(["ATTEMPTS_EXHAUSTED", "LEASE_EXPIRED", "LEASE_EXPIRED"]);
    const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
    expect(lockAudit).toMatchObject({ doubleClaims: 0, locksHeldByDeadRuns: 0, halfReleasedLocks: 0, unescalatedExhausted: 0 });
  });

  // docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
  // docs/invariants.md #11: every change writes exactly one event, in the same statement
  it("three sweepers at once over hundreds of dead locks in several companies: one event per recovered issue", async () => {
    const companies = await Promise.all([createCompany(h, 2), createCompany(h, 2), createCompany(h, 2)]);
    const dead: string[] = [];
    for (const co of companies) {
      for (const agent of co.agents) {
        const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
        await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 60 }, () => ({ title: "x", assigneeAgentId: agent.id })) });
        for (;;) {
          const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
          if (claimIssue.__typename !== "IssueClaimed") break;
        }
        dead.push(run.id);
      }
    }
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = ANY($1)", [dead]);
    // Earlier tests' leftovers are swept too: count only this test's runs.
    const results = await race(3, () => sweep(h.db.prisma, sink, { batchSize: 50 }));
    expect(results.reduce((n, r) => n + r.recoveredIssues, 0)).toBeGreaterThanOrEqual(360);
    const timedOut = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM heartbeat_runs WHERE id = ANY($1) AND status = 'TIMED_OUT'", [dead]);
    expect(timedOut.n).toBe(dead.length);
    const [{ events, issues }] = [
      await h.one<{ events: number; issues: number }>(
        "SELECT count(*)::int AS events, count(DISTINCT issue_id)::int AS issues FROM lock_events WHERE kind = 'RECOVERED' AND run_id = ANY($1)",
        [dead],
      ),
    ];
    expect([events, issues]).toEqual([360, 360]);
    for (const co of companies) {
      const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
      expect(lockAudit).toMatchObject({ doubleClaims: 0, locksHeldByDeadRuns: 0, halfReleasedLocks: 0, unescalatedExhausted: 0 });
    }
  });

  // docs/invariants.md #6: a lease is extended only while live; a run times out only when expired
  it("a heartbeat racing a sweep at the expiry instant: the lease is extended or the lock recovered, never both", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    const tally = { kept: 0, recovered: 0 };
    for (let round = 0; round < 30; round++) {
      const { run, ids } = await heldIssues(co, 0, 1, 1);
      // Expiry lands somewhere inside the race window, differently each round.
      await expire(run.id, `${(round % 6) * 2} milliseconds`);
      const [beat] = await race(2, async (i) => {
        if (i === 0) return (await agent.client.ok(Ops.HeartbeatRunDocument, { runId: run.id })).heartbeatRun.__typename;
        await sweep(h.db.prisma, sink);
        return "";
      });
      await sweep(h.db.prisma, sink); // whatever the first one left, a second sweep settles
      const issue = await h.one<{ checkout_run_id: string | null }>("SELECT checkout_run_id FROM issues WHERE id = $1", [ids[0]]);
      const runRow = await h.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [run.id]);
      const recoveries = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM lock_events WHERE issue_id = $1 AND kind = 'RECOVERED'", [ids[0]]);
      // The ledger agrees with the outcome: one recovery of a lock lost, none of a lock kept.
      expect(recoveries.n).toBe(beat === "RunUpdated" ? 0 : 1);
      if (beat === "RunUpdated") {
        expect(issue.checkout_run_id).toBe(run.id);
        expect(runRow.status).toBe("RUNNING");
        tally.kept++;
        await agent.client.ok(Ops.FinishRunDocument, { runId: run.id, status: "SUCCEEDED" });
      } else {
        expect(beat).toBe("RunNotActive");
        expect(issue.checkout_run_id).toBeNull();
        expect(runRow.status).toBe("TIMED_OUT");
        tally.recovered++;
      }
    }
    // Which side wins each round is the race's to decide (today's split is in the test's name when it fails); every round above was checked either way.
    expect(tally, "the rounds checked").toMatchObject({ kept: expect.any(Number), recovered: expect.any(Number) });
  });

  // docs/invariants.md #6: a lease is extended only while live; a run times out only when expired
  // docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
  it("a live run heartbeating through many sweeps keeps its lock", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    const { run, ids } = await heldIssues(co, 0, 2, 1);
    for (let i = 0; i < 10; i++) {
      // A lease close to its end but not past it (with room for a loaded CI machine).
      await expire(run.id, "3 seconds");
      await sweep(h.db.prisma, sink);
      const { heartbeatRun } = await agent.client.ok(Ops.HeartbeatRunDocument, { runId: run.id });
      expect(heartbeatRun.__typename).toBe("RunUpdated");
    }
    const held = await h.sql("SELECT id FROM issues WHERE checkout_run_id = $1", [run.id]);
    expect(held).toHaveLength(ids.length);
  });

  it("--dry-run counts what a sweep would do and changes nothing", async () => {
    const co = await createCompany(h, 1);
    const { run } = await heldIssues(co, 0, 2, 0);
    await expire(run.id, "-1 second");
    const before = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM lock_events");
    const preview = await sweep(h.db.prisma, sink, { dryRun: true });
    expect(preview.timedOutRuns).toBeGreaterThanOrEqual(1);
    expect(preview.recoveredIssues).toBeGreaterThanOrEqual(2);
    const after = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM lock_events");
    expect(after.n).toBe(before.n);
    const runRow = await h.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [run.id]);
    expect(runRow.status).toBe("RUNNING");
  });

  it("previewSweep names each run and issue it would change, with the holder and the outcome the sweep would give", async () => {
    const co = await createCompany(h, 1);
    const { run, ids } = await heldIssues(co, 0, 2, 0);
    await h.sql("UPDATE issues SET max_attempts = 1 WHERE id = $1", [ids[0]]); // its holder died CLAIMED: that was its last attempt
    const spare = (await co.board.ok(Ops.CreateIssueDocument, { input: { title: "no attempt left" } })).createIssue.id;
    await h.sql("UPDATE issues SET attempt_count = 3 WHERE id = $1", [spare]);
    await expire(run.id, "-90 seconds");
    const preview = await previewSweep(h.db.prisma, 10_000);
    expect(preview.runs.find((r) => r.runId === run.id)).toMatchObject({ agentId: co.agents[0]!.id, companyId: co.id });
    expect(preview.runs.find((r) => r.runId === run.id)!.expiredFor).toBeGreaterThanOrEqual(89);
    const mine = preview.issues.filter((i) => i.companyId === co.id);
    expect(mine.find((i) => i.issueId === ids[0])).toMatchObject({
      runId: run.id,
      runStatus: "RUNNING",
      status: "CLAIMED",
      attemptCount: 1,
      maxAttempts: 1,
      becomes: "ESCALATED",
    });
    expect(mine.find((i) => i.issueId === ids[1])).toMatchObject({ runId: run.id, attemptCount: 1, maxAttempts: 3, becomes: "OPEN" });
    expect(mine.find((i) => i.issueId === spare)).toMatchObject({ runId: null, status: "OPEN", becomes: "ESCALATED" });
    // And the sweep does what the preview said.
    await sweep(h.db.prisma, sink);
    const after = await h.sql<{ id: string; status: string }>("SELECT id, status FROM issues WHERE id = ANY($1)", [[...ids, spare]]);
    expect(Object.fromEntries(after.map((r) => [r.id, r.status]))).toEqual({ [ids[0]!]: "ESCALATED", [ids[1]!]: "OPEN", [spare]: "ESCALATED" });
  });
});

describe("a dead run whose row is busy", () => {
  // docs/invariants.md #5: a dead run can never take a lock or act
  it("is timed out and its locks freed in one sweep, which waits for its agent's statement (FOR SHARE) instead of skipping it", async () => {
    const co = await createCompany(h, 1);
    const dead = await heldIssues(co, 0, 2, 1);
    await expire(dead.run.id, "-1 second");
    // What the dead agent's own claim or acquire does to its run row while it runs.
    const other = new pg.Client({ connectionString: h.database.url });
    await other.connect();
    try {
      await other.query("BEGIN");
      await other.query("SELECT 1 FROM heartbeat_runs WHERE id = $1 FOR SHARE", [dead.run.id]);
      const sweeping = sweep(h.db.prisma, sink);
      const pid = (await other.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      await eventually(async () => {
        const waiting = await h.sql("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1", [pid]);
        return waiting.length > 0 ? true : undefined;
      }, "the sweep to wait for the run's row");
      await other.query("COMMIT");
      expect(await sweeping).toMatchObject({ timedOutRuns: 1, recoveredIssues: 2 });
    } finally {
      await other.end();
    }
    const audit = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
    expect(audit.lockAudit.locksHeldByDeadRuns).toBe(0);
    const issues = await h.sql<{ status: string; checkout_run_id: string | null }>("SELECT status::text, checkout_run_id FROM issues WHERE id = ANY($1)", [
      dead.ids,
    ]);
    expect(issues).toEqual([
      { status: "OPEN", checkout_run_id: null },
      { status: "OPEN", checkout_run_id: null },
    ]);
    const reasons = await h.sql<{ reason: string }>("SELECT reason FROM lock_events WHERE issue_id = ANY($1) AND kind = 'RECOVERED'", [dead.ids]);
    expect(reasons.map((r) => r.reason)).toEqual(["LEASE_EXPIRED", "LEASE_EXPIRED"]);
  });
});
