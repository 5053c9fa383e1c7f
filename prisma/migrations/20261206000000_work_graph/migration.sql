-- The work graph (docs/lifecycle.md, "Ready"): issues wait on other issues
-- (issue_dependencies), on an instant (not_before), or on both, and only a
-- ready issue is claimed by claim-next. Readiness is kept in two columns of
-- the issue itself so that the claim indexes leave waiting and delayed issues
-- out, and a claim over a backlog of them costs what it costs without them:
--   waiting_count: how many of its blockers are not DONE (kept by
--     baton_dependents_follow_done on every change into DONE, and
--     by the statements that add or remove an edge);
--   delayed: not_before lay in the future when it was written; cleared by
--     WAKE_DUE_ISSUES (src/locks/recovery/wakeDueIssues.ts) once it has passed.
-- Also: a parent (sub-issues), an idempotency key unique per company, retry
-- backoff, an execution time limit, and the work's payload and result.

ALTER TABLE "issues"
    ADD COLUMN "parent_id" UUID,
    ADD COLUMN "not_before" TIMESTAMPTZ(6),
    ADD COLUMN "delayed" BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN "waiting_count" INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN "idempotency_key" TEXT,
    ADD COLUMN "retry_delay_seconds" INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN "max_execution_seconds" INTEGER,
    ADD COLUMN "payload" JSONB,
    ADD COLUMN "result" JSONB,
    ADD CONSTRAINT "issues_parent_id_fkey" FOREIGN KEY ("parent_id") REFERENCES "issues"("id"),
    ADD CONSTRAINT "issues_waiting_count" CHECK ("waiting_count" >= 0),
    ADD CONSTRAINT "issues_delayed_has_time" CHECK (NOT "delayed" OR "not_before" IS NOT NULL),
    ADD CONSTRAINT "issues_idempotency_key_length" CHECK (char_length("idempotency_key") BETWEEN 1 AND 200),
    ADD CONSTRAINT "issues_retry_delay_range" CHECK ("retry_delay_seconds" BETWEEN 0 AND 86400),
    ADD CONSTRAINT "issues_max_execution_range" CHECK ("max_execution_seconds" BETWEEN 1 AND 604800);
-- payload and result: the API refuses more than 64 KB of compact JSON. No CHECK
-- here: PostgreSQL's text of the same value is longer (spaces, numbers written
-- out in full), so a CHECK on it would refuse values the API accepted.

-- One issue per idempotency key and company, for the issue's life.
CREATE UNIQUE INDEX "issues_company_id_idempotency_key_key" ON "issues"("company_id", "idempotency_key") WHERE "idempotency_key" IS NOT NULL;
-- A parent's sub-issues, oldest first (Issue.subIssues, issues(parentId:)).
CREATE INDEX "issues_parent_id_idx" ON "issues"("parent_id", "created_at", "id") WHERE "parent_id" IS NOT NULL;
-- What WAKE_DUE_ISSUES looks at: the delayed issues, soonest first.
CREATE INDEX "issues_delayed_idx" ON "issues"("not_before") WHERE "delayed";
-- Executions with a time limit, for the sweep (EXECUTION_TIMED_OUT).
CREATE INDEX "issues_execution_limited_idx" ON "issues"("execution_locked_at") WHERE "status" = 'IN_PROGRESS' AND "max_execution_seconds" IS NOT NULL;

-- issue_id waits on blocked_by_id: issue_id is ready only once blocked_by_id is DONE.
CREATE TABLE "issue_dependencies" (
    "issue_id" UUID NOT NULL,
    "blocked_by_id" UUID NOT NULL,
    "company_id" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    CONSTRAINT "issue_dependencies_pkey" PRIMARY KEY ("issue_id", "blocked_by_id"),
    CONSTRAINT "issue_dependencies_not_self" CHECK ("issue_id" <> "blocked_by_id"),
    CONSTRAINT "issue_dependencies_issue_id_fkey" FOREIGN KEY ("issue_id") REFERENCES "issues"("id"),
    CONSTRAINT "issue_dependencies_blocked_by_id_fkey" FOREIGN KEY ("blocked_by_id") REFERENCES "issues"("id"),
    CONSTRAINT "issue_dependencies_company_id_fkey" FOREIGN KEY ("company_id") REFERENCES "companies"("id")
);
CREATE INDEX "issue_dependencies_blocked_by_id_idx" ON "issue_dependencies"("blocked_by_id");

-- One row per company that has added an edge: an edge that could close a
-- cycle is added only while its company's row is locked, so two additions
-- that together would close a cycle are judged one after the other.
CREATE TABLE "dependency_graph_locks" (
    "company_id" UUID NOT NULL,
    CONSTRAINT "dependency_graph_locks_pkey" PRIMARY KEY ("company_id"),
    CONSTRAINT "dependency_graph_locks_company_id_fkey" FOREIGN KEY ("company_id") REFERENCES "companies"("id")
);

-- The claim indexes cover ready-by-storage issues only (claimable in
-- src/locks/shared/fragments.ts has the same WHERE).
DROP INDEX "issues_claimable_idx";
CREATE INDEX "issues_claimable_idx" ON "issues"("company_id", "assignee_agent_id", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts" AND "waiting_count" = 0 AND NOT "delayed";
DROP INDEX "issues_pool_idx";
CREATE INDEX "issues_pool_idx" ON "issues"("company_id", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts" AND "waiting_count" = 0 AND NOT "delayed" AND "assignee_agent_id" IS NULL;
DROP INDEX "issues_key_claimable_idx";
CREATE INDEX "issues_key_claimable_idx" ON "issues"("company_id", "concurrency_key", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts" AND "waiting_count" = 0 AND NOT "delayed";
DROP INDEX "issues_key_pool_idx";
CREATE INDEX "issues_key_pool_idx" ON "issues"("company_id", "concurrency_key", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts" AND "waiting_count" = 0 AND NOT "delayed" AND "assignee_agent_id" IS NULL;

-- The keys' turns follow the same claimable set (20261205000000_pool_turns,
-- with waiting_count and delayed added to it and to the changes it looks at).
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
           array_agg(CASE WHEN n."status" = 'OPEN' AND n."attempt_count" < n."max_attempts" AND n."waiting_count" = 0 AND NOT n."delayed" AND n."assignee_agent_id" IS NULL THEN n."priority" END),
           array_agg(false)
      INTO r_companies, r_old_keys, r_new_keys, r_was_active, r_is_active, r_was_claimable, r_is_claimable, r_served
      FROM "new_rows" n WHERE n."concurrency_key" <> '';
  ELSE
    SELECT array_agg(n."company_id"), array_agg(o."concurrency_key"), array_agg(n."concurrency_key"),
           array_agg(o."status" IN ('CLAIMED', 'IN_PROGRESS')), array_agg(n."status" IN ('CLAIMED', 'IN_PROGRESS')),
           array_agg(CASE WHEN o."status" = 'OPEN' AND o."attempt_count" < o."max_attempts" AND o."waiting_count" = 0 AND NOT o."delayed" AND o."assignee_agent_id" IS NULL THEN o."priority" END),
           array_agg(CASE WHEN n."status" = 'OPEN' AND n."attempt_count" < n."max_attempts" AND n."waiting_count" = 0 AND NOT n."delayed" AND n."assignee_agent_id" IS NULL THEN n."priority" END),
           array_agg(n."checkout_run_id" IS NOT NULL AND n."checkout_run_id" IS DISTINCT FROM o."checkout_run_id")
      INTO r_companies, r_old_keys, r_new_keys, r_was_active, r_is_active, r_was_claimable, r_is_claimable, r_served
      FROM "old_rows" o JOIN "new_rows" n ON n."id" = o."id"
     WHERE (o."concurrency_key" <> '' OR n."concurrency_key" <> ''
            OR (n."checkout_run_id" IS NOT NULL AND n."checkout_run_id" IS DISTINCT FROM o."checkout_run_id"))
       AND (o."status", o."attempt_count", o."max_attempts", o."priority", o."concurrency_key", o."checkout_run_id", o."assignee_agent_id", o."waiting_count", o."delayed")
           IS DISTINCT FROM (n."status", n."attempt_count", n."max_attempts", n."priority", n."concurrency_key", n."checkout_run_id", n."assignee_agent_id", n."waiting_count", n."delayed");
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
                                  AND i."status" = 'OPEN' AND i."attempt_count" < i."max_attempts" AND i."waiting_count" = 0 AND NOT i."delayed" AND i."assignee_agent_id" IS NULL
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

-- A blocker that becomes DONE frees one wait of each issue that depends on it;
-- one that leaves DONE (no verb does: DONE is terminal; a hand edit might)
-- adds the wait back. Runs at the end of the statement that changes the
-- status, so a dependent is never claimable before the DONE has committed;
-- its queries take a snapshot of their own, so they see every edge committed
-- before the blocker's row was locked (the edge statements take that row FOR
-- SHARE before they count it, so an edge and a status change are never
-- judged on each other's old versions). Once per statement, not per row: the
-- dependents of everything the statement finished are locked together in id
-- order, so two grouped releases that free shared dependents never wait on
-- each other in a cycle.
CREATE FUNCTION "baton_dependents_follow_done"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_done UUID[];
  v_undone UUID[];
BEGIN
  SELECT array_agg(n."id") FILTER (WHERE n."status" = 'DONE'), array_agg(n."id") FILTER (WHERE n."status" <> 'DONE')
    INTO v_done, v_undone
    FROM "new_rows" n JOIN "old_rows" o ON o."id" = n."id"
   WHERE (o."status" = 'DONE') IS DISTINCT FROM (n."status" = 'DONE');
  IF v_done IS NULL AND v_undone IS NULL THEN
    RETURN NULL;
  END IF;
  v_done := coalesce(v_done, '{}');
  v_undone := coalesce(v_undone, '{}');
  PERFORM 1 FROM "issues" i
   WHERE i."id" IN (SELECT d."issue_id" FROM "issue_dependencies" d WHERE d."blocked_by_id" = ANY(v_done || v_undone))
   ORDER BY i."id"
     FOR UPDATE;
  UPDATE "issues" i SET "waiting_count" = i."waiting_count" + x."delta"
    FROM (SELECT d."issue_id", sum(CASE WHEN d."blocked_by_id" = ANY(v_done) THEN -1 ELSE 1 END)::int AS "delta"
            FROM "issue_dependencies" d WHERE d."blocked_by_id" = ANY(v_done || v_undone)
           GROUP BY d."issue_id") x
   WHERE i."id" = x."issue_id";
  RETURN NULL;
END $$;

CREATE TRIGGER "issues_dependents_follow_done" AFTER UPDATE ON "issues"
    REFERENCING OLD TABLE AS "old_rows" NEW TABLE AS "new_rows"
    FOR EACH STATEMENT EXECUTE FUNCTION "baton_dependents_follow_done"();

-- The path p_from … p_to along blockedBy edges (p_from waits on the next, and
-- so on up to p_to), each issue once, or NULL when p_to is not reachable:
-- adding "p_to waits on p_from" would close exactly this cycle. Reachability
-- first, set-based (most additions close no cycle); then breadth first, so
-- the path is a shortest one, with the issues seen kept in a temporary table
-- keyed by id, so the search costs what the edges it reads cost (an array of
-- the issues seen, and edges joined by hash, made it quadratic: 63 s for a
-- chain of 20,000, now under a second).
CREATE FUNCTION "baton_dependency_path"(p_from UUID, p_to UUID) RETURNS UUID[] LANGUAGE plpgsql AS $$
DECLARE
  v_depth INTEGER := 0;
  v_back UUID[] := ARRAY[p_to];
  v_at UUID := p_to;
BEGIN
  IF p_from = p_to THEN
    RETURN ARRAY[p_from];
  END IF;
  IF NOT EXISTS (
    -- (each step probes the primary key: OFFSET 0 keeps the LATERAL a probe; as a join the planner hashed every edge, once per step)
    WITH RECURSIVE up(id) AS (
      SELECT p_from
      UNION
      SELECT n."blocked_by_id" FROM up CROSS JOIN LATERAL (SELECT d."blocked_by_id" FROM "issue_dependencies" d WHERE d."issue_id" = up.id OFFSET 0) n
    ) SELECT 1 FROM up WHERE up.id = p_to) THEN
    RETURN NULL;
  END IF;
  CREATE TEMP TABLE IF NOT EXISTS "baton_path_seen" ("id" UUID PRIMARY KEY, "came_from" UUID, "depth" INTEGER NOT NULL) ON COMMIT DELETE ROWS;
  CREATE INDEX IF NOT EXISTS "baton_path_seen_depth" ON "baton_path_seen" ("depth");
  DELETE FROM "baton_path_seen";
  INSERT INTO "baton_path_seen" VALUES (p_from, NULL, 0);
  WHILE NOT EXISTS (SELECT 1 FROM "baton_path_seen" WHERE "id" = p_to) LOOP
    INSERT INTO "baton_path_seen" ("id", "came_from", "depth")
      SELECT DISTINCT ON (n."blocked_by_id") n."blocked_by_id", s."id", v_depth + 1
        FROM "baton_path_seen" s
       CROSS JOIN LATERAL (SELECT d."blocked_by_id" FROM "issue_dependencies" d WHERE d."issue_id" = s."id" OFFSET 0) n
       WHERE s."depth" = v_depth
       ORDER BY n."blocked_by_id", s."id"
          ON CONFLICT ("id") DO NOTHING;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
    v_depth := v_depth + 1;
  END LOOP;
  -- walk back from p_to to p_from (appending: a plpgsql array grows in place), then turn it round
  WHILE v_at <> p_from LOOP
    SELECT "came_from" INTO v_at FROM "baton_path_seen" WHERE "id" = v_at;
    v_back := v_back || v_at;
  END LOOP;
  RETURN ARRAY(SELECT x FROM unnest(v_back) WITH ORDINALITY AS t(x, n) ORDER BY n DESC);
END $$;
