// claimIssues: take the checkout of the caller's next `limit` claimable issues
// in one statement (CLAIM_NEXT_SKIP_LOCKED). claimIssue without an issue id
// uses CLAIM_NEXT_FOR_EACH (claimNext.ts), which answers a group of callers.
import { appendEvents, issueJson, named, runViewJson, sql, raw, stampEvent } from "../db/sql.js";
import type { LockDeps } from "./deps.js";
import { commitChange, refuseRun, runCte, withoutLive } from "./deps.js";
import type { AgentActor, Issue, LockEvent, NoIssueAvailable, Run, RunNotActive, RunView } from "./types.js";
import { InvalidInputError } from "./types.js";

export const MAX_CLAIM_BATCH = 1000;

export interface IssuesClaimed {
  __typename: "IssuesClaimed";
  issues: Issue[];
  run: Run;
}
export type ClaimIssuesResult = IssuesClaimed | NoIssueAvailable | RunNotActive;

/**
 * CLAIM_NEXT_SKIP_LOCKED. Invariant: at most one run holds an issue's checkout.
 * Concurrent claimers lock different rows (SKIP LOCKED): they never wait on
 * each other and never receive the same issue; a row another claimer changed
 * after this statement's snapshot is re-checked against the WHERE (status
 * 'OPEN', attempts left) on its newest version before it can be taken.
 * The run is read FOR SHARE, so finishRun (which updates the run row, then
 * releases its issues in a later statement) cannot miss an issue claimed here,
 * and a run that has just been finished or timed out cannot take a lock.
 * The index issues_claimable_idx (or issues_pool_idx with the unassigned pool)
 * serves the ORDER BY directly, so the first unlocked entries are the answer.
 * One ledger row per claimed issue, all under one seq-lock acquisition.
 */
export function claimNextStatement(runId: string, actor: AgentActor, includeUnassigned: boolean, limit = 1, acquire = false) {
  const who = includeUnassigned
    ? sql`(i.assignee_agent_id = ${actor.agentId}::uuid OR i.assignee_agent_id IS NULL)`
    : sql`i.assignee_agent_id = ${actor.agentId}::uuid`;
  return sql`
    WITH ${runCte(runId, actor, true)},
    next AS (
      SELECT i.id FROM issues i
       WHERE i.company_id = ${actor.companyId}::uuid
         AND i.status = 'OPEN' AND i.attempt_count < i.max_attempts
         AND ${who}
         AND EXISTS (SELECT 1 FROM run WHERE run.live AND run.agent_id = ${actor.agentId}::uuid)
       ORDER BY i.priority, i.created_at, i.id
       LIMIT ${limit}::int
         FOR UPDATE SKIP LOCKED
    ),
    ${acquire ? claimAndStart(runId, actor) : claimOnly(runId, actor)},
    ${appendEvents("changes")}
    SELECT (SELECT ${runViewJson("run")} FROM run) AS run,
           (SELECT coalesce(json_agg(${issueJson("c")} ORDER BY c.priority, c.created_at, c.id), '[]'::json) FROM changed c) AS issues,
           (SELECT list FROM events) AS events`;
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

export async function claimNextIssues(
  deps: LockDeps,
  actor: AgentActor,
  input: { runId: string; limit: number; includeUnassigned?: boolean | null; acquireExecution?: boolean | null },
): Promise<ClaimIssuesResult> {
  const { runId, limit } = input;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CLAIM_BATCH) {
    throw new InvalidInputError(`limit must be between 1 and ${MAX_CLAIM_BATCH}`);
  }
  const row = await commitChange<{ run: RunView | null; issues: Issue[]; events: LockEvent[] }>(
    deps,
    named("CLAIM_NEXT_SKIP_LOCKED", claimNextStatement(runId, actor, input.includeUnassigned ?? false, limit, input.acquireExecution ?? false)),
  );
  const refused = refuseRun(row.run, runId, actor);
  if (refused) return refused;
  if (row.issues.length === 0 || !row.run) return { __typename: "NoIssueAvailable", message: "no claimable issue" };
  return { __typename: "IssuesClaimed", issues: row.issues, run: withoutLive(row.run) };
}
