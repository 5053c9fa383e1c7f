-- Concurrency keys: an issue may name a key (a repository, a project, a
-- customer); a key may have a limit on how many of its issues are active
-- (CLAIMED or IN_PROGRESS) at once, and claim-next gives keys turns within one
-- priority. docs/lifecycle.md ("Concurrency keys") states the rules; this file
-- keeps the numbers they need.
--
-- issues.concurrency_key is '' for the company's unkeyed pool (the API shows
-- it as null; a key the API accepts has 1..200 characters, so '' is never a
-- user's key). Every claim path can then probe one index by equality.
ALTER TABLE "issues" ADD COLUMN "concurrency_key" text NOT NULL DEFAULT '';
ALTER TABLE "issues" ADD CONSTRAINT "issues_concurrency_key_length" CHECK (char_length("concurrency_key") <= 200);

-- One row per key of a company that has ever had an issue or a limit, plus
-- one ('') for the unkeyed pool's turn.
--   max_active    the limit; NULL: none. The unkeyed pool never has one.
--   active        how many of the key's issues are CLAIMED or IN_PROGRESS.
--   top_priority  the best priority among its claimable issues (OPEN with an
--                 attempt left); NULL: none. Claim-next walks keys by it.
--   last_served   when the key last gave an issue to a claim, as a number
--                 from baton_turns; NULL: never (so it goes first).
-- For named keys, active and top_priority are kept by the triggers below, in
-- the transaction of every change to an issue, never by the statements
-- themselves: no statement can forget them. The unkeyed pool's row holds its
-- last_served only (its other columns stay unused), so that the busiest rows
-- of the default, unkeyed setup are never a point where claims queue.
CREATE TABLE "concurrency_keys" (
    "company_id"   uuid NOT NULL REFERENCES "companies"("id") ON DELETE CASCADE,
    "key"          text NOT NULL,
    "max_active"   integer,
    "active"       integer NOT NULL DEFAULT 0,
    "top_priority" "issue_priority",
    "last_served"  bigint,
    CONSTRAINT "concurrency_keys_pkey" PRIMARY KEY ("company_id", "key"),
    CONSTRAINT "concurrency_keys_max_active_range" CHECK ("max_active" BETWEEN 1 AND 10000),
    CONSTRAINT "concurrency_keys_active_nonnegative" CHECK ("active" >= 0),
    CONSTRAINT "concurrency_keys_unkeyed_has_no_limit" CHECK ("key" <> '' OR "max_active" IS NULL)
);

-- The numbers last_served takes: increasing, never rolled back, shared by all
-- companies (only their order within a company matters).
CREATE SEQUENCE "baton_turns";

-- The turn index: the named keys a claim may still take from (claimable work,
-- room under the limit), in the order claim-next serves them. The first entry
-- is the key to serve, however many keys the company has.
CREATE INDEX "concurrency_keys_turn_idx" ON "concurrency_keys"("company_id", "top_priority", "last_served" NULLS FIRST, "key")
    WHERE "top_priority" IS NOT NULL AND "key" <> '' AND ("max_active" IS NULL OR "active" < "max_active");

-- The limits of a company (concurrencyLimits).
CREATE INDEX "concurrency_keys_limited_idx" ON "concurrency_keys"("company_id", "key") WHERE "max_active" IS NOT NULL;

-- One key's claimable issues in claim order: the probe claim-next makes in
-- each key it visits, and the trigger's top_priority.
CREATE INDEX "issues_key_claimable_idx" ON "issues"("company_id", "concurrency_key", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts";

-- The unassigned pool's claim index holds unassigned issues only. (It held
-- every claimable issue when claims walked assigned and unassigned work in
-- one order; now an agent's own work is read from issues_claimable_idx, and
-- a planner offered both for "assigned to this agent" could pick this one and
-- read every unassigned issue to find none.)
DROP INDEX "issues_pool_idx";
CREATE INDEX "issues_pool_idx" ON "issues"("company_id", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts" AND "assignee_agent_id" IS NULL;

-- Active issues by key: concurrencyLimits' and the audit's counts.
CREATE INDEX "issues_key_active_idx" ON "issues"("company_id", "concurrency_key")
    WHERE "status" IN ('CLAIMED', 'IN_PROGRESS') AND "concurrency_key" <> '';

-- baton_keys_follow_issues: after every INSERT or UPDATE statement on issues,
-- bring the rows of the named keys it touched up to date, and refuse a change
-- that would take a key past its limit.
--
-- Invariant (docs/invariants.md, 15): no key ever has more active issues than
-- max_active. Claims choose keys with room as their snapshot saw them; two
-- claims racing for a key's last slot both pass that test, and this is where
-- the second one is stopped: a claim that finds the key full fails with 40001
-- (a serialization failure). It changed nothing, and the API runs it again,
-- when the key is seen full and passed over.
--
-- Every change is made under the key row's lock, taken in (company, key)
-- order (so two statements touching several keys never deadlock):
--   - active moves by the statement's delta, and when no issue left the
--     claimable set, top_priority can only get better by the priorities that
--     joined it: both exact on the newest row, whatever this statement's
--     snapshot saw;
--   - when an issue left the claimable set (a claim, mostly), the row is
--     locked first and top_priority recomputed from the issues by a later
--     statement, whose new snapshot holds every change committed to the key
--     before its lock was granted (they all took the same lock).
--
-- The unkeyed pool has no limit and no counters. When a statement serves it,
-- and the company has named keys, its turn is moved if its row is free; if
-- another statement holds that row, it is moving the turn to nearly the same
-- place, and this one does not wait.
CREATE FUNCTION "baton_keys_follow_issues"() RETURNS trigger LANGUAGE plpgsql AS $$
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
           array_agg(CASE WHEN n."status" = 'OPEN' AND n."attempt_count" < n."max_attempts" THEN n."priority" END),
           array_agg(false)
      INTO r_companies, r_old_keys, r_new_keys, r_was_active, r_is_active, r_was_claimable, r_is_claimable, r_served
      FROM "new_rows" n WHERE n."concurrency_key" <> '';
  ELSE
    SELECT array_agg(n."company_id"), array_agg(o."concurrency_key"), array_agg(n."concurrency_key"),
           array_agg(o."status" IN ('CLAIMED', 'IN_PROGRESS')), array_agg(n."status" IN ('CLAIMED', 'IN_PROGRESS')),
           array_agg(CASE WHEN o."status" = 'OPEN' AND o."attempt_count" < o."max_attempts" THEN o."priority" END),
           array_agg(CASE WHEN n."status" = 'OPEN' AND n."attempt_count" < n."max_attempts" THEN n."priority" END),
           array_agg(n."checkout_run_id" IS NOT NULL AND n."checkout_run_id" IS DISTINCT FROM o."checkout_run_id")
      INTO r_companies, r_old_keys, r_new_keys, r_was_active, r_is_active, r_was_claimable, r_is_claimable, r_served
      FROM "old_rows" o JOIN "new_rows" n ON n."id" = o."id"
     WHERE (o."concurrency_key" <> '' OR n."concurrency_key" <> ''
            OR (n."checkout_run_id" IS NOT NULL AND n."checkout_run_id" IS DISTINCT FROM o."checkout_run_id"))
       AND (o."status", o."attempt_count", o."max_attempts", o."priority", o."concurrency_key", o."checkout_run_id")
           IS DISTINCT FROM (n."status", n."attempt_count", n."max_attempts", n."priority", n."concurrency_key", n."checkout_run_id");
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
                                  AND i."status" = 'OPEN' AND i."attempt_count" < i."max_attempts"
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

CREATE TRIGGER "issues_keys_after_insert" AFTER INSERT ON "issues"
  REFERENCING NEW TABLE AS "new_rows"
  FOR EACH STATEMENT EXECUTE FUNCTION "baton_keys_follow_issues"();
CREATE TRIGGER "issues_keys_after_update" AFTER UPDATE ON "issues"
  REFERENCING OLD TABLE AS "old_rows" NEW TABLE AS "new_rows"
  FOR EACH STATEMENT EXECUTE FUNCTION "baton_keys_follow_issues"();
