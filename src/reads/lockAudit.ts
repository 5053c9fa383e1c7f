// lockAudit: the invariants as numbers, computed by SQL over the real tables
// and the ledger (never from counters kept on the side). All zero when healthy.
import type { Db } from "../db/client.js";
import { queryOne, raw, sql, statement } from "../db/sql.js";
import { claimable, exhaustedOpen, runIsLive } from "../locks/shared/fragments.js";

export interface LockAudit {
  doubleClaims: number;
  locksHeldByDeadRuns: number;
  halfReleasedLocks: number;
  unescalatedExhausted: number;
  miscountedKeys: number;
  waitingOnCancelled: number;
  miscountedWaits: number;
  attemptHistogram: { attemptCount: number; issues: number }[];
}

export async function lockAudit(db: Db, companyId: string): Promise<LockAudit> {
  return queryOne<LockAudit>(
    db,
    statement(
      "READ_LOCK_AUDIT",
      sql`
      SELECT
        -- a CLAIMED event while the issue's previous event left it held by another run
        (SELECT count(*)::int FROM (
           SELECT e.kind, e.run_id,
                  lag(e.checkout_run_id) OVER (PARTITION BY e.issue_id ORDER BY e.seq) AS held_by
             FROM lock_events e WHERE e.company_id = ${companyId}::uuid
         ) x WHERE x.kind = 'CLAIMED' AND x.held_by IS NOT NULL AND x.held_by <> x.run_id) AS "doubleClaims",
        (SELECT count(*)::int FROM issues i
           LEFT JOIN heartbeat_runs c ON c.id = i.checkout_run_id
           LEFT JOIN heartbeat_runs x ON x.id = i.execution_run_id
          WHERE i.company_id = ${companyId}::uuid
            AND ((i.checkout_run_id IS NOT NULL AND NOT ${raw(runIsLive("c"))})
              OR (i.execution_run_id IS NOT NULL AND NOT ${raw(runIsLive("x"))}))) AS "locksHeldByDeadRuns",
        (SELECT count(*)::int FROM issues i
          WHERE i.company_id = ${companyId}::uuid
            AND NOT CASE i.status
                  WHEN 'CLAIMED' THEN i.checkout_run_id IS NOT NULL AND i.execution_run_id IS NULL
                  WHEN 'IN_PROGRESS' THEN i.checkout_run_id IS NOT NULL AND i.execution_run_id = i.checkout_run_id
                  ELSE i.checkout_run_id IS NULL AND i.execution_run_id IS NULL END) AS "halfReleasedLocks",
        (SELECT count(*)::int FROM issues i
          WHERE i.company_id = ${companyId}::uuid AND ${raw(exhaustedOpen("i"))}) AS "unescalatedExhausted",
        -- the keys' trigger keeps active and top_priority (the best unassigned claimable priority); here they are counted from the issues
        (SELECT count(*)::int FROM concurrency_keys k
          WHERE k.company_id = ${companyId}::uuid AND k.key <> ''
            -- (concurrency_key <> '' repeated, so that issues_key_active_idx serves the count)
            AND (k.active <> (SELECT count(*) FROM issues i
                               WHERE i.company_id = k.company_id AND i.concurrency_key = k.key AND i.concurrency_key <> ''
                                 AND i.status IN ('CLAIMED', 'IN_PROGRESS'))
              OR k.top_priority IS DISTINCT FROM (SELECT min(i.priority) FROM issues i
                               WHERE i.company_id = k.company_id AND i.concurrency_key = k.key
                                 AND ${raw(claimable("i"))}
                                 AND i.assignee_agent_id IS NULL))) AS "miscountedKeys",
        -- OPEN issues that wait on a CANCELLED blocker: never ready until someone acts (removes the edge or reopens the blocker)
        (SELECT count(*)::int FROM issues i
          WHERE i.company_id = ${companyId}::uuid AND i.status = 'OPEN' AND i.waiting_count > 0
            AND EXISTS (SELECT 1 FROM issue_dependencies d JOIN issues b ON b.id = d.blocked_by_id
                         WHERE d.issue_id = i.id AND b.status = 'CANCELLED')) AS "waitingOnCancelled",
        -- waiting_count (kept by baton_dependents_follow_done and the edge statements) against the edges counted
        (SELECT count(*)::int FROM issues i
          WHERE i.company_id = ${companyId}::uuid
            AND i.waiting_count <> (SELECT count(*) FROM issue_dependencies d JOIN issues b ON b.id = d.blocked_by_id
                                     WHERE d.issue_id = i.id AND b.status <> 'DONE')) AS "miscountedWaits",
        (SELECT coalesce(json_agg(json_build_object('attemptCount', h.attempt_count, 'issues', h.n) ORDER BY h.attempt_count), '[]'::json)
           FROM (SELECT attempt_count, count(*)::int AS n FROM issues WHERE company_id = ${companyId}::uuid GROUP BY attempt_count) h
        ) AS "attemptHistogram"`,
    ),
  );
}
