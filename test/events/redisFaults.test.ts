// Redis killed again and again under a real API process: while subscriptions
// are being opened (SUBSCRIBE in flight), closed (UNSUBSCRIBE), and events
// published, and at shutdown. Node ends a process on an unhandled promise
// rejection, so "nothing went unhandled" is: the process never exits, answers
// throughout, prints no stack, and a SIGTERM with Redis down still exits 0.
// The recovery process, publishing to a dead Redis, exits 0 too.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Client, createCompany, Ops } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";
import { PrivateRedis } from "../helpers/redis.js";
import { startServerProcess } from "../helpers/serverProcess.js";
import type { ServerProcess } from "../helpers/serverProcess.js";
import { Subscriber } from "../helpers/subscriber.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
let redis: PrivateRedis;
let server: ServerProcess;
const subscribers: Subscriber<unknown>[] = [];

beforeAll(async () => {
  redis = await PrivateRedis.start();
  server = await startServerProcess({ REDIS_URL: redis.url });
});
afterAll(async () => {
  for (const s of subscribers) await s.close().catch(() => {});
  await server?.stop();
  await redis?.kill();
});

const healthy = async () => (await fetch(`${server.origin}/healthz`)).status === 200;
/** What a crash or an unhandled rejection leaves in the output, printed or inside a JSON log line. */
const STACK = /Unhandled|unhandled|\n\s+at .+:\d+:\d+|\\n\s+at /;

it("keeps serving while Redis dies during subscribes, unsubscribes and publishes, round after round", async () => {
  const api = { admin: new Client(server.url, server.adminToken), client: (token: string | null) => new Client(server.url, token) };
  const co = await createCompany(api, 1);
  const agent = co.agents[0]!;
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const open = (n: number) => {
    for (let i = 0; i < n; i++) {
      const s = new Subscriber<unknown>(server.url, co.board.token);
      if (i % 2 === 0) s.start(Ops.LockChangedDocument as never, { companyId: co.id, afterSeq: "0" } as never);
      else s.start(Ops.IssuesChangedDocument as never, { companyId: co.id } as never);
      subscribers.push(s);
    }
  };
  for (let round = 0; round < 4; round++) {
    open(6); // SUBSCRIBEs in flight
    await redis.kill();
    // Publishes to a dead Redis: the mutations still commit.
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: `round ${round}`, assigneeAgentId: agent.id } });
    const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id });
    expect(claimIssue.__typename).toBe("IssueClaimed");
    // UNSUBSCRIBEs and SUBSCRIBEs while it is down.
    for (const s of subscribers.splice(0, 3)) await s.close();
    open(2);
    expect(await healthy()).toBe(true);
    await redis.restart();
    await eventually(async () => ((await fetch(`${server.origin}/readyz`)).status === 200 ? true : undefined), "the API to see Redis again", 20_000);
    expect(server.alive()).toBe(true);
  }
  expect(server.output()).not.toMatch(STACK);
});

it("stops cleanly on SIGTERM with Redis down and subscriptions open: exit 0, no stack", async () => {
  await redis.kill();
  expect(await healthy()).toBe(true);
  expect(await server.terminate()).toBe(0);
  expect(server.output()).not.toMatch(STACK);
});

it("runs recovery --once against a dead Redis: it frees the dead run's locks, cannot publish, says so, and exits 0", async () => {
  const db = new pg.Client({ connectionString: server.database.url });
  await db.connect();
  try {
    const held = await db.query("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE status = 'RUNNING' RETURNING id");
    expect(held.rowCount).toBe(1);
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ["--import", "tsx", "src/bin/recovery.ts", "--once"], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: server.database.url, REDIS_URL: redis.url },
      timeout: 60_000,
    });
    const output = `${stdout}${stderr}`;
    expect(output).not.toMatch(STACK);
    expect(output).toContain("lock event publish failed");
    const { rows } = await db.query("SELECT count(*)::int AS n FROM issues WHERE checkout_run_id IS NOT NULL");
    expect(rows[0].n).toBe(0);
  } finally {
    await db.end();
  }
});
