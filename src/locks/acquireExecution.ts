// acquireExecution: the second lock, taken when work starts. The checkout says
// who holds the issue; the execution lock says which run is working this
// attempt. Taking it counts the attempt.
import { appendEvents, issueJson, queryOne, runViewJson, sql } from "../db/sql.js";
import type { LockDeps } from "./deps.js";
import { lockedIssuesCte, refuseRun, runCte } from "./deps.js";
import type { AcquireExecutionResult, AgentActor, Issue, LockEvent, RunView } from "./types.js";
import { issueNotFound } from "./types.js";

type Verdict = "ALREADY_HELD" | "EXECUTION_CONFLICT" | "NOT_CHECKED_OUT" | "EXHAUSTED" | "ACQUIRE";

interface AcquireRow {
  run: RunView | null;
  verdict: Verdict | null;
  current: Issue | null;
  issue: Issue | null;
  ownerAgentId: string | null;
  events: LockEvent[];
}

/**
 * ACQUIRE_IF_CHECKOUT_HELD. Invariant: no attempt of an issue is worked by two
 * runs, and only the checkout holder may start one. The issue row is locked
 * first, so the holder seen is the holder changed; the run is read FOR SHARE
 * so a run being finished or timed out cannot start work. CLAIMED → IN_PROGRESS
 * with execution_run_id = checkout_run_id (the issues_lock_pair CHECK forbids
 * anything else) and attempt_count + 1.
 */
function acquireStatement(runId: string, actor: AgentActor, issueId: string) {
  return sql`
    WITH ${runCte(runId, actor, true)},
    ${lockedIssuesCte(actor, [issueId])},
    verdict AS (
      SELECT CASE
        WHEN c.execution_run_id = ${runId}::uuid THEN 'ALREADY_HELD'
        WHEN c.execution_run_id IS NOT NULL THEN 'EXECUTION_CONFLICT'
        WHEN c.checkout_run_id IS DISTINCT FROM ${runId}::uuid THEN 'NOT_CHECKED_OUT'
        WHEN c.attempt_count >= c.max_attempts THEN 'EXHAUSTED'
        ELSE 'ACQUIRE' END AS verdict
        FROM cur c
    ),
    changed AS (
      UPDATE issues i
         SET status = 'IN_PROGRESS', execution_run_id = ${runId}::uuid,
             execution_agent_name_key = ${actor.agentNameKey}, execution_locked_at = now(),
             attempt_count = i.attempt_count + 1, updated_at = now()
        FROM verdict v
       WHERE i.id = ${issueId}::uuid AND v.verdict = 'ACQUIRE'
      RETURNING i.*, 'EXECUTION_ACQUIRED' AS ev_kind, ${runId}::uuid AS ev_run_id,
                ${actor.agentId}::uuid AS ev_agent_id, NULL::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT ${runViewJson("run")} FROM run) AS run,
           (SELECT verdict FROM verdict) AS verdict,
           (SELECT ${issueJson("c")} FROM cur c) AS current,
           (SELECT ${issueJson("c")} FROM changed c) AS issue,
           (SELECT h.agent_id FROM heartbeat_runs h WHERE h.id = (SELECT execution_run_id FROM cur)) AS "ownerAgentId",
           (SELECT list FROM events) AS events`;
}

export async function acquireExecution(
  deps: LockDeps,
  actor: AgentActor,
  input: { runId: string; issueId: string },
): Promise<AcquireExecutionResult> {
  const { runId, issueId } = input;
  const row = await queryOne<AcquireRow>(deps.db, acquireStatement(runId, actor, issueId));
  deps.events.publish(row.events);
  const refused = refuseRun(row.run, runId, actor);
  if (refused) return refused;
  const cur = row.current;
  if (!cur || !row.verdict) return issueNotFound(issueId);
  switch (row.verdict) {
    case "ACQUIRE":
      return { __typename: "ExecutionAcquired", issue: row.issue!, alreadyHeld: false };
    case "ALREADY_HELD":
      return { __typename: "ExecutionAcquired", issue: cur, alreadyHeld: true };
    case "EXECUTION_CONFLICT":
      return {
        __typename: "ExecutionConflict",
        message: `issue ${issueId} is being executed by run ${cur.executionRunId}`,
        issueId,
        ownerAgentId: row.ownerAgentId,
        ownerRunId: cur.executionRunId,
      };
    case "NOT_CHECKED_OUT":
      return {
        __typename: "NotCheckedOut",
        message: `run ${runId} does not hold the checkout of issue ${issueId}; claim it first`,
        issueId,
      };
    case "EXHAUSTED":
      return {
        __typename: "AttemptsExhausted",
        message: `issue ${issueId} has used all ${cur.maxAttempts} attempts`,
        issueId,
        attemptCount: cur.attemptCount,
        maxAttempts: cur.maxAttempts,
      };
  }
}
