// Retention (docs/operations.md, "Retention"; docs/events.md, "Retention"):
// whole days of ledger dropped past the window, days ahead made, readers that
// resume in dropped history told so (EVENTS_PRUNED) and readers inside the
// window missing nothing, claims never waiting on the drop, and finished runs
// deleted in batches unless an issue still refers to them.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PARTITION_DAYS_AHEAD, pruneLedger } from "../../src/retention/partitions.js";
import { RUN_BATCH, pruneRuns } from "../../src/retention/runs.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { Subscriber } from "../helpers/subscriber.js";

let h: Harness;
let co: Company;
/** A second company whose whole history lies in days that will be dropped. */
let quiet: Company;

const DAY_MS = 86_400_000;
const utcDay = (daysAgo: number) => new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - daysAgo * DAY_MS);
const partitionName = (day: Date) => `lock_events_${day.toISOString().slice(0, 10).replaceAll("-", "")}`;

/** A partition for a past UTC day, holding `seqs` of `companyId` (seqs far below any real one: made long ago). */
async function backdatedDay(daysAgo: number, events: { companyId: string; seq: number }[]): Promise<string> {
  const day = utcDay(daysAgo);
  const name = partitionName(day);
  await h.sql(`CREATE TABLE ${name} (LIKE lock_events INCLUDING DEFAULTS)`);
  await h.sql(
    `ALTER TABLE lock_events ATTACH PARTITION ${name} FOR VALUES FROM ('${day.toISOString()}') TO ('${new Date(day.getTime() + DAY_MS).toISOString()}')`,
  );
  for (const e of events) {
    await h.sql(`INSERT INTO lock_events (company_id, seq, issue_id, kind, status, at) VALUES ($1, $2, gen_random_uuid(), 'CLAIMED', 'CLAIMED', $3)`, [
      e.companyId,
      e.seq,
      new Date(day.getTime() + 3_600_000 + e.seq * 1000),
    ]);
  }
  return name;
}

const partitions = async () => (await h.sql<{ name: string }>("SELECT name FROM lock_event_partitions ORDER BY to_at")).map((r) => r.name);

/** One claim → acquire → release by the company's first agent: three real events. */
async function work(c: Company, title: string): Promise<void> {
  const agent = c.agents[0]!;
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const { createIssue } = await c.board.ok(Ops.CreateIssueDocument, { input: { title, assigneeAgentId: agent.id } });
  expect((await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id })).claimIssue.__typename).toBe("IssueClaimed");
  await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: createIssue.id });
  expect((await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: createIssue.id, outcome: "DONE" })).releaseIssue.__typename).toBe(
    "IssueReleased",
  );
  await agent.client.ok(Ops.FinishRunDocument, { runId: run.id, status: "SUCCEEDED" });
}

beforeAll(async () => {
  h = await startHarness();
  co = await createCompany(h, 1);
  quiet = await createCompany(h, 1);
  await work(co, "today's work");
  await h.settled(co.id);
});
afterAll(() => h?.close());

// docs/invariants.md #16: retention never skips a reader forward, and never makes a claim wait
describe("the ledger", () => {
  /** Seqs 1..30 over days 40..31 ago (3 a day), and 100..102 on day 29 ago, inside the window. */
  let expired: string[];
  let kept: string;

  beforeAll(async () => {
    expired = [];
    for (let d = 40; d >= 31; d--) {
      const base = (40 - d) * 3 + 1;
      const events = [0, 1, 2].map((k) => ({ companyId: co.id, seq: base + k }));
      if (d === 40) events.push({ companyId: quiet.id, seq: 5 });
      expired.push(await backdatedDay(d, events));
    }
    kept = await backdatedDay(
      29,
      [100, 101, 102].map((seq) => ({ companyId: co.id, seq })),
    );
  });

  it("drops every whole day past the window, oldest first, makes the days ahead, and records each company's newest dropped seq", async () => {
    // The two furthest days ahead go, to be made again.
    const ahead = (await partitions()).slice(-2);
    for (const name of ahead) {
      await h.sql(`ALTER TABLE lock_events DETACH PARTITION ${name}`);
      await h.sql(`DROP TABLE ${name}`);
    }
    const before = await h.sql<{ seq: string }>("SELECT e.seq::text AS seq FROM lock_events e WHERE e.at > now() - interval '30 days' ORDER BY e.seq");

    const pass = await pruneLedger(h.database.url, 30);

    expect(pass.ran).toBe(true);
    expect(pass.dropped).toEqual(expired);
    expect(pass.created).toEqual(ahead);
    const now = await partitions();
    expect(now).toContain(kept);
    for (const name of expired) expect(now).not.toContain(name);
    expect(now.at(-1)).toBe(partitionName(utcDay(-PARTITION_DAYS_AHEAD)));
    // Nothing inside the window went.
    expect(await h.sql<{ seq: string }>("SELECT e.seq::text AS seq FROM lock_events e ORDER BY e.seq")).toEqual(before);
    const pruned = await h.sql<{ company_id: string; through_seq: string }>(
      "SELECT company_id, through_seq::text FROM lock_events_pruned p ORDER BY p.through_seq",
    );
    expect(pruned).toEqual([
      { company_id: quiet.id, through_seq: "5" },
      { company_id: co.id, through_seq: "30" },
    ]);
    // A second pass finds nothing to do.
    expect(await pruneLedger(h.database.url, 30)).toEqual({ dropped: [], created: [], companies: 0, ran: true, failures: [] });
  });

  it("refuses a reader resuming in dropped history with EVENTS_PRUNED and where to resume; one inside the window misses nothing", async () => {
    const all = await h.ledgerSeqs(co.id);
    expect(all.slice(0, 3)).toEqual(["100", "101", "102"]);
    for (const afterSeq of ["0", "12", "29"]) {
      const res = await co.board.request(Ops.LedgerPageDocument, { companyId: co.id, afterSeq, first: 100 });
      expect(res.data).toBeFalsy();
      expect(res.errors?.[0]?.extensions).toEqual({ code: "EVENTS_PRUNED", resumeAfterSeq: "30", oldestAvailableSeq: "100" });
      expect(res.errors?.[0]?.message).toMatch(/pruned by retention; resume with afterSeq 30/);
    }
    const resumed = await co.board.ok(Ops.LedgerPageDocument, { companyId: co.id, afterSeq: "30", first: 1000 });
    expect(resumed.lockEvents.map((e) => e.seq)).toEqual(all);
    // Without afterSeq: from the oldest event kept.
    const fromStart = await co.board.ok(Ops.LedgerPageDocument, { companyId: co.id, first: 1000 });
    expect(fromStart.lockEvents.map((e) => e.seq)).toEqual(all);

    // The live stream: refused in dropped history; from inside the window, the kept events and then new ones.
    const refused = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq: "29" });
    try {
      const [message] = await refused.until((m) => m.length > 0, "the refusal");
      expect(message!.errors?.[0]?.extensions?.code).toBe("EVENTS_PRUNED");
    } finally {
      await refused.close();
    }
    const live = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq: "30" });
    try {
      await live.until((m) => m.length >= all.length, "the kept events");
      await work(co, "after the drop");
      const after = await h.ledgerSeqs(co.id);
      const got = await live.until((m) => m.length >= after.length, "the new events");
      expect(got.map((m) => m.data?.lockChanged.seq)).toEqual(after);
    } finally {
      await live.close();
    }
  });

  it("starts a stream from now for a company whose whole history was dropped", async () => {
    expect(await h.ledgerSeqs(quiet.id)).toEqual([]);
    const live = new Subscriber<Ops.LockChangedSubscription>(h.url, quiet.board.token).start(Ops.LockChangedDocument, { companyId: quiet.id });
    try {
      // "From now" starts once the server holds the subscription; work until it sees some.
      await eventually(async () => {
        await work(quiet, "since the drop");
        return live.messages.length > 0;
      }, "the stream to deliver");
      const seqs = await h.ledgerSeqs(quiet.id);
      const got = await live.until((m) => m.some((x) => x.errors) || m.at(-1)?.data?.lockChanged.seq === seqs.at(-1), "the newest event");
      expect(got.filter((m) => m.errors)).toEqual([]);
      const delivered = got.map((m) => m.data!.lockChanged.seq);
      expect(delivered).toEqual(seqs.slice(seqs.length - delivered.length));
    } finally {
      await live.close();
    }
  });

  it("never makes a claim wait for a drop: the drop waits for an open reader, claims go on meanwhile", async () => {
    const doomed = await backdatedDay(45, [{ companyId: co.id, seq: 40 }]);
    const reader = new pg.Client({ connectionString: h.database.url });
    await reader.connect();
    try {
      // An open transaction that has read the ledger: a drop that took lock_events
      // exclusively would queue behind it, and every claim behind the drop.
      await reader.query("BEGIN");
      await reader.query("SELECT count(*) FROM lock_events");
      let finished = false;
      const pass = pruneLedger(h.database.url, 30).finally(() => (finished = true));
      await eventually(async () => {
        const waiting = await h.sql(
          "SELECT 1 FROM pg_stat_activity WHERE application_name = 'baton-retention' AND wait_event_type IN ('Lock', 'Timeout') AND query LIKE '%DETACH%'",
        );
        return waiting.length > 0;
      }, "the drop to wait for the open reader");
      for (let i = 0; i < 3; i++) await work(co, `during the drop ${i}`);
      expect(finished).toBe(false);
      await reader.query("COMMIT");
      expect((await pass).dropped).toEqual([doomed]);
    } finally {
      await reader.end();
    }
    expect((await h.one<{ through_seq: string }>("SELECT through_seq::text FROM lock_events_pruned WHERE company_id = $1", [co.id])).through_seq).toBe("40");
  });

  it("a pass stopped while its detach waits ends at once; the next pass finishes that detach, and drops tables a pass detached but never dropped", async () => {
    const pending = await backdatedDay(46, [{ companyId: co.id, seq: 42 }]);
    // A table a pass detached and then died before dropping: no longer a partition, past the window.
    const leftBehind = partitionName(utcDay(47));
    await h.sql(`CREATE TABLE ${leftBehind} (LIKE lock_events INCLUDING DEFAULTS)`);
    const reader = new pg.Client({ connectionString: h.database.url });
    await reader.connect();
    try {
      await reader.query("BEGIN");
      await reader.query("SELECT count(*) FROM lock_events");
      const stop = new AbortController();
      const pass = pruneLedger(h.database.url, 30, stop.signal);
      await eventually(async () => {
        const waiting = await h.sql(
          "SELECT 1 FROM pg_stat_activity WHERE application_name = 'baton-retention' AND wait_event_type IN ('Lock', 'Timeout') AND query LIKE '%DETACH%'",
        );
        return waiting.length > 0;
      }, "the detach to wait for the open reader");
      stop.abort();
      const stopped = await pass;
      // Nothing of it goes on in the database: its detach was cancelled, not left to finish beside the next pass.
      await eventually(async () => {
        const left = await h.sql("SELECT 1 FROM pg_stat_activity WHERE application_name = 'baton-retention'");
        return left.length === 0;
      }, "the stopped pass's backend to end");
      expect(stopped.dropped).toEqual([leftBehind]);
      expect(stopped.failures).toEqual([]);
      // Its seqs were recorded before the detach began: readers are already refused.
      expect((await h.one<{ through_seq: string }>("SELECT through_seq::text FROM lock_events_pruned WHERE company_id = $1", [co.id])).through_seq).toBe("42");
      expect(await h.sql("SELECT name FROM lock_event_partitions WHERE detach_pending")).toEqual([{ name: pending }]);
    } finally {
      await reader.query("COMMIT").catch(() => {});
      await reader.end();
    }
    const next = await pruneLedger(h.database.url, 30);
    expect(next).toMatchObject({ dropped: [pending], failures: [] });
    expect(await h.sql("SELECT 1 FROM pg_class WHERE relname = ANY($1)", [[pending, leftBehind]])).toEqual([]);
  });

  it("keeps everything with 0 days, and lets one pass work at a time", async () => {
    const doomed = await backdatedDay(50, [{ companyId: co.id, seq: 41 }]);
    expect((await pruneLedger(h.database.url, 0)).dropped).toEqual([]);
    expect(await partitions()).toContain(doomed);
    const holder = new pg.Client({ connectionString: h.database.url });
    await holder.connect();
    try {
      await holder.query("SELECT pg_advisory_lock(7290012)");
      expect(await pruneLedger(h.database.url, 30)).toEqual({ dropped: [], created: [], companies: 0, ran: false, failures: [] });
    } finally {
      await holder.end();
    }
    expect((await pruneLedger(h.database.url, 30)).dropped).toEqual([doomed]);
  });
});

// docs/invariants.md #16: retention never skips a reader forward, and never makes a claim wait
describe("runs", () => {
  it("deletes finished runs past the window that no issue refers to, in batches, and nothing else", async () => {
    const agentId = co.agents[0]!.id;
    // Many old finished runs (more than one batch), made directly.
    await h.sql(
      `INSERT INTO heartbeat_runs (company_id, agent_id, status, started_at, last_heartbeat_at, lease_expires_at, finished_at)
       SELECT $1, $2, 'SUCCEEDED', now() - interval '41 days', now() - interval '41 days', now() - interval '41 days', now() - interval '40 days'
         FROM generate_series(1, ${RUN_BATCH * 2 + 5})`,
      [co.id, agentId],
    );
    // Old but running; old and timed out but still holding an issue (before the sweep frees it); recent and finished.
    const keep = await h.sql<{ id: string }>(
      `INSERT INTO heartbeat_runs (company_id, agent_id, status, started_at, last_heartbeat_at, lease_expires_at, finished_at)
       VALUES ($1, $2, 'RUNNING', now() - interval '41 days', now() - interval '41 days', now() + interval '1 hour', NULL),
              ($1, $2, 'TIMED_OUT', now() - interval '41 days', now() - interval '41 days', now() - interval '41 days', now() - interval '40 days'),
              ($1, $2, 'FAILED', now() - interval '2 days', now() - interval '2 days', now() - interval '2 days', now() - interval '1 day')
       RETURNING id`,
      [co.id, agentId],
    );
    await h.sql(
      `INSERT INTO issues (company_id, title, status, checkout_run_id, claimed_at, attempt_count, lock_epoch) VALUES ($1, 'held by a dead run', 'CLAIMED', $2, now(), 1, 1)`,
      [co.id, keep[1]!.id],
    );
    const before = (await h.one<{ n: number }>("SELECT count(*)::int AS n FROM heartbeat_runs")).n;

    expect(await pruneRuns(h.db.prisma, 0)).toBe(0);
    expect(await pruneRuns(h.db.prisma, 30)).toBe(RUN_BATCH * 2 + 5);

    expect((await h.one<{ n: number }>("SELECT count(*)::int AS n FROM heartbeat_runs")).n).toBe(before - (RUN_BATCH * 2 + 5));
    const left = await h.sql<{ id: string }>("SELECT id FROM heartbeat_runs WHERE id = ANY($1)", [keep.map((r) => r.id)]);
    expect(left).toHaveLength(3);
    expect(await pruneRuns(h.db.prisma, 30)).toBe(0);
  });
});

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
