// The checkout of the caller's next `limit` claimable
// issues in one statement, optionally with their execution locks too.
// claimIssues runs it (claimIssues.ts); claimIssue without an issue id uses
// CLAIM_NEXT_FOR_EACH instead (claimNextForEach.ts), which answers a group of
// callers.
import { appendEvents, issueJson, raw, runViewJson, sql, stampEvent, statement } from "../../db/sql.js";
import { commitChange } from "../shared/commit.js";
import type { StatementDeps } from "../shared/deps.js";
import { IN_CLAIM_ORDER, claimOrderCtes } from "./claimOrder.js";
import { runCte } from "../shared/fragments.js";
import type { AgentActor, RunView } from "../shared/types.js";
import type { Issue, LockEvent } from "../../domain/types.js";

export interface ClaimNextAnswer {
  run: RunView | null;
  issues: Issue[];
  events: LockEvent[];
}

/**
 * Invariant: at most one run holds an issue's checkout.
 * The issues are the claim order's (claimOrder.ts: priority, then keys in
 * turn, then age; never past a key's limit). Concurrent claimers lock
 * different rows (SKIP LOCKED): they never wait on each other and never
 * receive the same issue; a row another claimer changed after this
 * statement's snapshot is re-checked against claimableBy (status 'OPEN',
 * attempts left) on its newest version before it can be taken.
 * The run is read FOR SHARE, so finishRun (which updates the run row, then
 * releases its issues in a later statement) cannot miss an issue claimed here,
 * and a run that has just been finished or timed out cannot take a lock.
 * One ledger row per claimed issue (two with acquireExecution: CLAIMED, then
 * EXECUTION_ACQUIRED), all in this one statement.
 */
export function claimNextSkipLockedStatement(runId: string, actor: AgentActor, includeUnassigned: boolean, limit = 1, acquire = false) {
  return statement(
    "CLAIM_NEXT_SKIP_LOCKED",
    sql`
    WITH ${runCte(runId, actor, true)},
    lists AS (
      SELECT ${actor.agentId}::uuid AS agent_id, ${limit}::int AS want
       WHERE EXISTS (SELECT 1 FROM run WHERE run.live AND run.agent_id = ${actor.agentId}::uuid)
    ),
    ${claimOrderCtes(actor.companyId, sql`CASE WHEN ${includeUnassigned}::boolean AND EXISTS (SELECT 1 FROM lists) THEN ${limit}::int ELSE 0 END`)},
    -- the first \`limit\` in claim order, no more of a key than its room
    next AS (
      SELECT r.id FROM (
        SELECT g.*, row_number() OVER (PARTITION BY g.key ORDER BY ${raw(IN_CLAIM_ORDER("g"))}) AS nth FROM got g
      ) r
       WHERE r.room IS NULL OR r.nth <= r.room
       ORDER BY ${raw(IN_CLAIM_ORDER("r"))}
       LIMIT ${limit}::int
    ),
    ${acquire ? claimAndStart(runId, actor) : claimOnly(runId, actor)},
    ${appendEvents("changes")}
    SELECT (SELECT ${runViewJson("run")} FROM run) AS run,
           (SELECT coalesce(json_agg(${issueJson("c")} ORDER BY ${raw(IN_CLAIM_ORDER("g"))}), '[]'::json) FROM changed c JOIN got g ON g.id = c.id) AS issues,
           (SELECT list FROM events) AS events`,
  );
}

/** The checkout only: CLAIMED. */
const claimOnly = (runId: string, actor: AgentActor) => sql`
    changed AS (
      UPDATE issues i
         SET status = 'CLAIMED', checkout_run_id = ${runId}::uuid, claimed_at = now(),
             lock_epoch = i.lock_epoch + 1, ${raw(stampEvent("i"))}, updated_at = now()
        FROM next WHERE i.id = next.id
      RETURNING i.*, 'CLAIMED' AS ev_kind, ${runId}::uuid AS ev_run_id, ${actor.agentId}::uuid AS ev_agent_id, NULL::text AS ev_reason
    ),
    changes AS (SELECT * FROM changed)`;

/**
 * The checkout and the execution lock at once (acquireExecution: true):
 * IN_PROGRESS, attempt counted, exactly as a claim followed by
 * acquireExecution, and recorded as those two events (CLAIMED, then
 * EXECUTION_ACQUIRED), so the ledger reads the same either way.
 */
const claimAndStart = (runId: string, actor: AgentActor) => sql`
    changed AS (
      UPDATE issues i
         SET status = 'IN_PROGRESS', checkout_run_id = ${runId}::uuid, claimed_at = now(),
             execution_run_id = ${runId}::uuid, execution_agent_name_key = ${actor.agentNameKey},
             execution_locked_at = now(), attempt_count = i.attempt_count + 1,
             lock_epoch = i.lock_epoch + 1, ${raw(stampEvent("i"))}, updated_at = now()
        FROM next WHERE i.id = next.id
      RETURNING i.*
    ),
    changes AS (
      SELECT c.id, c.company_id, 'CLAIMED'::issue_status AS status, c.checkout_run_id, NULL::uuid AS execution_run_id, c.last_event_xid,
             'CLAIMED' AS ev_kind, ${runId}::uuid AS ev_run_id, ${actor.agentId}::uuid AS ev_agent_id, NULL::text AS ev_reason
        FROM changed c
      UNION ALL
      SELECT c.id, c.company_id, c.status, c.checkout_run_id, c.execution_run_id, c.last_event_xid,
             'EXECUTION_ACQUIRED', ${runId}::uuid, ${actor.agentId}::uuid, NULL::text
        FROM changed c
    )`;

/** Runs CLAIM_NEXT_SKIP_LOCKED and publishes what it committed. */
export function claimNextSkipLocked(
  deps: StatementDeps,
  actor: AgentActor,
  input: { runId: string; includeUnassigned: boolean; limit: number; acquireExecution: boolean },
): Promise<ClaimNextAnswer> {
  return commitChange<ClaimNextAnswer>(deps, claimNextSkipLockedStatement(input.runId, actor, input.includeUnassigned, input.limit, input.acquireExecution));
}
