// The ledger's days ahead (docs/operations.md, "Retention"): every day from
// today to a week ahead is held by a partition whatever exists beyond or
// between, and baton_ledger_partitions_ahead_days counts only the days held
// without a gap from now.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FleetSnapshots } from "../../src/reads/fleetSnapshot.js";
import { PARTITION_DAYS_AHEAD, ensureLedgerPartitions } from "../../src/retention/partitions.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

let h: Harness;
let co: Company;

const DAY_MS = 86_400_000;
/** UTC midnight `days` after today's (negative: before). */
const utcDay = (days: number) => new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS + days * DAY_MS);
const partitionName = (day: Date) => `lock_events_${day.toISOString().slice(0, 10).replaceAll("-", "")}`;

/** The ledger's partitions in time order (a DEFAULT partition last), with their bounds. */
async function partitions(): Promise<{ name: string; from: string | null; to: string | null }[]> {
  const rows = await h.sql<{ name: string; from_at: Date | null; to_at: Date | null }>(
    "SELECT name, from_at, to_at FROM lock_event_partitions ORDER BY to_at NULLS LAST",
  );
  return rows.map((p) => ({ name: p.name, from: p.from_at?.toISOString() ?? null, to: p.to_at?.toISOString() ?? null }));
}

async function attach(name: string, from: Date, to: Date): Promise<void> {
  await h.sql(`CREATE TABLE ${name} (LIKE lock_events INCLUDING DEFAULTS)`);
  await h.sql(`ALTER TABLE lock_events ATTACH PARTITION ${name} FOR VALUES FROM ('${from.toISOString()}') TO ('${to.toISOString()}')`);
}

/** Detaches (and, unless `keep`, drops) every partition that starts at or after `from` and before `to`. */
async function remove(from: Date, to = new Date(8.64e15), keep = false): Promise<string[]> {
  const found = await h.sql<{ name: string }>("SELECT name FROM lock_event_partitions WHERE from_at >= $1 AND from_at < $2 ORDER BY from_at", [from, to]);
  const gone = found.map((r) => r.name);
  for (const name of gone) {
    await h.sql(`ALTER TABLE lock_events DETACH PARTITION ${name}`);
    if (!keep) await h.sql(`DROP TABLE ${name}`);
  }
  return gone;
}

/** Today to PARTITION_DAYS_AHEAD after it, a partition a day, made by hand; nothing else from today on. */
async function freshWeek(): Promise<void> {
  await remove(utcDay(0));
  for (let d = 0; d <= PARTITION_DAYS_AHEAD; d++) await attach(partitionName(utcDay(d)), utcDay(d), utcDay(d + 1));
}

/** What ENSURE_LEDGER_PARTITIONS made, on a connection of its own. */
async function ensure(): Promise<string[]> {
  const client = new pg.Client({ connectionString: h.database.url });
  await client.connect();
  try {
    return await ensureLedgerPartitions(client);
  } finally {
    await client.end();
  }
}

/** baton_ledger_partitions_ahead_days as /metrics reads it, from a fresh snapshot. */
const daysAhead = async () => (await new FleetSnapshots(h.db.prisma).read()).ledgerDaysAhead;

/** Every UTC day from today to PARTITION_DAYS_AHEAD after it: whether partitions hold all of it (ranges never overlap). */
async function daysHeld(): Promise<boolean[]> {
  const rows = await h.sql<{ held: boolean }>(
    `SELECT coalesce(sum(least(p.to_at, d + interval '1 day') - greatest(coalesce(p.from_at, '-infinity'), d)), interval '0') = interval '1 day' AS held
       FROM generate_series($1::timestamptz, $2::timestamptz, interval '1 day') d
       LEFT JOIN lock_event_partitions p ON coalesce(p.from_at, '-infinity') < d + interval '1 day' AND p.to_at > d
      GROUP BY d ORDER BY d`,
    [utcDay(0), utcDay(PARTITION_DAYS_AHEAD)],
  );
  return rows.map((r) => r.held);
}

/** A claim through the lock verb of a fresh issue: its __typename, or the error it met. */
async function claimOne(title: string, prepared?: { runId: string; issueId: string }): Promise<string> {
  const agent = co.agents[0]!;
  const ids = prepared ?? (await prepare(title));
  const res = await agent.client.request(Ops.ClaimIssueDocument, ids);
  return res.errors?.length ? `error: ${res.errors[0]!.message}` : res.data!.claimIssue.__typename;
}

async function prepare(title: string): Promise<{ runId: string; issueId: string }> {
  const agent = co.agents[0]!;
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title, assigneeAgentId: agent.id } });
  return { runId: run.id, issueId: createIssue.id };
}

beforeAll(async () => {
  h = await startHarness();
  co = await createCompany(h, 1);
  await ensure();
});
afterAll(() => h?.close());

// docs/invariants.md #16: an append always finds a partition
describe("the ledger's days ahead", () => {
  it("are all made after a partition 40 days ahead (a forward jump of the clock), which stays as it is; the gauge counts from today, not from the newest", async () => {
    const ids = await prepare("after the jump");
    await remove(utcDay(0));
    await attach(partitionName(utcDay(40)), utcDay(40), utcDay(41));
    const far = (await partitions()).at(-1);
    // Nothing holds today: the gauge reads 0 (the newest partition ends 41 days from today), and a claim fails.
    expect(await daysAhead()).toBe(0);
    expect(await claimOne("", ids)).toMatch(/^error: /);

    const made = await ensure();

    const week = Array.from({ length: PARTITION_DAYS_AHEAD + 1 }, (_, d) => partitionName(utcDay(d)));
    expect(made).toEqual(week);
    expect(await daysHeld()).toEqual(week.map(() => true));
    expect((await partitions()).at(-1)).toEqual(far);
    expect(await claimOne("", ids)).toBe("IssueClaimed");
    expect(await claimOne("a second")).toBe("IssueClaimed");
    const ahead = await daysAhead();
    expect(ahead).toBeGreaterThan(PARTITION_DAYS_AHEAD);
    expect(ahead).toBeLessThanOrEqual(PARTITION_DAYS_AHEAD + 1);
    expect(await ensure()).toEqual([]);
  });

  it("fill a gap between the days ahead, a part of a day included; until then the gauge reads up to the gap", async () => {
    // Day +3 detached (its table stays, no partition), day +5 held only from noon.
    await freshWeek();
    expect(await remove(utcDay(3), utcDay(4), true)).toEqual([partitionName(utcDay(3))]);
    expect(await remove(utcDay(5), utcDay(6))).toEqual([partitionName(utcDay(5))]);
    const noon = new Date(utcDay(5).getTime() + DAY_MS / 2);
    await attach(`${partitionName(utcDay(5))}_afternoon`, noon, utcDay(6));
    const before = await partitions();
    const ahead = await daysAhead();
    expect(ahead).toBeGreaterThan(2);
    expect(ahead).toBeLessThanOrEqual(3);

    const made = await ensure();

    // The detached table keeps its name; the morning of day +5 is a partition of its own.
    expect(made).toEqual([`${partitionName(utcDay(3))}_2`, partitionName(utcDay(5))]);
    const after = await partitions();
    for (const p of before) expect(after).toContainEqual(p);
    expect(after).toContainEqual({ name: partitionName(utcDay(5)), from: utcDay(5).toISOString(), to: noon.toISOString() });
    expect(await daysHeld()).toEqual(Array.from({ length: PARTITION_DAYS_AHEAD + 1 }, () => true));
    expect(await daysAhead()).toBeGreaterThan(PARTITION_DAYS_AHEAD);
    expect(await claimOne("after the gap")).toBe("IssueClaimed");
  });

  it("leave the history partition and a DEFAULT partition's days to them, and make the others", async () => {
    // A ledger as the migration to partitions leaves it when its newest event is today: the history holds up to tomorrow.
    for (const { name } of await h.sql<{ name: string }>("SELECT name FROM lock_event_partitions")) {
      await h.sql(`ALTER TABLE lock_events DETACH PARTITION ${name}`);
      await h.sql(`DROP TABLE ${name}`);
    }
    await h.sql(`DROP TABLE IF EXISTS ${partitionName(utcDay(3))}`); // left detached above
    await h.sql("CREATE TABLE lock_events_history (LIKE lock_events INCLUDING DEFAULTS)");
    await h.sql(`ALTER TABLE lock_events ATTACH PARTITION lock_events_history FOR VALUES FROM (MINVALUE) TO ('${utcDay(1).toISOString()}')`);
    // A DEFAULT partition (Baton makes none) that holds an event of day +2.
    await h.sql("CREATE TABLE lock_events_default PARTITION OF lock_events DEFAULT");
    await h.sql(`INSERT INTO lock_events (company_id, seq, issue_id, kind, status, at) VALUES ($1, 1, gen_random_uuid(), 'CLAIMED', 'CLAIMED', $2)`, [
      co.id,
      new Date(utcDay(2).getTime() + 3_600_000),
    ]);

    const made = await ensure();

    expect(made).toEqual([1, 3, 4, 5, 6, 7].map((d) => partitionName(utcDay(d))));
    expect((await partitions()).slice(0, 2)).toEqual([
      { name: "lock_events_history", from: null, to: utcDay(1).toISOString() },
      { name: partitionName(utcDay(1)), from: utcDay(1).toISOString(), to: utcDay(2).toISOString() },
    ]);
    // The gauge counts days, not the DEFAULT partition: up to day +2.
    const ahead = await daysAhead();
    expect(ahead).toBeGreaterThan(1);
    expect(ahead).toBeLessThanOrEqual(2);
    expect(await claimOne("beside the default")).toBe("IssueClaimed");

    // Its event gone, day +2 is made like any other.
    await h.sql("ALTER TABLE lock_events DETACH PARTITION lock_events_default");
    await h.sql("DROP TABLE lock_events_default");
    expect(await ensure()).toEqual([partitionName(utcDay(2))]);
    expect(await daysAhead()).toBeGreaterThan(PARTITION_DAYS_AHEAD);
  });
});
