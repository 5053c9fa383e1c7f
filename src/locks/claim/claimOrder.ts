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
import { raw, sql } from "../../db/sql.js";
import type { Sql } from "../../db/sql.js";
import { claimable, claimableBy, claimableUnassigned } from "../shared/fragments.js";

/** How many keys past the ones a claim needs are looked at, so that concurrent claimers racing for the same heads still find one each. */
const SPARE_KEYS = 8;

/**
 * The keys of the company that a claim can take from, in turn order: named
 * keys with claimable unassigned work and room (concurrency_keys_turn_idx, read in index
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
                       AND ${raw(claimable("i"))}
                     ORDER BY i.priority LIMIT 1),
                   (SELECT u.last_served FROM concurrency_keys u WHERE u.company_id = ${companyId}::uuid AND u.key = ''),
                   NULL::int) t
     WHERE t.top_priority IS NOT NULL`;

/**
 * CTEs that define `got`, the issues a claim-next statement may hand out,
 * locked FOR UPDATE SKIP LOCKED, with the columns that order them (phase,
 * priority, j, turn_no, created_at, id) and their key's room. The statement
 * defines before them a CTE `lists` of (agent_id, want): each claiming agent
 * and how many issues assigned to it its requests could take; `poolWant` is
 * how many unassigned issues the requests that include the pool could take.
 *
 * Invariant: no key's issues are taken beyond its room, and nothing is
 * locked that `got` does not return (a row locked and not handed out would
 * make a concurrent claimer pass it by), except a row found no longer
 * claimable after its lock (a concurrent claim took it).
 *  - `turn`: the first `poolWant` + SPARE_KEYS keys in turn order. No key
 *    later in the order can be among the first `poolWant` issues: each of
 *    these keys' first issue comes before it.
 *  - `ahead`: without locking, each key's first unassigned claimable issues
 *    (no more than its room, nor than the claims could need from it),
 *    numbered j = 1, 2, … within the key. Ordering them by (priority, j,
 *    turn_no) is the order one claim after another would take them: each
 *    round, every key in turn gives one.
 *  - `picked`: they are locked in that order, skipping rows that concurrent
 *    claimers hold and re-checked on their newest version, until `poolWant`.
 *  - `own_ahead`, `own`: each agent's own assigned issues, in plain claim
 *    order (priority, then age; issues_claimable_idx), in keys with room and
 *    no more of a key than its room, looked at without locking (the agent's
 *    first want + SPARE_KEYS), then locked in that order until the agent's
 *    `want`. They come before unassigned ones of the same priority.
 *  - `own_fill`: an agent still short because concurrent claims of the same
 *    agent held what `own_ahead` looked at takes the rest in plain order from
 *    keys without a limit.
 *  - `fill`: when concurrent claimers held so many of `ahead`'s rows that
 *    the pool is still short, every key with pool work and room, in turn
 *    order, gives its next unlocked issues, none past its room: never a
 *    false "no issue" while any key with room has unlocked pool work,
 *    however many keys come before it.
 *
 * Turns are the pool's: a key's top_priority is its best claimable
 * *unassigned* priority (migration 20261205000000_pool_turns), so a key
 * whose only work is assigned to other agents is not in the turn order and
 * cannot hide keys with pool work behind it.
 */
export const claimOrderCtes = (companyId: string, poolWant: Sql) => sql`
    pool AS (
      SELECT ${poolWant}::int AS want
    ),
    turn AS (
      ${keysInTurn(companyId, sql`(SELECT want FROM pool) + ${SPARE_KEYS}::int`)}
    ),
    ahead AS (
      SELECT a.id, a.priority, a.created_at, a.j, t.turn_no, t.key, t.room
        FROM pool CROSS JOIN turn t
       CROSS JOIN LATERAL (
         SELECT x.*, row_number() OVER (ORDER BY x.priority, x.created_at, x.id) AS j FROM (
           SELECT i.id, i.priority, i.created_at FROM issues i
            WHERE i.company_id = ${companyId}::uuid AND i.concurrency_key = t.key
              AND ${claimableUnassigned("i")}
            ORDER BY i.priority, i.created_at, i.id
            LIMIT least(pool.want, t.room, ${SPARE_KEYS}::int + ceil(pool.want::numeric / (SELECT count(*) FROM turn))::int)
         ) x
       ) a
       WHERE pool.want > 0
    ),
    picked AS (
      -- ahead's rows in claim order, each locked by its primary key as it
      -- comes (SKIP LOCKED), until the pool has what it wants: nothing past
      -- that is locked. The lock returns the row's newest version, which must
      -- still be claimable (a concurrent claim may have taken it; the row then
      -- stays locked here until commit, which holds up nobody's claim). The
      -- lookup is by id alone: with the claimable conditions in it, the
      -- planner may walk a claim index for the id instead.
      SELECT l.id, l.assignee_agent_id, a.key, a.room, 0 AS phase, a.priority, a.j, a.turn_no, a.created_at
        FROM (SELECT * FROM ahead ORDER BY priority, j, turn_no) a
       CROSS JOIN LATERAL (
         SELECT i.* FROM issues i WHERE i.id = a.id
          LIMIT 1 -- (also keeps the conditions below out of this lookup)
            FOR UPDATE SKIP LOCKED
       ) l
       WHERE l.concurrency_key = a.key AND ${claimableUnassigned("l")}
       LIMIT (SELECT want FROM pool)
    ),
    own_ahead AS (
      -- without locking: each agent's first own issues in plain claim order
      -- (issues_claimable_idx), in keys with room, no more of a key than its room
      SELECT l.agent_id, l.want, x.* FROM lists l CROSS JOIN LATERAL (
        SELECT c.*, row_number() OVER (PARTITION BY c.key ORDER BY c.priority, c.created_at, c.id) AS nth FROM (
          SELECT i.id, i.assignee_agent_id, i.concurrency_key AS key, k.max_active - k.active AS room, i.priority, i.created_at
            FROM issues i LEFT JOIN concurrency_keys k ON k.company_id = i.company_id AND k.key = i.concurrency_key AND k.max_active IS NOT NULL
           WHERE i.company_id = ${companyId}::uuid AND ${claimableBy("i", raw("l.agent_id"))}
             AND (k.max_active IS NULL OR k.active < k.max_active)
           -- issues_claimable_idx's order: the agent's own rows only (issues_pool_idx would pass every unassigned one)
           ORDER BY i.assignee_agent_id, i.priority, i.created_at, i.id
           LIMIT l.want + ${SPARE_KEYS}::int
        ) c
      ) x
      WHERE x.room IS NULL OR x.nth <= x.room
    ),
    own AS (
      -- own_ahead's rows in claim order, each locked by its primary key as it
      -- comes (SKIP LOCKED) and re-checked on its newest version, until each
      -- agent has its \`want\` (as \`picked\` does for the pool)
      SELECT o.* FROM lists l CROSS JOIN LATERAL (
        SELECT lk.id, lk.assignee_agent_id, a.key, a.room, 0 AS phase, a.priority, 0::bigint AS j, 0::bigint AS turn_no, a.created_at
          FROM (SELECT * FROM own_ahead x WHERE x.agent_id = l.agent_id ORDER BY x.priority, x.created_at, x.id) a
         CROSS JOIN LATERAL (
           SELECT i.* FROM issues i WHERE i.id = a.id
            LIMIT 1 -- (also keeps the conditions below out of this lookup)
              FOR UPDATE SKIP LOCKED
         ) lk
         WHERE lk.concurrency_key = a.key AND ${claimableBy("lk", raw("l.agent_id"))}
         LIMIT l.want
      ) o
    ),
    own_fill AS (
      -- when concurrent claimers of the same agent held so many of own_ahead's
      -- rows that an agent is still short: the rest in plain claim order, from
      -- keys without a limit (never a false "no issue" while such work waits)
      SELECT f.* FROM lists l CROSS JOIN LATERAL (
        SELECT i.id, i.assignee_agent_id, i.concurrency_key AS key, NULL::int AS room, 1 AS phase, i.priority,
               0::bigint AS j, 0::bigint AS turn_no, i.created_at
          FROM issues i
         WHERE i.company_id = ${companyId}::uuid AND ${claimableBy("i", raw("l.agent_id"))}
           AND i.id NOT IN (SELECT o.id FROM own o)
           AND (i.concurrency_key = '' OR NOT EXISTS (SELECT 1 FROM concurrency_keys k
                            WHERE k.company_id = i.company_id AND k.key = i.concurrency_key AND k.max_active IS NOT NULL))
         ORDER BY i.assignee_agent_id, i.priority, i.created_at, i.id
         LIMIT l.want - (SELECT count(*) FROM own o WHERE o.assignee_agent_id = l.agent_id)::int
           FOR UPDATE OF i SKIP LOCKED
      ) f
      WHERE l.want > (SELECT count(*) FROM own o WHERE o.assignee_agent_id = l.agent_id)
    ),
    fill AS (
      -- when concurrent claimers held so many of ahead's rows that the pool is
      -- still short: every key with pool work and room, in turn order (not
      -- only the first ones \`turn\` looked at), each giving its next unlocked
      -- issues, never more than its room: never a false "no issue" while any
      -- key with room has unlocked pool work
      SELECT f.* FROM pool CROSS JOIN LATERAL (
        SELECT x.* FROM (SELECT * FROM (${keysInTurn(companyId, sql`NULL`)}) t ORDER BY t.turn_no) k
         CROSS JOIN LATERAL (
           SELECT i.id, i.assignee_agent_id, i.concurrency_key AS key, k.room, 1 AS phase, i.priority,
                  0::bigint AS j, k.turn_no, i.created_at
             FROM issues i
            WHERE i.company_id = ${companyId}::uuid AND i.concurrency_key = k.key AND ${claimableUnassigned("i")}
              AND i.id NOT IN (SELECT p.id FROM picked p)
            ORDER BY i.priority, i.created_at, i.id
            LIMIT CASE WHEN k.room IS NULL THEN pool.want
                       ELSE greatest(0, k.room - (SELECT count(*) FROM picked p WHERE p.key = k.key)::int) END
              FOR UPDATE OF i SKIP LOCKED
         ) x
         LIMIT pool.want - (SELECT count(*) FROM picked)::int
      ) f
      WHERE pool.want > (SELECT count(*) FROM picked)
    ),
    got AS (
      SELECT * FROM own UNION ALL SELECT * FROM own_fill UNION ALL SELECT * FROM picked UNION ALL SELECT * FROM fill
    )`;

/**
 * The order `got`'s issues are handed out in, for ORDER BY (alias: a row of
 * got). Priority first, then within a priority the rows taken in turn order
 * (phase 0: own, then the pool's by j and turn) before the fills (phase 1),
 * which only step past rows concurrent claimers held: a fill of a higher
 * priority still comes before an own issue of a lower one.
 */
export const IN_CLAIM_ORDER = (alias: string) => `${alias}.priority, ${alias}.phase, ${alias}.j, ${alias}.turn_no, ${alias}.created_at, ${alias}.id`;
