// Recovery makes progress on every dead lock nothing else holds, whatever one
// session holds: rows another transaction holds are passed over, and neither
// fill a batch nor stop the pass (docs/invariants.md #8, "The recovery sweepers").
import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { sweep } from "../../src/locks/recovery/sweep.js";
import type { LockEvent } from "../../src/domain/types.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
const sink = { publish: (_events: readonly LockEvent[]) => {} };

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());
// sweep() covers the whole database: whatever a failing test left behind is settled before the next one counts.
afterEach(() => sweep(h.db.prisma, sink));
// Each test's rows then lie in the table in the order they were written: held ones first, the free one last.
beforeEach(() => h.sql("TRUNCATE lock_events, issues CASCADE"));

/** A session of its own, holding rows open in a transaction until the test lets go. */
async function holder(): Promise<pg.Client & { pid: number }> {
  const client = new pg.Client({ connectionString: h.database.url });
  await client.connect();
  const pid = (await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
  await client.query("BEGIN");
  return Object.assign(client, { pid });
}

/** `count` CLAIMED issues held by `runId`, written directly (1,000 claims through the API would only slow the test). */
async function claimedBy(co: Company, runId: string, count: number): Promise<string[]> {
  const rows = await h.sql<{ id: string }>(
    `INSERT INTO issues (company_id, title, status, checkout_run_id, claimed_at)
     SELECT $1, 'held ' || g, 'CLAIMED', $2, now() FROM generate_series(1, $3::int) g RETURNING id`,
    [co.id, runId, count],
  );
  return rows.map((r) => r.id);
}

async function claimedOne(co: Company, agentIndex: number) {
  const agent = co.agents[agentIndex]!;
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "work", assigneeAgentId: agent.id } });
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id });
  return { runId: run.id, issueId: createIssue.id };
}

const holderOf = (issueId: string) => h.one<{ run: string | null }>("SELECT checkout_run_id AS run FROM issues WHERE id = $1", [issueId]).then((r) => r.run);
const runStatus = (runId: string) => h.one<{ status: string }>("SELECT status::text FROM heartbeat_runs WHERE id = $1", [runId]).then((r) => r.status);

describe("the recovery sweep past rows another session holds", () => {
  // docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
  it("a session holding a whole batch of dead-locked issue rows does not keep one sweep from recovering another; the rest follow once it lets go", async () => {
    const co = await createCompany(h, 1);
    const run = (await co.agents[0]!.client.ok(Ops.StartRunDocument)).startRun;
    // Written first, so the held rows come first in the table and in its index.
    const held = await claimedBy(co, run.id, 1000);
    const [free] = await claimedBy(co, run.id, 1);
    await h.sql("UPDATE heartbeat_runs SET status = 'CANCELLED', finished_at = now() WHERE id = $1", [run.id]);
    const session = await holder();
    try {
      await session.query("SELECT 1 FROM issues WHERE id = ANY($1) FOR UPDATE", [held]);
      // The sweep passes the held rows by without waiting for them (SKIP LOCKED), so it returns while they are held.
      expect(await sweep(h.db.prisma, sink)).toEqual({ timedOutRuns: 0, recoveredIssues: 1, escalatedIssues: 0 });
      expect(await holderOf(free!)).toBeNull();
      const stillHeld = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM issues WHERE id = ANY($1) AND checkout_run_id = $2", [held, run.id]);
      expect(stillHeld.n).toBe(1000);
      await session.query("ROLLBACK");
    } finally {
      await session.end();
    }
    expect(await sweep(h.db.prisma, sink)).toEqual({ timedOutRuns: 0, recoveredIssues: 1000, escalatedIssues: 0 });
    const events = await h.one<{ events: number; issues: number }>(
      "SELECT count(*)::int AS events, count(DISTINCT issue_id)::int AS issues FROM lock_events WHERE kind = 'RECOVERED' AND run_id = $1",
      [run.id],
    );
    expect(events).toEqual({ events: 1001, issues: 1001 });
  });

  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  it("a session holding a whole batch of exhausted OPEN issue rows does not keep one sweep from escalating another", async () => {
    const co = await createCompany(h, 1);
    const held = (
      await h.sql<{ id: string }>(
        `INSERT INTO issues (company_id, title, attempt_count, max_attempts) SELECT $1, 'spent ' || g, 3, 3 FROM generate_series(1, 1000) g RETURNING id`,
        [co.id],
      )
    ).map((r) => r.id);
    // Last in the table and in id order (the index of exhausted issues), after every held one.
    const free = "ffffffff-ffff-4fff-bfff-ffffffffffff";
    await h.sql(`INSERT INTO issues (id, company_id, title, attempt_count, max_attempts) VALUES ($1, $2, 'spent', 3, 3)`, [free, co.id]);
    const session = await holder();
    try {
      await session.query("SELECT 1 FROM issues WHERE id = ANY($1) FOR UPDATE", [held]);
      expect(await sweep(h.db.prisma, sink)).toEqual({ timedOutRuns: 0, recoveredIssues: 0, escalatedIssues: 1 });
      expect(await h.one("SELECT status::text FROM issues WHERE id = $1", [free])).toEqual({ status: "ESCALATED" });
      await session.query("ROLLBACK");
    } finally {
      await session.end();
    }
    expect(await sweep(h.db.prisma, sink)).toEqual({ timedOutRuns: 0, recoveredIssues: 0, escalatedIssues: 1000 });
  });

  // docs/invariants.md #5: a dead run can never take a lock or act
  // docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
  it("a session holding one expired run's row does not keep the sweep from timing out another expired run that was busy, or from recovering its lock", async () => {
    const co = await createCompany(h, 2);
    // `first` is the one TIME_OUT_BUSY_EXPIRED_RUNS reaches first (id order).
    const [first, second] = [await claimedOne(co, 0), await claimedOne(co, 1)].sort((a, b) => (a.runId < b.runId ? -1 : 1));
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = ANY($1)", [[first!.runId, second!.runId]]);
    // One session holds the first run's row for long (an operator's open transaction);
    // another holds the second's for a moment (its dead agent's own claim reads it FOR SHARE).
    const long = await holder();
    const brief = await holder();
    try {
      await long.query("SELECT 1 FROM heartbeat_runs WHERE id = $1 FOR SHARE", [first!.runId]);
      await brief.query("SELECT 1 FROM heartbeat_runs WHERE id = $1 FOR SHARE", [second!.runId]);
      const sweeping = sweep(h.db.prisma, sink);
      await eventually(async () => {
        const waiting = await h.sql("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND NOT pid = ANY($1)", [
          [long.pid, brief.pid],
        ]);
        return waiting.length > 0 ? true : undefined;
      }, "the sweep to wait for a run's row");
      await brief.query("COMMIT");
      expect(await sweeping).toEqual({ timedOutRuns: 1, recoveredIssues: 1, escalatedIssues: 0 });
      expect([await runStatus(first!.runId), await runStatus(second!.runId)]).toEqual(["RUNNING", "TIMED_OUT"]);
      expect([await holderOf(first!.issueId), await holderOf(second!.issueId)]).toEqual([first!.runId, null]);
      await long.query("ROLLBACK");
    } finally {
      await long.end();
      await brief.end();
    }
    expect(await sweep(h.db.prisma, sink)).toEqual({ timedOutRuns: 1, recoveredIssues: 1, escalatedIssues: 0 });
    expect(await holderOf(first!.issueId)).toBeNull();
    const reasons = await h.sql<{ reason: string }>("SELECT reason FROM lock_events WHERE issue_id = ANY($1) AND kind = 'RECOVERED'", [
      [first!.issueId, second!.issueId],
    ]);
    expect(reasons.map((r) => r.reason)).toEqual(["LEASE_EXPIRED", "LEASE_EXPIRED"]);
  });
});
