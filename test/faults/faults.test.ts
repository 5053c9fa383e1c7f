// The fault suite: agents under load while the system around them fails, each
// fault against real processes. After each: every call got an answer or a
// transport error (never an INTERNAL_SERVER_ERROR), one recovery sweep leaves
// the audit at zero, and the history checker finds the ledger, the rows and
// everything the agents were told consistent: no issue held twice.
//   - SIGKILL of one of two API instances;
//   - API↔PostgreSQL connections cut mid-statement (a proxy the test controls);
//   - PostgreSQL restarted (a private cluster the test creates: never the
//     machine's shared server);
//   - Redis killed and restarted, again and again (a private redis-server).
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { connectDb } from "../../src/db/client.js";
import { createInProcessBus } from "../../src/events/bus.js";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { createTestDatabase } from "../helpers/db.js";
import type { TestDatabase } from "../helpers/db.js";
import { Client, createCompany, Ops } from "../helpers/harness.js";
import type { Company } from "../helpers/harness.js";
import { checkHistory } from "../../support/history.js";
import { startLoad } from "../helpers/load.js";
import type { LoadOutcome } from "../helpers/load.js";
import { startPgProxy } from "../helpers/pgProxy.js";
import { eventually } from "../helpers/race.js";
import { PrivateRedis, freePort } from "../helpers/redis.js";
import { startServerProcess } from "../helpers/serverProcess.js";
import type { ServerProcess } from "../helpers/serverProcess.js";

const run = promisify(execFile);
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  // FAULTS_REPORT=1 prints how the agents' calls ended in each scenario.
  if (process.env.FAULTS_REPORT) for (const o of outcomes) console.log(JSON.stringify({ ...o, told: o.told.length }));
});

const outcomes: LoadOutcome[] = [];
const AGENTS = 8;
const ISSUES = 2000;

/** A company with AGENTS agents (each assigned its share of ISSUES issues), made through `server`. */
async function company(server: ServerProcess): Promise<Company> {
  const api = { admin: new Client(server.url, server.adminToken), client: (token: string | null) => new Client(server.url, token) };
  const co = await createCompany(api, AGENTS);
  for (let i = 0; i < ISSUES; i += 1000) {
    await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: Array.from({ length: 1000 }, (_, n) => ({ title: `job ${i + n}`, assigneeAgentId: co.agents[(i + n) % AGENTS]!.id })),
    });
  }
  return co;
}

/** Load until `more` further issues are completed after each step of the fault. */
async function underLoad(urls: () => string[], co: Company, fault: Array<() => Promise<unknown>>): Promise<LoadOutcome> {
  const load = startLoad(
    urls,
    co.agents.map((a) => a.client.token!),
  );
  try {
    for (const step of [async () => {}, ...fault]) {
      await step();
      const target = load.completed() + 15;
      await eventually(() => (load.completed() >= target ? true : undefined), "agents to complete work after the fault", 60_000);
    }
  } finally {
    outcomes.push(await load.stop());
  }
  return outcomes.at(-1)!;
}

/** What must hold after every fault. */
async function settled(databaseUrl: string, co: Company, outcome: LoadOutcome) {
  expect(outcome.unexpected).toEqual([]);
  expect(outcome.completed).toBeGreaterThan(0);
  const db = connectDb(databaseUrl, 2, "baton-fault-check");
  try {
    // The runs agents dropped after an unknown outcome are dead for this check: their locks go back.
    await db.prisma.$executeRawUnsafe("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE status = 'RUNNING'");
    await sweep(db.prisma, createInProcessBus());
  } finally {
    await db.close();
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query(
      `SELECT (SELECT count(*)::int FROM issues WHERE company_id = $1 AND checkout_run_id IS NOT NULL) AS held,
              (SELECT count(*)::int FROM issues WHERE company_id = $1 AND status = 'OPEN' AND attempt_count >= max_attempts) AS unescalated,
              (SELECT count(*)::int FROM issues WHERE company_id = $1 AND (execution_run_id IS NOT NULL) <> (status = 'IN_PROGRESS')) AS half`,
      [co.id],
    );
    expect(rows[0]).toEqual({ held: 0, unescalated: 0, half: 0 });
  } finally {
    await client.end();
  }
  expect(await checkHistory(databaseUrl, co.id, outcome.told)).toEqual([]);
}

describe("under load, nothing stays held or half-released and the history checker finds no violation, through", () => {
  it("SIGKILL of one of two API instances", async () => {
    const database: TestDatabase = await createTestDatabase();
    cleanups.push(() => database.drop());
    const a = await startServerProcess({}, { database });
    const b = await startServerProcess({}, { database });
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    const co = await company(b);
    const outcome = await underLoad(() => [a, b].filter((s) => s.alive()).map((s) => s.url), co, [() => a.stop()]);
    expect(a.alive()).toBe(false);
    await settled(database.url, co, outcome);
  });

  it("API↔PostgreSQL connections cut mid-statement, four times", async () => {
    const database = await createTestDatabase();
    cleanups.push(() => database.drop());
    const proxy = await startPgProxy(new URL(database.url));
    cleanups.push(() => proxy.close());
    const server = await startServerProcess({ DATABASE_URL: proxy.url(database.url) }, { database });
    cleanups.push(() => server.stop());
    const co = await company(server);
    const cut = async () => proxy.cutAll();
    const outcome = await underLoad(() => [server.url], co, [cut, cut, cut, cut]);
    expect(server.alive()).toBe(true);
    await settled(database.url, co, outcome);
  });

  it("PostgreSQL restarted under load, twice", async () => {
    const version = (await run("ls", ["/usr/lib/postgresql"])).stdout.trim().split("\n").at(-1)!;
    const cluster = `baton_faults_${process.pid}`;
    const port = await freePort();
    await run("pg_createcluster", [version, cluster, "-p", String(port), "--start", "--", "-A", "trust"]);
    cleanups.push(() => run("pg_dropcluster", [version, cluster, "--stop"]));
    const admin = new pg.Client({ connectionString: `postgresql://postgres@127.0.0.1:${port}/postgres` });
    await admin.connect();
    await admin.query("CREATE DATABASE baton");
    await admin.end();
    const url = `postgresql://postgres@127.0.0.1:${port}/baton`;
    const server = await startServerProcess({ DATABASE_URL: url }, { database: { name: "baton", url, drop: async () => {} } });
    cleanups.push(() => server.stop());
    const co = await company(server);
    const restart = () => run("pg_ctlcluster", [version, cluster, "restart", "-m", "fast"]);
    const outcome = await underLoad(() => [server.url], co, [restart, restart]);
    expect(server.alive()).toBe(true);
    await settled(url, co, outcome);
  });

  it("Redis killed and restarted under load, three times, with two API instances", async () => {
    const redis = await PrivateRedis.start();
    cleanups.push(() => redis.kill());
    const database = await createTestDatabase();
    cleanups.push(() => database.drop());
    const a = await startServerProcess({ REDIS_URL: redis.url }, { database });
    const b = await startServerProcess({ REDIS_URL: redis.url }, { database });
    cleanups.push(
      () => a.stop(),
      () => b.stop(),
    );
    const co = await company(a);
    const bounce = async () => {
      await redis.kill();
      await redis.restart();
    };
    const outcome = await underLoad(() => [a.url, b.url], co, [bounce, bounce, bounce]);
    expect([a.alive(), b.alive()]).toEqual([true, true]);
    await settled(database.url, co, outcome);
  });
});
