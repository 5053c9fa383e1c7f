// The database as migrated (src/db/migrate.ts, prisma/migrations): Prisma's
// bookkeeping, schema.prisma in step with the SQL, and the constraints that
// make a broken lock pair impossible. (schema.graphql in step with the code:
// test/graphql/schema.test.ts.)
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrate, readMigrations } from "../../src/db/migrate.js";
import { ensureLedgerPartitions } from "../../src/retention/partitions.js";
import { createTestDatabase, withAdmin } from "../helpers/db.js";
import type { TestDatabase } from "../helpers/db.js";
import { race } from "../helpers/race.js";
import { claimable } from "../../src/locks/shared/fragments.js";

let database: TestDatabase;
let client: pg.Client;

beforeAll(async () => {
  database = await createTestDatabase();
  client = new pg.Client({ connectionString: database.url });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await database?.drop();
});

describe("migrations", () => {
  it("are recorded in _prisma_migrations exactly as Prisma records them", async () => {
    const migrations = await readMigrations();
    const { rows } = await client.query(
      "SELECT migration_name, checksum, finished_at, rolled_back_at, applied_steps_count FROM _prisma_migrations ORDER BY migration_name",
    );
    expect(rows.map((r) => r.migration_name)).toEqual(migrations.map((m) => m.name));
    for (const [i, row] of rows.entries()) {
      expect(row.checksum).toBe(migrations[i]!.checksum);
      expect(row.checksum).toMatch(/^[0-9a-f]{64}$/);
      expect(row.finished_at).not.toBeNull();
      expect(row.rolled_back_at).toBeNull();
      expect(row.applied_steps_count).toBe(1);
    }
  });

  it("apply once when several processes migrate a fresh database at the same time", async () => {
    const name = `baton_test_migrate_${process.pid}`;
    await withAdmin((c) => c.query(`CREATE DATABASE "${name}"`));
    const url = new URL(database.url);
    url.pathname = `/${name}`;
    try {
      const applied = await race(4, () => migrate(url.toString()));
      expect(applied.flat()).toEqual((await readMigrations()).map((m) => m.name));
      const again = await migrate(url.toString());
      expect(again).toEqual([]);
    } finally {
      await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    }
  });

  it("keep the events of a ledger written before retention, readable in seq order, with new days partitioned ahead", async () => {
    const name = `baton_test_upgrade_${process.pid}`;
    await withAdmin((c) => c.query(`CREATE DATABASE "${name}"`));
    const url = new URL(database.url);
    url.pathname = `/${name}`;
    const dir = mkdtempSync(path.join(tmpdir(), "baton-migrations-"));
    const upgraded = new pg.Client({ connectionString: url.toString() });
    try {
      // The migrations before retention, then a ledger as they left it: events over the last 40 days.
      const all = await readMigrations();
      const before = all.filter((m) => m.name < "20261202000000_ledger_retention");
      expect(before.length).toBe(all.length - 1 - all.filter((m) => m.name > "20261202000000_ledger_retention").length);
      for (const m of before) {
        mkdirSync(path.join(dir, m.name));
        writeFileSync(path.join(dir, m.name, "migration.sql"), m.sql);
      }
      await migrate(url.toString(), dir);
      await upgraded.connect();
      await upgraded.query(
        `INSERT INTO lock_events (company_id, seq, issue_id, kind, status, at)
         SELECT '00000000-0000-4000-8000-000000000001', g, gen_random_uuid(), 'CLAIMED', 'CLAIMED', now() - interval '40 days' + g * interval '1 hour'
           FROM generate_series(1, 900) g`,
      );
      const rows = async () => (await upgraded.query<{ seq: string }>("SELECT e.seq::text FROM lock_events e ORDER BY e.seq")).rows.map((r) => r.seq);
      const written = await rows();

      await migrate(url.toString());
      await ensureLedgerPartitions(url.toString()); // as every process that opens the database does (src/bin/database.ts)

      expect(await rows()).toEqual(written);
      const { rows: parts } = await upgraded.query<{ name: string; from_at: Date | null; to_at: Date }>(
        "SELECT name, from_at, to_at FROM lock_event_partitions ORDER BY to_at",
      );
      expect(parts[0]).toMatchObject({ name: "lock_events_history", from_at: null });
      // The history ends at the midnight after its newest event (900 hours after 40 days ago); a partition a day follows from today to a week ahead.
      const today = Math.floor(Date.now() / 86_400_000) * 86_400_000;
      const { rows: newest } = await upgraded.query<{ at: Date }>("SELECT max(at) AS at FROM lock_events");
      expect(parts[0]!.to_at.getTime()).toBe(Math.floor(newest[0]!.at.getTime() / 86_400_000) * 86_400_000 + 86_400_000);
      expect(parts[1]!.from_at!.getTime()).toBe(today);
      expect(parts.at(-1)!.to_at.getTime()).toBe(today + 8 * 86_400_000);
      for (let i = 2; i < parts.length; i++) expect(parts[i]!.from_at!.getTime()).toBe(parts[i - 1]!.to_at.getTime());
      // A new event lands in today's partition, after every old one.
      await upgraded.query(
        `INSERT INTO lock_events (company_id, seq, issue_id, kind, status) VALUES ('00000000-0000-4000-8000-000000000001', 1000, gen_random_uuid(), 'CLAIMED', 'CLAIMED')`,
      );
      expect((await rows()).at(-1)).toBe("1000");
    } finally {
      await upgraded.end().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
      await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    }
  });

  it("upgrade a database with work in flight to the work graph in place: every claimable issue stays claimable, keys' turns intact", async () => {
    const name = `baton_test_graph_upgrade_${process.pid}`;
    await withAdmin((c) => c.query(`CREATE DATABASE "${name}"`));
    const url = new URL(database.url);
    url.pathname = `/${name}`;
    const dir = mkdtempSync(path.join(tmpdir(), "baton-migrations-"));
    const upgraded = new pg.Client({ connectionString: url.toString() });
    try {
      const before = (await readMigrations()).filter((m) => m.name < "20261206000000_work_graph");
      for (const m of before) {
        mkdirSync(path.join(dir, m.name));
        writeFileSync(path.join(dir, m.name, "migration.sql"), m.sql);
      }
      await migrate(url.toString(), dir);
      await upgraded.connect();
      // a company as the migrations before left it: OPEN work in keys and in the pool, some of it done, some exhausted
      const {
        rows: [co],
      } = await upgraded.query("INSERT INTO companies (name) VALUES ('before') RETURNING id");
      await upgraded.query(
        `INSERT INTO issues (company_id, title, status, priority, concurrency_key, attempt_count)
         SELECT $1, 'i' || g, (CASE WHEN g % 5 = 0 THEN 'DONE' ELSE 'OPEN' END)::issue_status,
                (enum_range(NULL::issue_priority))[1 + g % 4], CASE WHEN g % 3 = 0 THEN '' ELSE 'k' || (g % 7) END,
                CASE WHEN g % 11 = 0 THEN 3 ELSE 0 END
           FROM generate_series(1, 400) g`,
        [co.id],
      );
      const claimableNow = async (predicate: string) =>
        (await upgraded.query<{ ids: string[] }>(`SELECT coalesce(array_agg(i.id ORDER BY i.id), '{}') AS ids FROM issues i WHERE ${predicate}`)).rows[0]!.ids;
      const turns = async () =>
        (await upgraded.query("SELECT key, top_priority, active FROM concurrency_keys WHERE company_id = $1 ORDER BY key", [co.id])).rows;
      const was = await claimableNow("i.status = 'OPEN' AND i.attempt_count < i.max_attempts");
      const keysWere = await turns();

      await migrate(url.toString());

      expect(was.length).toBeGreaterThan(200);
      expect(await claimableNow(claimable("i"))).toEqual(was);
      expect(await turns()).toEqual(keysWere);
      expect(await upgraded.query("SELECT count(*)::int AS n FROM issues WHERE waiting_count <> 0 OR delayed OR not_before IS NOT NULL")).toMatchObject({
        rows: [{ n: 0 }],
      });
    } finally {
      await upgraded.end().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
      await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    }
  });

  it("every model and column of schema.prisma exists in the migrated database", async () => {
    const prisma = readFileSync(new URL("../../prisma/schema.prisma", import.meta.url), "utf8");
    const models = [...prisma.matchAll(/^model (\w+) \{([\s\S]*?)^\}/gm)];
    expect(models.length).toBeGreaterThan(5);
    const modelNames = new Set(models.map((m) => m[1]!));
    for (const [, model, body] of models) {
      const table = /@@map\("(\w+)"\)/.exec(body!)?.[1] ?? model!;
      const { rows } = await client.query<{ column_name: string }>(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1",
        [table],
      );
      const columns = new Set(rows.map((r) => r.column_name));
      expect(columns.size, `table ${table} for model ${model}`).toBeGreaterThan(0);
      for (const line of body!.split("\n")) {
        const field = /^\s+(\w+)\s+(\w+)(\?|\[\])?/.exec(line);
        if (!field || modelNames.has(field[2]!)) continue; // relation fields are not columns
        const column = /@map\("(\w+)"\)/.exec(line)?.[1] ?? field[1]!;
        expect(columns.has(column), `${table}.${column} (${model}.${field[1]})`).toBe(true);
      }
    }
  });
});

describe("the ledger's clock", () => {
  // docs/invariants.md #12: no reader is given a seq below which an event can still appear
  it("refuses a database whose issue stamps are ahead of this cluster's transaction ids (a logical copy), and starts once they are not", async () => {
    const {
      rows: [company],
    } = await client.query("INSERT INTO companies (name) VALUES ('copied') RETURNING id");
    const {
      rows: [issue],
    } = await client.query(
      "INSERT INTO issues (company_id, title, last_event_xid) VALUES ($1, 'from another cluster', (pg_current_xact_id()::text::bigint + 1000000)::text::xid8) RETURNING id",
      [company.id],
    );
    await expect(migrate(database.url)).rejects.toThrow(/ledger is ahead of this cluster's transaction ids/);
    await client.query("DELETE FROM issues WHERE id = $1", [issue.id]);
    await expect(migrate(database.url)).resolves.toEqual([]);
  });
});

describe("constraints", () => {
  async function companyAndIssue() {
    const {
      rows: [company],
    } = await client.query("INSERT INTO companies (name) VALUES ('c') RETURNING id");
    const {
      rows: [issue],
    } = await client.query("INSERT INTO issues (company_id, title) VALUES ($1, 't') RETURNING id", [company.id]);
    return issue.id as string;
  }

  // docs/invariants.md #1: at most one run holds an issue's checkout
  // docs/invariants.md #2: no attempt of an issue is worked by two runs
  // docs/invariants.md #3: the two locks change together with the status, in one row update
  // docs/invariants.md #14: keys and names
  it("make a half-released or mismatched lock pair impossible, even for a buggy statement", async () => {
    const id = await companyAndIssue();
    const run = "11111111-1111-4111-8111-111111111111";
    const other = "22222222-2222-4222-8222-222222222222";
    const broken = [
      `UPDATE issues SET status = 'CLAIMED' WHERE id = $1`,
      `UPDATE issues SET status = 'OPEN', checkout_run_id = '${run}', claimed_at = now() WHERE id = $1`,
      `UPDATE issues SET status = 'CLAIMED', checkout_run_id = '${run}', claimed_at = now(), execution_run_id = '${run}', execution_agent_name_key = 'a', execution_locked_at = now() WHERE id = $1`,
      `UPDATE issues SET status = 'IN_PROGRESS', checkout_run_id = '${run}', claimed_at = now(), execution_run_id = '${other}', execution_agent_name_key = 'a', execution_locked_at = now() WHERE id = $1`,
      `UPDATE issues SET status = 'IN_PROGRESS', checkout_run_id = '${run}', claimed_at = now(), execution_run_id = '${run}' WHERE id = $1`,
      `UPDATE issues SET status = 'DONE', execution_run_id = '${run}', execution_agent_name_key = 'a', execution_locked_at = now() WHERE id = $1`,
      `UPDATE issues SET max_attempts = 0 WHERE id = $1`,
      `UPDATE issues SET title = '' WHERE id = $1`,
    ];
    for (const statement of broken) {
      await expect(client.query(statement, [id]), statement).rejects.toThrow(/violates check constraint/);
    }
    await client.query(
      `UPDATE issues SET status = 'IN_PROGRESS', checkout_run_id = '${run}', claimed_at = now(), execution_run_id = '${run}', execution_agent_name_key = 'a', execution_locked_at = now() WHERE id = $1`,
      [id],
    );
  });

  it("the claim uses the claim index, whatever else the table holds (waiting and delayed issues included)", async () => {
    const {
      rows: [company],
    } = await client.query("INSERT INTO companies (name) VALUES ('big') RETURNING id");
    await client.query(
      `INSERT INTO issues (company_id, title, status) SELECT $1, 't', CASE WHEN g % 10 = 0 THEN 'OPEN' ELSE 'DONE' END::issue_status FROM generate_series(1, 20000) g`,
      [company.id],
    );
    // OPEN issues that are not ready: waiting on blockers, and delayed (the claim index leaves both out)
    await client.query(
      `INSERT INTO issues (company_id, title, status, waiting_count, not_before, delayed)
       SELECT $1, 'w', 'OPEN', (g % 2), CASE WHEN g % 2 = 0 THEN now() + interval '1 day' END, g % 2 = 0 FROM generate_series(1, 20000) g`,
      [company.id],
    );
    await client.query("ANALYZE issues");
    const { rows } = await client.query(
      `EXPLAIN SELECT id FROM issues i WHERE i.company_id = $1 AND ${claimable("i")}
         AND i.assignee_agent_id IS NULL ORDER BY i.priority, i.created_at, i.id LIMIT 1 FOR UPDATE SKIP LOCKED`,
      [company.id],
    );
    const plan = rows.map((r) => r["QUERY PLAN"]).join("\n");
    expect(plan).toMatch(/Index Scan using issues_(claimable|pool)_idx/);
    expect(plan).not.toMatch(/Sort/);
  });
});
