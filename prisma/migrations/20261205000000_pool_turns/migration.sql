-- A key's turn is for the unassigned pool: concurrency_keys.top_priority is
-- now the best priority among the key's claimable *unassigned* issues (OPEN,
-- an attempt left, no assignee). Claim-next walks keys by it only for the
-- pool's claims (an agent's own issues are read from issues_claimable_idx and
-- take no turns), so a key whose only claimable work is assigned to other
-- agents has no turn to take: it was listed, never served, and so kept its
-- "never served" place at the head of the order, and enough such keys hid a
-- key with pool work behind them from every pool claim
-- (src/locks/claimOrder.ts, docs/lifecycle.md "Claim order").
--
-- The trigger is the same as 20261201000000_concurrency_keys's but for the
-- claimable set it follows (unassigned only) and for an assignee change now
-- being a change it looks at.

-- One key's claimable unassigned issues in claim order: the probe the pool's
-- claims make in each key they visit, and the trigger's top_priority.
CREATE INDEX "issues_key_pool_idx" ON "issues"("company_id", "concurrency_key", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts" AND "assignee_agent_id" IS NULL;

CREATE OR REPLACE FUNCTION "baton_keys_follow_issues"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_companies uuid[];
  v_keys text[];
  v_deltas integer[];
  v_served boolean[];
  v_added "issue_priority"[];
  v_lost "issue_priority"[];
  v_new_keys boolean;
  v_pool_served uuid[];
  v_company uuid;
  n integer;
  v_max integer;
  v_active integer;
  r_companies uuid[];
  r_old_keys text[];
  r_new_keys text[];
  r_was_active boolean[];
  r_is_active boolean[];
  r_was_claimable "issue_priority"[];
  r_is_claimable "issue_priority"[];
  r_served boolean[];
BEGIN
  -- The rows whose key matters: old and new values side by side, as arrays.
  -- (Queries over the transition tables are planned anew on every call, so
  -- this one is kept flat; the grouping below runs on the arrays, with a
  -- cached plan.)
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(n."company_id"), array_agg(''::text), array_agg(n."concurrency_key"),
           array_agg(false), array_agg(false), array_agg(NULL::"issue_priority"),
           array_agg(CASE WHEN n."status" = 'OPEN' AND n."attempt_count" < n."max_attempts" AND n."assignee_agent_id" IS NULL THEN n."priority" END),
           array_agg(false)
      INTO r_companies, r_old_keys, r_new_keys, r_was_active, r_is_active, r_was_claimable, r_is_claimable, r_served
      FROM "new_rows" n WHERE n."concurrency_key" <> '';
  ELSE
    SELECT array_agg(n."company_id"), array_agg(o."concurrency_key"), array_agg(n."concurrency_key"),
           array_agg(o."status" IN ('CLAIMED', 'IN_PROGRESS')), array_agg(n."status" IN ('CLAIMED', 'IN_PROGRESS')),
           array_agg(CASE WHEN o."status" = 'OPEN' AND o."attempt_count" < o."max_attempts" AND o."assignee_agent_id" IS NULL THEN o."priority" END),
           array_agg(CASE WHEN n."status" = 'OPEN' AND n."attempt_count" < n."max_attempts" AND n."assignee_agent_id" IS NULL THEN n."priority" END),
           array_agg(n."checkout_run_id" IS NOT NULL AND n."checkout_run_id" IS DISTINCT FROM o."checkout_run_id")
      INTO r_companies, r_old_keys, r_new_keys, r_was_active, r_is_active, r_was_claimable, r_is_claimable, r_served
      FROM "old_rows" o JOIN "new_rows" n ON n."id" = o."id"
     WHERE (o."concurrency_key" <> '' OR n."concurrency_key" <> ''
            OR (n."checkout_run_id" IS NOT NULL AND n."checkout_run_id" IS DISTINCT FROM o."checkout_run_id"))
       AND (o."status", o."attempt_count", o."max_attempts", o."priority", o."concurrency_key", o."checkout_run_id", o."assignee_agent_id")
           IS DISTINCT FROM (n."status", n."attempt_count", n."max_attempts", n."priority", n."concurrency_key", n."checkout_run_id", n."assignee_agent_id");
  END IF;
  IF r_companies IS NULL THEN
    RETURN NULL;
  END IF;

  -- What the statement did to each named key it touched: the change in its
  -- active issues, whether it gave one out (a checkout taken), and the best
  -- priority among its issues that became, or stopped being, claimable.
  WITH r AS (
    SELECT * FROM unnest(r_companies, r_old_keys, r_new_keys, r_was_active, r_is_active, r_was_claimable, r_is_claimable, r_served)
      AS r(c, ok, nk, wa, ia, wc, ic, s)
  ),
  moved AS (
    SELECT r.c, r.ok AS k, -r.wa::int AS d, false AS s, NULL::"issue_priority" AS a, r.wc AS l, false AS nkey FROM r
    UNION ALL
    SELECT r.c, r.nk, r.ia::int, r.s, r.ic, NULL, r.nk <> r.ok OR TG_OP = 'INSERT' FROM r
  ),
  named_keys AS (
    SELECT m.c, m.k, sum(m.d)::int AS d, bool_or(m.s) AS s, min(m.a) AS a, min(m.l) AS l, bool_or(m.nkey) AS nkey
      FROM moved m WHERE m.k <> '' GROUP BY m.c, m.k
     -- (a key whose row would not change is not locked: an acquireExecution moves nothing)
    HAVING sum(m.d) <> 0 OR bool_or(m.s) OR min(m.a) IS NOT NULL OR min(m.l) IS NOT NULL OR bool_or(m.nkey)
  )
  SELECT (SELECT array_agg(g.c ORDER BY g.c, g.k) FROM named_keys g),
         (SELECT array_agg(g.k ORDER BY g.c, g.k) FROM named_keys g),
         (SELECT array_agg(g.d ORDER BY g.c, g.k) FROM named_keys g),
         (SELECT array_agg(g.s ORDER BY g.c, g.k) FROM named_keys g),
         (SELECT array_agg(g.a ORDER BY g.c, g.k) FROM named_keys g),
         (SELECT array_agg(g.l ORDER BY g.c, g.k) FROM named_keys g),
         (SELECT coalesce(bool_or(g.nkey), false) FROM named_keys g),
         (SELECT array_agg(DISTINCT m.c) FROM moved m WHERE m.k = '' AND m.s)
    INTO v_companies, v_keys, v_deltas, v_served, v_added, v_lost, v_new_keys, v_pool_served;

  -- The unkeyed pool's turn. (A company without named keys has no turns to
  -- take: nothing to move.)
  IF v_pool_served IS NOT NULL THEN
    FOREACH v_company IN ARRAY v_pool_served LOOP
      IF EXISTS (SELECT 1 FROM "concurrency_keys" k WHERE k."company_id" = v_company AND k."key" <> '') THEN
        INSERT INTO "concurrency_keys" ("company_id", "key") VALUES (v_company, '')
          ON CONFLICT ("company_id", "key") DO NOTHING;
        PERFORM 1 FROM "concurrency_keys" k WHERE k."company_id" = v_company AND k."key" = '' FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
          UPDATE "concurrency_keys" k SET "last_served" = nextval('baton_turns') WHERE k."company_id" = v_company AND k."key" = '';
        END IF;
      END IF;
    END LOOP;
  END IF;

  IF v_keys IS NULL THEN
    RETURN NULL;
  END IF;

  -- A key seen for the first time (new issues, or an issue given another
  -- key) gets its row.
  IF v_new_keys THEN
    INSERT INTO "concurrency_keys" ("company_id", "key")
      SELECT c, k FROM unnest(v_companies, v_keys) AS t(c, k)
      ON CONFLICT ("company_id", "key") DO NOTHING;
  END IF;
  -- Key by key, in (company, key) order (the arrays are sorted), each by its
  -- primary key with a cached plan: the locks are taken in that order. (A
  -- set-based update over the arrays measured slower: its cached plan reads
  -- every key, and planning it afresh costs more than the loop.)
  FOR n IN 1 .. cardinality(v_keys) LOOP
    IF v_lost[n] IS NULL THEN
      -- Nothing left the claimable set: the deltas, on the newest row (the
      -- update locks it); top_priority can only get better.
      UPDATE "concurrency_keys" k
         SET "active" = k."active" + v_deltas[n],
             "last_served" = CASE WHEN v_served[n] THEN nextval('baton_turns') ELSE k."last_served" END,
             "top_priority" = least(k."top_priority", v_added[n])
       WHERE k."company_id" = v_companies[n] AND k."key" = v_keys[n]
      RETURNING k."max_active", k."active" INTO v_max, v_active;
    ELSE
      -- An issue left the claimable set (a claim, mostly): lock the row
      -- first, so that the update, a later statement with a new snapshot,
      -- recomputes top_priority from every change committed to the key.
      PERFORM 1 FROM "concurrency_keys" k WHERE k."company_id" = v_companies[n] AND k."key" = v_keys[n] FOR UPDATE;
      UPDATE "concurrency_keys" k
         SET "active" = k."active" + v_deltas[n],
             "last_served" = CASE WHEN v_served[n] THEN nextval('baton_turns') ELSE k."last_served" END,
             "top_priority" = (SELECT i."priority" FROM "issues" i
                                WHERE i."company_id" = v_companies[n] AND i."concurrency_key" = v_keys[n]
                                  AND i."status" = 'OPEN' AND i."attempt_count" < i."max_attempts" AND i."assignee_agent_id" IS NULL
                                ORDER BY i."priority" LIMIT 1)
       WHERE k."company_id" = v_companies[n] AND k."key" = v_keys[n]
      RETURNING k."max_active", k."active" INTO v_max, v_active;
    END IF;
    IF v_deltas[n] > 0 AND v_active > v_max THEN
      RAISE EXCEPTION 'concurrency key % is at its limit of % active issues', v_keys[n], v_max
        USING ERRCODE = '40001', HINT = 'a concurrent claim took the last slot; run the claim again';
    END IF;
  END LOOP;
  RETURN NULL;
END $$;


-- Every key's top_priority as the new rule reads it.
UPDATE "concurrency_keys" k
   SET "top_priority" = (SELECT i."priority" FROM "issues" i
                          WHERE i."company_id" = k."company_id" AND i."concurrency_key" = k."key"
                            AND i."status" = 'OPEN' AND i."attempt_count" < i."max_attempts" AND i."assignee_agent_id" IS NULL
                          ORDER BY i."priority" LIMIT 1)
 WHERE k."key" <> '';
