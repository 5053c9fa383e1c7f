// Run retention: finished runs pile up (one per agent session, for ever), and
// nothing reads them once no issue points at them. They are deleted in small
// batches, so no statement holds many row locks or runs for long.
import type { Queryable } from "../db/client.js";
import { queryOne, sql, statement } from "../db/sql.js";

/** Runs deleted per statement: each batch is a short transaction. */
export const RUN_BATCH = 1000;
/** Batches per pass; the rest waits for the next pass. */
const MAX_BATCHES = 100;

/**
 * Deletes finished runs older than `retentionDays` (by finished_at) that no
 * issue refers to, in batches of RUN_BATCH; returns how many. 0 days keeps
 * every run. A RUNNING run is never touched, whatever its age.
 */
export async function pruneRuns(db: Queryable, retentionDays: number, shouldStop: () => boolean = () => false): Promise<number> {
  if (retentionDays <= 0) return 0;
  let deleted = 0;
  for (let batch = 0; batch < MAX_BATCHES && !shouldStop(); batch++) {
    const row = await queryOne<{ n: number }>(
      db,
      // Only finished runs (a finished run is dead for ever: no lock
      // statement gives it anything again), and only those no issue holds. The check
      // on checkout_run_id covers the execution lock too: issues_lock_pair keeps
      // execution_run_id either NULL or equal to checkout_run_id. SKIP LOCKED: a run a
      // statement is looking at right now is left for the next pass.
      statement(
        "PRUNE_FINISHED_RUNS",
        sql`
        WITH doomed AS (
          SELECT r.id FROM heartbeat_runs r
           WHERE r.status <> 'RUNNING' AND r.finished_at < now() - make_interval(days => ${retentionDays}::int)
             AND NOT EXISTS (SELECT 1 FROM issues i WHERE i.checkout_run_id = r.id)
           ORDER BY r.finished_at
           LIMIT ${RUN_BATCH}::int
           FOR UPDATE OF r SKIP LOCKED
        ), gone AS (
          DELETE FROM heartbeat_runs r USING doomed d WHERE r.id = d.id RETURNING 1
        )
        SELECT count(*)::int AS n FROM gone`,
      ),
    );
    deleted += row.n;
    if (row.n < RUN_BATCH) break;
  }
  return deleted;
}
