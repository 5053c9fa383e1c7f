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
--   - active moves by the statement's delta, and top_priority can only get
--     better by the priorities that became claimable: both exact on the
--     newest row, whatever this statement's snapshot saw;
--   - when an issue at the key's top priority stopped being claimable (a
--     claim, mostly), top_priority is recomputed from the issues in a later
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
  v_over_key text;
  v_over_max integer;
  v_recompute_companies uuid[];
  v_recompute_keys text[];
BEGIN
  -- What the statement did to each named key it touched: the change in its
  -- active issues, whether it gave one out (a checkout taken), and the best
  -- priority among its issues that became, or stopped being, claimable.
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(t.c ORDER BY t.c, t.k), array_agg(t.k ORDER BY t.c, t.k), array_agg(0), array_agg(false),
           array_agg(t.a ORDER BY t.c, t.k), array_agg(NULL::"issue_priority"), true
      INTO v_companies, v_keys, v_deltas, v_served, v_added, v_lost, v_new_keys
      FROM (SELECT n."company_id" AS c, n."concurrency_key" AS k,
                   min(CASE WHEN n."status" = 'OPEN' AND n."attempt_count" < n."max_attempts" THEN n."priority" END) AS a
              FROM "new_rows" n WHERE n."concurrency_key" <> '' GROUP BY 1, 2) t;
  ELSE
    WITH moved AS (
      SELECT ch.*
        FROM "old_rows" o JOIN "new_rows" n ON n."id" = o."id"
       CROSS JOIN LATERAL (VALUES
         (o."company_id", o."concurrency_key", -(o."status" IN ('CLAIMED', 'IN_PROGRESS'))::int, false, NULL::"issue_priority",
          CASE WHEN o."status" = 'OPEN' AND o."attempt_count" < o."max_attempts" THEN o."priority" END, false),
         (n."company_id", n."concurrency_key", (n."status" IN ('CLAIMED', 'IN_PROGRESS'))::int,
          n."checkout_run_id" IS NOT NULL AND n."checkout_run_id" IS DISTINCT FROM o."checkout_run_id",
          CASE WHEN n."status" = 'OPEN' AND n."attempt_count" < n."max_attempts" THEN n."priority" END, NULL::"issue_priority",
          n."concurrency_key" <> o."concurrency_key")
       ) AS ch("company_id", "key", "delta", "served", "added", "lost", "new_key")
       WHERE (o."status", o."attempt_count", o."max_attempts", o."priority", o."concurrency_key", o."checkout_run_id")
             IS DISTINCT FROM (n."status", n."attempt_count", n."max_attempts", n."priority", n."concurrency_key", n."checkout_run_id")
    ),
    named_keys AS (
      SELECT m."company_id", m."key", sum(m."delta")::int AS "delta", bool_or(m."served") AS "served",
             min(m."added") AS "added", min(m."lost") AS "lost", bool_or(m."new_key") AS "new_key"
        FROM moved m WHERE m."key" <> '' GROUP BY m."company_id", m."key"
    )
    SELECT (SELECT array_agg(nk."company_id" ORDER BY nk."company_id", nk."key") FROM named_keys nk),
           (SELECT array_agg(nk."key" ORDER BY nk."company_id", nk."key") FROM named_keys nk),
           (SELECT array_agg(nk."delta" ORDER BY nk."company_id", nk."key") FROM named_keys nk),
           (SELECT array_agg(nk."served" ORDER BY nk."company_id", nk."key") FROM named_keys nk),
           (SELECT array_agg(nk."added" ORDER BY nk."company_id", nk."key") FROM named_keys nk),
           (SELECT array_agg(nk."lost" ORDER BY nk."company_id", nk."key") FROM named_keys nk),
           (SELECT coalesce(bool_or(nk."new_key"), false) FROM named_keys nk),
           (SELECT array_agg(DISTINCT m."company_id") FROM moved m WHERE m."key" = '' AND m."served")
      INTO v_companies, v_keys, v_deltas, v_served, v_added, v_lost, v_new_keys, v_pool_served;
  END IF;

  -- (A company without named keys has no turns to take: nothing to move.)
  IF v_pool_served IS NOT NULL
     AND EXISTS (SELECT 1 FROM "concurrency_keys" k WHERE k."company_id" = ANY(v_pool_served) AND k."key" <> '') THEN
    INSERT INTO "concurrency_keys" ("company_id", "key")
      SELECT c, '' FROM unnest(v_pool_served) c
      ON CONFLICT ("company_id", "key") DO NOTHING;
    UPDATE "concurrency_keys" k SET "last_served" = nextval('baton_turns')
      WHERE (k."company_id", k."key") IN (
        SELECT f."company_id", f."key" FROM "concurrency_keys" f
         WHERE f."company_id" = ANY(v_pool_served) AND f."key" = ''
           FOR UPDATE SKIP LOCKED);
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
  -- Several keys: lock them in order first. (One key: the update below locks it.)
  IF cardinality(v_keys) > 1 THEN
    PERFORM 1 FROM "concurrency_keys" k
      WHERE (k."company_id", k."key") IN (SELECT c, kk FROM unnest(v_companies, v_keys) AS t(c, kk))
        AND k."company_id" = ANY(v_companies) AND k."key" = ANY(v_keys)
      ORDER BY k."company_id", k."key"
        FOR UPDATE;
  END IF;
  -- The deltas, on the newest rows. top_priority is left as it is where it
  -- must be recomputed (an issue at or above it stopped being claimable).
  WITH changed AS (
    UPDATE "concurrency_keys" k
       SET "active" = k."active" + t.d,
           "last_served" = CASE WHEN t.s THEN nextval('baton_turns') ELSE k."last_served" END,
           "top_priority" = CASE WHEN t.l IS NOT NULL AND (k."top_priority" IS NULL OR t.l <= k."top_priority") THEN k."top_priority"
                                 ELSE least(k."top_priority", t.a) END
      FROM unnest(v_companies, v_keys, v_deltas, v_served, v_added, v_lost) AS t(c, kk, d, s, a, l)
     WHERE k."company_id" = t.c AND k."key" = t.kk
       -- (for the index: the planner takes unnest for a hundred rows, and would scan every key)
       AND k."company_id" = ANY(v_companies) AND k."key" = ANY(v_keys)
    RETURNING k."company_id", k."key", k."max_active", k."active", t.d,
              (t.l IS NOT NULL AND (k."top_priority" IS NULL OR t.l <= k."top_priority")) AS "recompute"
  ),
  over AS (
    SELECT c."key", c."max_active" FROM changed c WHERE c.d > 0 AND c."active" > c."max_active" LIMIT 1
  )
  SELECT (SELECT o."key" FROM over o), (SELECT o."max_active" FROM over o),
         (SELECT array_agg(c."company_id") FROM changed c WHERE c."recompute"),
         (SELECT array_agg(c."key") FROM changed c WHERE c."recompute")
    INTO v_over_key, v_over_max, v_recompute_companies, v_recompute_keys;
  IF v_over_key IS NOT NULL THEN
    RAISE EXCEPTION 'concurrency key % is at its limit of % active issues', v_over_key, v_over_max
      USING ERRCODE = '40001', HINT = 'a concurrent claim took the last slot; run the claim again';
  END IF;
  -- A new snapshot, under the locks: the key's best claimable priority, from its issues.
  IF v_recompute_keys IS NOT NULL THEN
    UPDATE "concurrency_keys" k
       SET "top_priority" = (SELECT i."priority" FROM "issues" i
                              WHERE i."company_id" = k."company_id" AND i."concurrency_key" = k."key"
                                AND i."status" = 'OPEN' AND i."attempt_count" < i."max_attempts"
                              ORDER BY i."priority" LIMIT 1)
      FROM unnest(v_recompute_companies, v_recompute_keys) AS t(c, kk)
     WHERE k."company_id" = t.c AND k."key" = t.kk
       AND k."company_id" = ANY(v_recompute_companies) AND k."key" = ANY(v_recompute_keys);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "issues_keys_after_insert" AFTER INSERT ON "issues"
  REFERENCING NEW TABLE AS "new_rows"
  FOR EACH STATEMENT EXECUTE FUNCTION "baton_keys_follow_issues"();
CREATE TRIGGER "issues_keys_after_update" AFTER UPDATE ON "issues"
  REFERENCING OLD TABLE AS "old_rows" NEW TABLE AS "new_rows"
  FOR EACH STATEMENT EXECUTE FUNCTION "baton_keys_follow_issues"();
