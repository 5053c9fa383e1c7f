// The checkout of one named issue, taken if the issue is
// in a status the caller expects and nobody live holds it; a lock left by a
// dead run is adopted. claimIssue with an issue id runs it (claimIssue.ts
// turns its verdict into the answer). One statement: the decision, the change
// and its ledger row commit together.
import { appendEvents, issueJson, queryOne, raw, runViewJson, sql, stampEvent, statement } from "../../db/sql.js";
import { commitChange } from "../shared/commit.js";
import type { StatementDeps } from "../shared/deps.js";
import { RUN_CTE_COLUMNS, attemptsAfterDeath, lockedIssuesCte, runCte, runIsLive, runLeaseExpired, waiting } from "../shared/fragments.js";
import type { AgentActor, RunView } from "../shared/types.js";
import type { Issue, IssueStatus, LockEvent } from "../../domain/types.js";

/**
 * Statuses a checkout can start from: OPEN, or a lock left behind by a dead
 * run. Any status may be listed in expectedStatuses (docs/lifecycle.md checks it after
 * IssueNotFound, alreadyHeld and IssueWaiting); an issue in any other status answers
 * UnexpectedStatus even when it is listed.
 */
export const CLAIMABLE_STATUSES: readonly IssueStatus[] = ["OPEN", "CLAIMED", "IN_PROGRESS"];

export type CheckoutVerdict =
  | "ALREADY_HELD"
  | "WAITING"
  | "LIMIT_REACHED"
  | "UNEXPECTED_STATUS"
  | "HELD"
  | "ASSIGNED"
  | "EXHAUSTED"
  | "ADOPT_EXHAUSTED"
  | "ADOPT"
  | "CLAIM";

export interface CheckoutAnswer {
  run: RunView | null;
  verdict: CheckoutVerdict | null;
  current: Issue | null;
  issue: Issue | null;
  holder: Pick<RunView, "id" | "agentId" | "status" | "live"> | null;
  /** The key's limit, when the verdict is LIMIT_REACHED. */
  limit: { key: string; maxActive: number } | null;
  events: LockEvent[];
}

/**
 * Invariant: at most one run holds the checkout, and a lock is taken over only
 * from a run that is dead on the database clock, judged on the newest version
 * of its row (holder_now, locked): a heartbeat racing an adoption either lands
 * first (CheckoutConflict) or finds the run TIMED_OUT (RunNotActive), never
 * both; such a holder still marked RUNNING is timed out here (`expired`)
 * before its lock is adopted. A holder the snapshot cannot see is younger than
 * it, hence alive. The
 * checks run in the order docs/lifecycle.md gives; a key at its limit is
 * refused (LIMIT_REACHED), and a slot taken after the snapshot makes the keys'
 * trigger abort the statement to run again (docs/invariants.md, 15).
 * Replayed by test/locks/adoption.test.ts ("adopts a dead holder's checkout
 * while another transaction %s"), test/locks/races.test.ts ("30 runs check out
 * one issue: exactly one wins and every loser is told who") and
 * test/locks/newerRow.test.ts ("a claim by id waiting on the release of the
 * issue that filled its key counts that slot free").
 */
function checkoutIfExpectedStatement(runId: string, actor: AgentActor, issueId: string, expected: IssueStatus[]) {
  return statement(
    "CHECKOUT_IF_EXPECTED",
    sql`
    WITH ${runCte(runId, actor, true)},
    ${lockedIssuesCte(actor, [issueId])},
    holder AS (
      SELECT ${raw(RUN_CTE_COLUMNS)} FROM heartbeat_runs r WHERE r.id = (SELECT checkout_run_id FROM cur)
    ),
    -- A holder that looks dead in this statement's snapshot may have changed
    -- since: its row is locked and read at its newest version, and liveness
    -- is decided from that. (Another statement timing the run out makes it
    -- TIMED_OUT, dead; a heartbeat that landed first makes it live.)
    holder_now AS (
      SELECT r.id, r.status, ${raw(runIsLive("r"))} AS live FROM heartbeat_runs r
       WHERE r.id = (SELECT id FROM holder WHERE NOT live)
         AND (SELECT checkout_run_id <> ${runId}::uuid FROM cur)
       FOR UPDATE
    ),
    expired AS (
      UPDATE heartbeat_runs r SET status = 'TIMED_OUT', finished_at = now()
       WHERE r.id = (SELECT id FROM holder_now WHERE NOT live AND status = 'RUNNING')
         AND ${raw(runLeaseExpired("r"))}
      RETURNING r.id
    ),
    seen AS (
      SELECT cur.*,
             CASE WHEN cur.checkout_run_id IS NULL THEN false
                  WHEN NOT EXISTS (SELECT 1 FROM holder) THEN true
                  WHEN (SELECT live FROM holder) THEN true
                  ELSE coalesce((SELECT live FROM holder_now), false) END AS holder_live
        FROM cur
    ),
    -- The issue's key, if it has a limit. An issue that is not active yet
    -- would make it one more; an active one (a dead holder's, to adopt)
    -- would not (docs/lifecycle.md, Concurrency keys).
    -- k.active is the count in this statement's snapshot, cur the issue's
    -- newest version: if the issue itself was active in the key in the
    -- snapshot and its hold has ended since (cur waited for that release),
    -- its slot is free and is not counted. A slot taken since the snapshot is
    -- caught by the keys' trigger (40001: the statement runs again).
    full_key AS (
      SELECT k.key, k.max_active FROM concurrency_keys k JOIN cur ON k.company_id = cur.company_id AND k.key = cur.concurrency_key
       WHERE k.max_active IS NOT NULL
         AND cur.status NOT IN ('CLAIMED', 'IN_PROGRESS')
         AND k.active - (SELECT count(*) FROM issues s
                          WHERE s.id = cur.id AND s.concurrency_key = k.key AND s.status IN ('CLAIMED', 'IN_PROGRESS'))::int
             >= k.max_active
    ),
    verdict AS (
      SELECT CASE
        WHEN s.checkout_run_id = ${runId}::uuid THEN 'ALREADY_HELD'
        WHEN ${raw(waiting("s"))} THEN 'WAITING'
        WHEN EXISTS (SELECT 1 FROM full_key) THEN 'LIMIT_REACHED'
        WHEN NOT (s.status = ANY(${expected}::issue_status[]) AND s.status = ANY(${CLAIMABLE_STATUSES}::issue_status[])) THEN 'UNEXPECTED_STATUS'
        WHEN s.holder_live THEN 'HELD'
        WHEN s.assignee_agent_id IS NOT NULL AND s.assignee_agent_id <> ${actor.agentId}::uuid THEN 'ASSIGNED'
        WHEN s.checkout_run_id IS NOT NULL
             AND ${raw(attemptsAfterDeath("s"))} >= s.max_attempts THEN 'ADOPT_EXHAUSTED'
        WHEN s.attempt_count >= s.max_attempts THEN 'EXHAUSTED'
        WHEN s.checkout_run_id IS NOT NULL THEN 'ADOPT'
        WHEN s.status = 'OPEN' THEN 'CLAIM'
        ELSE 'UNEXPECTED_STATUS' END AS verdict
        FROM seen s
    ),
    changed AS (
      UPDATE issues i
         SET status = CASE WHEN v.verdict = 'ADOPT_EXHAUSTED' THEN 'ESCALATED' ELSE 'CLAIMED' END::issue_status,
             checkout_run_id = CASE WHEN v.verdict = 'ADOPT_EXHAUSTED' THEN NULL ELSE ${runId}::uuid END,
             execution_run_id = NULL, execution_agent_name_key = NULL, execution_locked_at = NULL,
             claimed_at = CASE WHEN v.verdict = 'ADOPT_EXHAUSTED' THEN i.claimed_at ELSE now() END,
             -- a holder that died CLAIMED, before reaching IN_PROGRESS, spent an attempt (attemptsAfterDeath)
             attempt_count = CASE WHEN v.verdict IN ('ADOPT', 'ADOPT_EXHAUSTED') THEN ${raw(attemptsAfterDeath("i"))} ELSE i.attempt_count END,
             lock_epoch = i.lock_epoch + (v.verdict IN ('ADOPT', 'CLAIM'))::int,
             ${raw(stampEvent("i"))}, updated_at = now()
        FROM verdict v
       WHERE i.id = ${issueId}::uuid AND v.verdict IN ('CLAIM', 'ADOPT', 'ADOPT_EXHAUSTED')
      RETURNING i.*,
                CASE v.verdict WHEN 'CLAIM' THEN 'CLAIMED' WHEN 'ADOPT' THEN 'ADOPTED' ELSE 'ESCALATED' END AS ev_kind,
                ${runId}::uuid AS ev_run_id, ${actor.agentId}::uuid AS ev_agent_id,
                CASE v.verdict WHEN 'CLAIM' THEN NULL ELSE 'HOLDER_DEAD' END AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT ${runViewJson("run")} FROM run) AS run,
           (SELECT verdict FROM verdict) AS verdict,
           (SELECT ${issueJson("c")} FROM cur c) AS current,
           (SELECT ${issueJson("c")} FROM changed c) AS issue,
           (SELECT json_build_object('id', h.id, 'agentId', h.agent_id, 'status', h.status, 'live', h.live) FROM holder h) AS holder,
           (SELECT json_build_object('key', f.key, 'maxActive', f.max_active) FROM full_key f) AS "limit",
           (SELECT list FROM events) AS events`,
  );
}

/**
 * The blockers of `issueId` not DONE yet, oldest edge first, for an
 * IssueWaiting answer. A statement of its own: CHECKOUT_IF_EXPECTED judged
 * waiting on the issue's newest row (waiting_count), but its snapshot may
 * predate the edge that made it wait; this one sees it.
 */
export async function waitingOn(deps: Pick<StatementDeps, "db">, issueId: string): Promise<string[]> {
  const row = await queryOne<{ ids: string[] }>(
    deps.db,
    statement(
      "READ_WAITING_ON",
      sql`SELECT coalesce(array_agg(d.blocked_by_id ORDER BY d.created_at, b.created_at, b.id), '{}') AS ids
            FROM issue_dependencies d JOIN issues b ON b.id = d.blocked_by_id
           WHERE d.issue_id = ${issueId}::uuid AND b.status <> 'DONE'`,
    ),
  );
  return row.ids;
}

/** Runs the checkout and publishes what it committed; the caller turns the verdict into the answer. */
export function checkoutIfExpected(deps: StatementDeps, actor: AgentActor, runId: string, issueId: string, expected: IssueStatus[]): Promise<CheckoutAnswer> {
  return commitChange<CheckoutAnswer>(deps, checkoutIfExpectedStatement(runId, actor, issueId, expected));
}
