// The wake-up of delayed issues (docs/lifecycle.md, Delays and backoff): an
// issue whose notBefore has passed leaves the delayed set and enters the claim
// indexes, so claim-next sees it. Every API instance and every recovery
// process runs it every BATON_WAKE_INTERVAL_MS (default 250), so a delayed
// issue is claimable within about that of its notBefore; several running at
// once only share the work (SKIP LOCKED).
import type { Queryable } from "../../db/client.js";
import { queryOne, sql, statement } from "../../db/sql.js";
import { errorFields, log } from "../../log.js";

const WAKE_BATCH = 1000;

/**
 * Invariant: an issue is woken only once not_before <= now() on the database
 * clock, re-checked on its newest row version (a board that moved notBefore
 * later since the snapshot keeps it delayed). Rows another transaction holds
 * are left for the next pass. No event: readiness is not a lock change; the
 * claim that follows writes one. The woken issues are announced to
 * issuesChanged subscribers, so boards show them ready at once.
 */
const wakeDue = statement(
  "WAKE_DUE_ISSUES",
  sql`
  WITH due AS (
    SELECT i.id FROM issues i WHERE i.delayed AND i.not_before <= now()
     ORDER BY i.not_before LIMIT ${WAKE_BATCH}::int
       FOR UPDATE SKIP LOCKED
  ), woken AS (
    UPDATE issues i SET delayed = false FROM due WHERE i.id = due.id AND i.delayed AND i.not_before <= now()
    RETURNING i.id, i.company_id
  )
  SELECT count(*)::int AS n,
         coalesce((SELECT json_object_agg(c.company_id, c.ids) FROM (
           SELECT w.company_id, json_agg(w.id) AS ids FROM woken w GROUP BY w.company_id) c), '{}') AS woken
    FROM woken`,
);

/** Who hears of woken issues: issuesChanged subscribers (EventBus.announceIssues), per company. */
export type WokenSink = (companyId: string, issueIds: string[]) => void;

/** Wakes every due issue now, in batches, telling `heard` of each company's; returns how many. */
export async function wakeDueIssues(db: Queryable, heard?: WokenSink): Promise<number> {
  let total = 0;
  for (;;) {
    const { n, woken } = await queryOne<{ n: number; woken: Record<string, string[]> }>(db, wakeDue);
    total += n;
    for (const [companyId, ids] of Object.entries(woken)) heard?.(companyId, ids);
    if (n < WAKE_BATCH) return total;
  }
}

/** Runs wakeDueIssues every `intervalMs` until stopped; a failed pass is logged and the next one tries again. */
export function startWaking(db: Queryable, intervalMs: number, heard?: WokenSink): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> = Promise.resolve();
  let failing = false;
  const pass = () => {
    timer = null;
    running = wakeDueIssues(db, heard).then(
      () => {
        failing = false;
      },
      (err: unknown) => {
        // one line per outage, not one per pass
        if (!failing) log("warn", "waking delayed issues failed; retrying", errorFields(err));
        failing = true;
      },
    );
    void running.then(() => {
      if (!stopped) timer = setTimeout(pass, intervalMs).unref();
    });
  };
  timer = setTimeout(pass, 0).unref();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
