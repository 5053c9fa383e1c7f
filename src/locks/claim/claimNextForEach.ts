// CLAIM_NEXT_FOR_EACH: claimIssue without an issue id (claimIssue.ts), for one
// request or a group of them. The API groups the claims of a company that
// arrive while its previous claim statement runs (groupCommit.ts); each
// request gets what claiming one after another in arrival order would have
// given it. Its requests and answers are in requests.ts.
import { appendEvents, issueJsonOrNull, named, runViewJson, sql, raw, stampEvent } from "../../db/sql.js";
import { answerEach } from "../shared/commit.js";
import type { StatementDeps } from "../shared/deps.js";
import { IN_CLAIM_ORDER, claimOrderCtes } from "./claimOrder.js";
import { assignedOrPooled, requestedRunsCte } from "../shared/fragments.js";
import type { ClaimAnswer, ClaimRequest } from "../shared/requests.js";
import type { Issue } from "../../domain/types.js";

/**
 * CLAIM_NEXT_FOR_EACH. Invariant: at most one run holds an issue's checkout,
 * and each request receives what it would have received had the requests
 * claimed one after another in arrival order: the first issue, in claim order,
 * that is claimable by its agent (claimableBy: OPEN with an attempt left,
 * assigned to it, or unassigned with includeUnassigned) and not given to an
 * earlier request of the group.
 *  - `run` reads every named run FOR SHARE, in id order (as claimIssue does:
 *    finishRun and the sweep update the run row first, so a run being ended
 *    cannot take a lock); only requests whose run is live and their own may claim.
 *  - `lists` has one row for each distinct (agent, pool) of the group, and
 *    `got` (claimOrder.ts) takes for each the first `want` issues in claim
 *    order (priority, keys in turn, age; never past a key's room) with FOR
 *    UPDATE SKIP LOCKED: other transactions' claims are skipped and never
 *    waited for, and a row changed since the snapshot is re-checked on its
 *    newest version. `want` counts the requests that may take a row of that
 *    list (the agent's own, plus every pool request when the list includes
 *    the pool): enough for each of them to find its best remaining row, and
 *    no more, because a row locked here and then not handed out would make a
 *    concurrent claimer on another instance skip it and answer
 *    NoIssueAvailable while work is waiting. Lists may share rows (this
 *    statement's own locks do not skip); `cand` keeps each row once.
 *  - `step` walks the requests in arrival order, giving each its best
 *    remaining candidate (assignedOrPooled: one its own claim may take),
 *    and no more of a key's issues in all than the key's room: lists are
 *    chosen separately, the room is shared.
 * One CLAIMED event per claimed issue, all in this one statement.
 */
export function claimNextForEachStatement(companyId: string, group: ClaimRequest[]) {
  return sql`
    WITH RECURSIVE req AS (
      SELECT q.run_id, q.agent_id, q.pool, q.n::int AS n
        FROM unnest(${group.map((g) => g.runId)}::uuid[], ${group.map((g) => g.actor.agentId)}::uuid[],
                    ${group.map((g) => g.includeUnassigned)}::boolean[]) WITH ORDINALITY AS q(run_id, agent_id, pool, n)
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
    changed AS (
      UPDATE issues i
         SET status = 'CLAIMED', checkout_run_id = q.run_id, claimed_at = now(),
             lock_epoch = i.lock_epoch + 1, ${raw(stampEvent("i"))}, updated_at = now()
        FROM step s JOIN req q ON q.n = s.n
       WHERE i.id = s.issue_id
      RETURNING i.*, q.n AS req_n, 'CLAIMED' AS ev_kind, q.run_id AS ev_run_id, q.agent_id AS ev_agent_id, NULL::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT json_object_agg(r.id, ${runViewJson("r")}) FROM run r) AS runs,
           (SELECT json_agg(json_build_object('runId', q.run_id, 'issue', ${issueJsonOrNull("ch")}) ORDER BY q.n)
              FROM req q LEFT JOIN changed ch ON ch.req_n = q.n) AS answers,
           (SELECT list FROM events) AS events`;
}

/** Runs CLAIM_NEXT_FOR_EACH for a group of one company's claims; answers in request order. */
export async function claimNextForEach(deps: StatementDeps, companyId: string, group: ClaimRequest[]): Promise<ClaimAnswer[]> {
  return answerEach<{ issue: Issue | null }>(deps, named("CLAIM_NEXT_FOR_EACH", claimNextForEachStatement(companyId, group)));
}
