// disableAgent and a sweep's time-outs both end an agent's expired runs, each
// in one statement over many run rows: the agent's runs end all by one or all
// by the other, never some TIMED_OUT and the rest CANCELLED, which no serial
// order gives. The sweep takes the agent's row FOR SHARE with its runs
// (docs/invariants.md #6): an agent being disabled is passed over, or waited
// for, as a whole.
//
// The stagger: a gate connection holds the first of A's runs FOR SHARE, so
// DISABLE_AGENT (its agent row locked) waits on that run before it has changed
// any; the sweep starts meanwhile (its busy pass would reach A's other runs
// first); then the gate opens.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DisableAgentDocument } from "../../src/client/generated/graphql.js";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

/** Waits (at most 10 s) until `n` statements of this database wait on a lock. */
async function untilWaiting(n: number): Promise<void> {
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    const [row] = await h.sql<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
    if (row!.n >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${n} statements were not waiting on a lock within 10 s`);
}

it("a sweep beside disableAgent ends the agent's expired runs all by one or all by the other, never some each", async () => {
  const co = await createCompany(h, 2);
  const [a, b] = co.agents;
  // A's runs made directly, so that DISABLE_AGENT (physical order) meets the gated run first
  // while the sweep's busy pass (id order) meets the others first.
  const aRuns = ["ffffffff-ffff-4fff-bfff-ffffffffffff", "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"];
  for (const id of aRuns) {
    await h.sql(
      `INSERT INTO heartbeat_runs (id, company_id, agent_id, status, started_at, last_heartbeat_at, lease_expires_at)
       VALUES ($1, $2, $3, 'RUNNING', now(), now(), now() - interval '1 minute')`,
      [id, co.id, a!.id],
    );
  }
  const bRuns: string[] = [];
  for (let i = 0; i < 2; i++) bRuns.push((await b!.client.ok(Ops.StartRunDocument)).startRun.id);
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 minute' WHERE id = ANY($1)", [bRuns]);

  const gate = new pg.Client({ connectionString: h.database.url });
  await gate.connect();
  let disabled: Promise<unknown>;
  let swept: Promise<{ timedOutRuns: number }>;
  try {
    await gate.query("BEGIN");
    await gate.query("SELECT 1 FROM heartbeat_runs WHERE id = $1 FOR SHARE", [aRuns[0]]);
    disabled = co.board.ok(DisableAgentDocument, { agentId: a!.id, reason: "operator" });
    await untilWaiting(1); // DISABLE_AGENT, on A's first run
    swept = sweep(h.db.prisma, { publish() {} });
    await untilWaiting(2); // the sweep, on A's row or runs
  } finally {
    await gate.query("COMMIT");
    await gate.end();
  }
  await disabled!;
  const counts = await swept!;

  const statuses = await h.sql<{ status: string }>("SELECT status::text FROM heartbeat_runs WHERE id = ANY($1) ORDER BY id", [aRuns]);
  expect(new Set(statuses.map((s) => s.status)).size, JSON.stringify(statuses)).toBe(1);
  // The sweep came second for A (it started while A was being disabled): B's two runs only.
  expect(statuses[0]!.status).toBe("CANCELLED");
  expect(counts.timedOutRuns).toBe(2);
  const bStatuses = await h.sql<{ status: string }>("SELECT status::text FROM heartbeat_runs WHERE id = ANY($1)", [bRuns]);
  expect(bStatuses.map((s) => s.status)).toEqual(["TIMED_OUT", "TIMED_OUT"]);
});
