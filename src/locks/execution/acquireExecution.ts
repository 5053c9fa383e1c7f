// acquireExecution: the second lock, taken when work starts. The checkout says
// who holds the issue; the execution lock says which run is working this
// attempt. Taking it counts the attempt. One statement answers one request or
// a group of them (the API groups a company's concurrent acquisitions).
import { appendEvents, issueJsonOrNull, raw, runViewJson, sql, stampEvent, statement } from "../../db/sql.js";
import { answerEach } from "../shared/commit.js";
import type { LockDeps, StatementDeps } from "../shared/deps.js";
import { requestedIssuesCte, requestedRunsCte } from "../shared/fragments.js";
import type { AcquireAnswer, AcquireRequest } from "../shared/requests.js";
import { refuseRun } from "../runs/runs.js";
import type { AcquireExecutionResult, AgentActor } from "../shared/types.js";
import { issueNotFound } from "../shared/types.js";

/**
 * ACQUIRE_IF_CHECKOUT_HELD, for each request. Invariant: no attempt of an
 * issue is worked by two runs, and only the checkout holder may start one.
 * The runs are read FOR SHARE (id order), so a run being finished or timed out
 * cannot start work; the issues are locked FOR UPDATE (id order) before the
 * verdict, so the holder seen is the holder changed. CLAIMED → IN_PROGRESS
 * with execution_run_id = checkout_run_id (the issues_lock_pair CHECK forbids
 * anything else) and attempt_count + 1. A group never names one issue twice.
 */
function acquireStatement(companyId: string, group: AcquireRequest[]) {
  return statement(
    "ACQUIRE_IF_CHECKOUT_HELD",
    sql`
    WITH req AS (
      SELECT q.run_id, q.agent_id, q.issue_id, q.name_key, q.n::int AS n
        FROM unnest(${group.map((g) => g.runId)}::uuid[], ${group.map((g) => g.actor.agentId)}::uuid[],
                    ${group.map((g) => g.issueId)}::uuid[], ${group.map((g) => g.actor.agentNameKey)}::text[])
             WITH ORDINALITY AS q(run_id, agent_id, issue_id, name_key, n)
    ),
    ${requestedRunsCte(companyId, true)},
    ${requestedIssuesCte(companyId)},
    verdict AS (
      SELECT q.n, q.issue_id, CASE
        WHEN c.execution_run_id = q.run_id THEN 'ALREADY_HELD'
        WHEN c.execution_run_id IS NOT NULL THEN 'EXECUTION_CONFLICT'
        WHEN c.checkout_run_id IS DISTINCT FROM q.run_id THEN 'NOT_CHECKED_OUT'
        WHEN c.attempt_count >= c.max_attempts THEN 'EXHAUSTED'
        ELSE 'ACQUIRE' END AS verdict
        FROM req q JOIN cur c ON c.id = q.issue_id
    ),
    changed AS (
      UPDATE issues i
         SET status = 'IN_PROGRESS', execution_run_id = q.run_id,
             execution_agent_name_key = q.name_key, execution_locked_at = now(),
             -- the checkout as cur locked it (see lockedIssuesCte: the row
             -- PostgreSQL checks first is the snapshot's, which may predate the claim)
             checkout_run_id = c.checkout_run_id, claimed_at = c.claimed_at,
             attempt_count = c.attempt_count + 1, ${raw(stampEvent("c"))}, updated_at = now()
        FROM verdict v JOIN req q ON q.n = v.n JOIN cur c ON c.id = v.issue_id
       WHERE i.id = v.issue_id AND v.verdict = 'ACQUIRE'
      RETURNING i.*, q.n AS req_n, 'EXECUTION_ACQUIRED' AS ev_kind, q.run_id AS ev_run_id,
                q.agent_id AS ev_agent_id, NULL::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT json_object_agg(r.id, ${runViewJson("r")}) FROM run r) AS runs,
           (SELECT json_agg(json_build_object(
              'runId', q.run_id, 'verdict', v.verdict,
              'current', ${issueJsonOrNull("c")}, 'issue', ${issueJsonOrNull("ch")}, 'ownerAgentId', h.agent_id
            ) ORDER BY q.n)
              FROM req q LEFT JOIN verdict v ON v.n = q.n
                         LEFT JOIN cur c ON c.id = q.issue_id LEFT JOIN changed ch ON ch.req_n = q.n
                         LEFT JOIN heartbeat_runs h ON h.id = c.execution_run_id) AS answers,
           (SELECT list FROM events) AS events`,
  );
}

/** Runs ACQUIRE_IF_CHECKOUT_HELD for a group of one company's requests; answers in request order. */
export async function acquireForEach(deps: StatementDeps, companyId: string, group: AcquireRequest[]): Promise<AcquireAnswer[]> {
  return answerEach<Omit<AcquireAnswer, "run">>(deps, acquireStatement(companyId, group));
}

export async function acquireExecution(deps: LockDeps, actor: AgentActor, input: { runId: string; issueId: string }): Promise<AcquireExecutionResult> {
  const { runId, issueId } = input;
  const request = { actor, runId, issueId };
  const answer = deps.groups ? await deps.groups.acquire.submit(actor.companyId, request) : (await acquireForEach(deps, actor.companyId, [request]))[0]!;
  const refused = refuseRun(answer.run, runId, actor);
  if (refused) return refused;
  const cur = answer.current;
  if (!cur || !answer.verdict) return issueNotFound(issueId);
  switch (answer.verdict) {
    case "ACQUIRE":
      return { __typename: "ExecutionAcquired", issue: answer.issue!, alreadyHeld: false };
    case "ALREADY_HELD":
      return { __typename: "ExecutionAcquired", issue: cur, alreadyHeld: true };
    case "EXECUTION_CONFLICT":
      return {
        __typename: "ExecutionConflict",
        message: `issue ${issueId} is being executed by run ${cur.executionRunId}`,
        issueId,
        ownerAgentId: answer.ownerAgentId,
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
