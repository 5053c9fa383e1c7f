// The claim order, as CTEs shared by the two claim-next statements
// (CLAIM_NEXT_FOR_EACH and CLAIM_NEXT_SKIP_LOCKED): which issues a claim
// without an issue id takes, and in what order (docs/lifecycle.md, "Claim
// order"):
//   1. priority first (CRITICAL … LOW);
//   2. within one priority, keys take turns: the key served least recently
//      goes first (never served: first of all); the unkeyed pool is one key;
//   3. within a key, oldest first;
//   and a key at its limit is passed over, never waited for.
// concurrency_keys keeps, per key, its best claimable priority, its room and
// when it was last served (the migration's triggers keep them), so the keys
// are walked by one index in exactly that order.
import { raw, sql } from "../db/sql.js";
import type { Sql } from "../db/sql.js";
import { claimableBy } from "./fragments.js";

/** How many keys past the ones a claim needs are looked at, so that concurrent claimers racing for the same heads still find one each. */
const SPARE_KEYS = 8;

/**
 * The keys of the company that a claim can take from, in turn order: named
 * keys with claimable work and room (concurrency_keys_turn_idx, read in index
 * order), and the unkeyed pool as one more key. `room` is how many more of its
 * issues may become active (NULL: no limit).
 */
const keysInTurn = (companyId: string, limit: Sql) => sql`
    SELECT t.key, t.top_priority, t.room, row_number() OVER (ORDER BY t.top_priority, t.last_served NULLS FIRST, t.key) AS turn_no
      FROM ((SELECT k.key, k.top_priority, k.last_served, k.max_active - k.active AS room
               FROM concurrency_keys k
              WHERE k.company_id = ${companyId}::uuid AND k.top_priority IS NOT NULL AND k.key <> ''
                AND (k.max_active IS NULL OR k.active < k.max_active)
              ORDER BY k.top_priority, k.last_served NULLS FIRST, k.key
              LIMIT ${limit})
            UNION ALL
            SELECT '',
                   (SELECT i.priority FROM issues i
                     WHERE i.company_id = ${companyId}::uuid AND i.concurrency_key = ''
                       AND i.status = 'OPEN' AND i.attempt_count < i.max_attempts
                     ORDER BY i.priority LIMIT 1),
                   (SELECT u.last_served FROM concurrency_keys u WHERE u.company_id = ${companyId}::uuid AND u.key = ''),
                   NULL::int) t
     WHERE t.top_priority IS NOT NULL`;

/**
 * CTEs that, after a CTE `lists` of (agent_id, pool, want) (the claims to
 * serve: an agent, whether it takes unassigned work, how many issues), define
 * `got`: for each list, up to `want` issues locked FOR UPDATE SKIP LOCKED,
 * with the columns that order them (phase, priority, j, turn_no, created_at,
 * id) and their key's room.
 *
 * Invariant: a list never takes more of a key's issues than its room, and
 * nothing is locked that `got` does not return (a row locked and not handed
 * out would make a concurrent claimer pass it by).
 *  - `turn`: the first `want` + SPARE_KEYS keys in turn order. No key later
 *    in the order can be among a list's first `want` issues: each of these
 *    keys' first issue comes before it.
 *  - `ahead`: without locking, each key's first issues claimable by the list
 *    (no more than its room, nor than the list could need from it), numbered
 *    j = 1, 2, … within the key. Ordering them by (priority, j, turn_no) is
 *    the order one claim after another would take them: each round, every
 *    key in turn gives one.
 *  - `picked`: they are locked in that order, skipping rows that concurrent
 *    claimers hold and re-checked on their newest version, until `want`.
 *  - `fill`: when concurrent claimers held so many of them that a list is
 *    still short, the rest comes in plain claim order (priority, then age)
 *    from keys without a limit: never a false "no issue" while such work
 *    waits, and never past a limit.
 */
export const claimOrderCtes = (companyId: string) => sql`
    turn AS (
      ${keysInTurn(companyId, sql`(SELECT max(want) FROM lists) + ${SPARE_KEYS}::int`)}
    ),
    ahead AS (
      SELECT l.agent_id, l.pool, a.id, a.priority, a.created_at, a.j, t.turn_no, t.key, t.room
        FROM lists l CROSS JOIN turn t
       CROSS JOIN LATERAL (
         SELECT x.*, row_number() OVER (ORDER BY x.priority, x.created_at, x.id) AS j FROM (
           SELECT i.id, i.priority, i.created_at FROM issues i
            WHERE i.company_id = ${companyId}::uuid AND i.concurrency_key = t.key
              AND ${claimableBy("i", raw("l.agent_id"), raw("l.pool"))}
            ORDER BY i.priority, i.created_at, i.id
            LIMIT least(l.want, t.room, ${SPARE_KEYS}::int + ceil(l.want::numeric / (SELECT count(*) FROM turn))::int)
         ) x
       ) a
    ),
    picked AS (
      SELECT l.agent_id, l.pool, p.* FROM lists l CROSS JOIN LATERAL (
        SELECT i.id, i.assignee_agent_id, a.key, a.room, 0 AS phase, a.priority, a.j, a.turn_no, a.created_at
          FROM ahead a JOIN issues i ON i.id = a.id
         WHERE a.agent_id = l.agent_id AND a.pool = l.pool AND i.concurrency_key = a.key
           -- found by their ids (the planner cannot tell how few they are)
           AND i.id = ANY(ARRAY(SELECT h.id FROM ahead h WHERE h.agent_id = l.agent_id AND h.pool = l.pool))
           AND ${claimableBy("i", raw("l.agent_id"), raw("l.pool"))}
         ORDER BY a.priority, a.j, a.turn_no
         LIMIT l.want
           FOR UPDATE OF i SKIP LOCKED
      ) p
    ),
    short AS (
      SELECT l.*, l.want - (SELECT count(*) FROM picked p WHERE p.agent_id = l.agent_id AND p.pool = l.pool)::int AS need
        FROM lists l
    ),
    fill AS (
      SELECT s.agent_id, s.pool, f.* FROM short s CROSS JOIN LATERAL (
        SELECT i.id, i.assignee_agent_id, i.concurrency_key AS key, NULL::int AS room, 1 AS phase, i.priority,
               0::bigint AS j, 0::bigint AS turn_no, i.created_at
          FROM issues i
         WHERE i.company_id = ${companyId}::uuid
           AND ${claimableBy("i", raw("s.agent_id"), raw("s.pool"))}
           AND i.id NOT IN (SELECT p.id FROM picked p WHERE p.agent_id = s.agent_id AND p.pool = s.pool)
           -- (an OR, not a bare NOT EXISTS: an anti-join would read every open issue before the first)
           AND (i.concurrency_key = '' OR NOT EXISTS (SELECT 1 FROM concurrency_keys k
                            WHERE k.company_id = i.company_id AND k.key = i.concurrency_key AND k.max_active IS NOT NULL))
         ORDER BY i.priority, i.created_at, i.id
         LIMIT s.need
           FOR UPDATE OF i SKIP LOCKED
      ) f
      WHERE s.need > 0
    ),
    got AS (
      SELECT * FROM picked UNION ALL SELECT * FROM fill
    )`;

/** The order `got`'s issues are handed out in, for ORDER BY (alias: a row of got). */
export const IN_CLAIM_ORDER = (alias: string) => `${alias}.phase, ${alias}.priority, ${alias}.j, ${alias}.turn_no, ${alias}.created_at, ${alias}.id`;
