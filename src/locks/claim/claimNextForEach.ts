// claimIssue without an issue id (claimIssue.ts), for one
// request or a group of them. The API groups the claims of a company that
// arrive while its previous claim statement runs (groupCommit.ts); each
// request gets what claiming one after another in arrival order would have
// given it. Its requests and answers are in requests.ts.
import { appendEvents, issueJsonOrNull, raw, runViewJson, sql, stampEvent, statement } from "../../db/sql.js";
import { answerEach } from "../shared/commit.js";
import type { StatementDeps } from "../shared/deps.js";
import { IN_CLAIM_ORDER, claimOrderCtes } from "./claimOrder.js";
import { assignedOrPooled, requestedRunsCte } from "../shared/fragments.js";
import type { ClaimAnswer, ClaimRequest } from "../shared/requests.js";
import type { Issue } from "../../domain/types.js";

/**
 * Invariant: at most one run holds an issue's checkout, and each request of
 * the group receives what claiming one after another in arrival order would
 * have given it: the first issue in claim order that its agent may claim
 * (claimableBy, or the pool with includeUnassigned) and that no earlier request
 * took, never past a key's room (the room is shared by the group's lists).
 * Only live runs of their own agent claim; their rows are read FOR SHARE, so a
 * run being ended takes no lock. Nothing is locked that is not handed out
 * (`want` per list), so a claimer elsewhere skips no free work: SKIP LOCKED
 * never waits and never answers NoIssueAvailable while work waits.
 * `lists` holds each claiming agent and its `want`, `got` (claimOrder.ts) the
 * candidates locked SKIP LOCKED in claim order, `cand` each once, and `step`
 * walks the requests in arrival order giving each its best remaining one
 * (assignedOrPooled). One CLAIMED event per claimed issue, in this statement,
 * and for a request with `start` the execution lock too, with its
 * EXECUTION_ACQUIRED event after the CLAIMED one: what acquireExecution right
 * after the claim would do (the claim's guard leaves an attempt to count).
 * Replayed by test/locks/groupCommit.test.ts ("a group hands out distinct
 * issues in claim order, as sequential claims in arrival order would"; "a
 * group locks only the issues it could hand out, so a claimer elsewhere still
 * finds the rest") and test/locks/claimOrderContention.test.ts.
 */
export function claimNextForEachStatement(companyId: string, group: ClaimRequest[]) {
  return statement(
    "CLAIM_NEXT_FOR_EACH",
    sql`
    WITH RECURSIVE req AS (
      SELECT q.run_id, q.agent_id, q.pool, q.start, q.name_key, q.n::int AS n
        FROM unnest(${group.map((g) => g.runId)}::uuid[], ${group.map((g) => g.actor.agentId)}::uuid[],
                    ${group.map((g) => g.includeUnassigned)}::boolean[], ${group.map((g) => g.start ?? false)}::boolean[],
                    ${group.map((g) => g.actor.agentNameKey)}::text[]) WITH ORDINALITY AS q(run_id, agent_id, pool, start, name_key, n)
    ),
    ${requestedRunsCte(companyId, true)},
    asker AS (
      SELECT q.* FROM req q JOIN run r ON r.id = q.run_id AND r.agent_id = q.agent_id AND r.live
    ),
    lists AS (
      SELECT a.agent_id, count(*)::int AS want FROM asker a GROUP BY a.agent_id
    ),
    ${claimOrderCtes(companyId, sql`(SELECT count(*) FROM asker WHERE pool)`)},
    cand AS (
      SELECT DISTINCT ON (g.id) g.* FROM got g ORDER BY g.id, ${raw(IN_CLAIM_ORDER("g"))}
    ),
    step AS (
      SELECT 0 AS n, ARRAY[]::uuid[] AS taken, ARRAY[]::text[] AS taken_keys, NULL::uuid AS issue_id
      UNION ALL
      SELECT s.n + 1,
             CASE WHEN p.id IS NULL THEN s.taken ELSE s.taken || p.id END,
             CASE WHEN p.id IS NULL THEN s.taken_keys ELSE s.taken_keys || p.key END,
             p.id
        FROM step s
        LEFT JOIN LATERAL (
          SELECT c.id, c.key FROM cand c JOIN asker a ON a.n = s.n + 1
           WHERE ${assignedOrPooled("c", raw("a.agent_id"), raw("a.pool"))}
             AND c.id <> ALL(s.taken)
             -- the key's room, less what earlier requests of the group took from it
             AND (c.room IS NULL OR coalesce(cardinality(array_positions(s.taken_keys, c.key)), 0) < c.room)
           ORDER BY ${raw(IN_CLAIM_ORDER("c"))}
           LIMIT 1
        ) p ON true
       WHERE s.n < ${group.length}::int
    ),
    -- start: the execution lock too (IN_PROGRESS, attempt counted), as acquireExecution right after the claim
    changed AS (
      UPDATE issues i
         SET status = CASE WHEN q.start THEN 'IN_PROGRESS'::issue_status ELSE 'CLAIMED'::issue_status END,
             checkout_run_id = q.run_id, claimed_at = now(),
             execution_run_id = CASE WHEN q.start THEN q.run_id END,
             execution_agent_name_key = CASE WHEN q.start THEN q.name_key END,
             execution_locked_at = CASE WHEN q.start THEN now() END,
             attempt_count = i.attempt_count + q.start::int,
             lock_epoch = i.lock_epoch + 1, ${raw(stampEvent("i"))}, updated_at = now()
        FROM step s JOIN req q ON q.n = s.n
       WHERE i.id = s.issue_id
      RETURNING i.*, q.n AS req_n, q.start AS started, q.run_id AS ev_run_id, q.agent_id AS ev_agent_id
    ),
    -- one CLAIMED event per claim, then EXECUTION_ACQUIRED for a started one: the ledger reads as the two calls
    changes AS (
      SELECT c.id, c.company_id, 'CLAIMED'::issue_status AS status, c.checkout_run_id, NULL::uuid AS execution_run_id, c.last_event_xid,
             'CLAIMED' AS ev_kind, c.ev_run_id, c.ev_agent_id, NULL::text AS ev_reason
        FROM changed c
      UNION ALL
      SELECT c.id, c.company_id, c.status, c.checkout_run_id, c.execution_run_id, c.last_event_xid,
             'EXECUTION_ACQUIRED', c.ev_run_id, c.ev_agent_id, NULL::text
        FROM changed c WHERE c.started
    ),
    ${appendEvents("changes")}
    SELECT (SELECT json_object_agg(r.id, ${runViewJson("r")}) FROM run r) AS runs,
           (SELECT json_agg(json_build_object('runId', q.run_id, 'issue', ${issueJsonOrNull("ch")}) ORDER BY q.n)
              FROM req q LEFT JOIN changed ch ON ch.req_n = q.n) AS answers,
           (SELECT list FROM events) AS events`,
  );
}

/** Runs the grouped claim for a group of one company's claims; answers in request order. */
export async function claimNextForEach(deps: StatementDeps, companyId: string, group: ClaimRequest[]): Promise<ClaimAnswer[]> {
  return answerEach<{ issue: Issue | null }>(deps, claimNextForEachStatement(companyId, group));
}
