-- Retention (docs/operations.md, "Retention"): the ledger is partitioned by
-- the day its events were written, so that old history goes by dropping whole
-- partitions (no DELETE, no bloat, no vacuum debt), and finished runs that no
-- issue refers to any more can be deleted in small batches.
--
-- lock_events becomes a table partitioned by range of `at` (the database
-- clock when the event was appended: clock_timestamp(), never earlier than the
-- statement that wrote it), one partition per UTC day. A partitioned table's
-- primary key must hold its partition key, so the key is (company_id, seq,
-- at); seq alone is still unique by construction (xid × 2^20 + position,
-- docs/events.md), and every read still walks (company_id, seq).
--
-- Readers keep their promise "after the seq you were given, nothing is
-- skipped" through lock_events_pruned: before a partition is dropped, each
-- company's newest seq in it is recorded there, and a read that resumes below
-- it is refused (EVENTS_PRUNED) instead of silently starting later.

ALTER TABLE "lock_events" RENAME TO "lock_events_history";
ALTER TABLE "lock_events_history" RENAME CONSTRAINT "lock_events_pkey" TO "lock_events_history_pkey";
ALTER INDEX "lock_events_company_id_issue_id_seq_idx" RENAME TO "lock_events_history_company_id_issue_id_seq_idx";

CREATE TABLE "lock_events" (
    "company_id" UUID NOT NULL,
    "seq" BIGINT NOT NULL,
    "issue_id" UUID NOT NULL,
    "kind" "lock_event_kind" NOT NULL,
    "status" "issue_status" NOT NULL,
    "run_id" UUID,
    "agent_id" UUID,
    "checkout_run_id" UUID,
    "execution_run_id" UUID,
    "reason" TEXT,
    "at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    CONSTRAINT "lock_events_pkey" PRIMARY KEY ("company_id", "seq", "at")
) PARTITION BY RANGE ("at");
CREATE INDEX "lock_events_company_id_issue_id_seq_idx" ON "lock_events"("company_id", "issue_id", "seq");

-- Per company, the newest seq that retention may have dropped: a reader
-- resuming after a smaller seq would miss events, and is told so.
CREATE TABLE "lock_events_pruned" (
    "company_id" UUID NOT NULL,
    "through_seq" BIGINT NOT NULL,
    "pruned_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    CONSTRAINT "lock_events_pruned_pkey" PRIMARY KEY ("company_id")
);

-- The ledger's partitions with their bounds, read from the catalog (never kept
-- on the side, so it cannot disagree with what PostgreSQL routes rows to).
-- from_at is NULL for a partition that starts at MINVALUE. The bounds are
-- printed by pg_get_expr in the session's TimeZone and DateStyle and parsed
-- back, so the function fixes both (UTC, ISO): whatever the caller's
-- settings, the text round-trips exactly.
CREATE FUNCTION "baton_ledger_partitions"()
    RETURNS TABLE ("name" text, "from_at" timestamptz, "to_at" timestamptz, "detach_pending" boolean)
    LANGUAGE sql STABLE SET "TimeZone" = 'UTC' SET "DateStyle" = 'ISO, YMD' AS $$
  SELECT c.relname::text,
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']*)''\)'))[1]::timestamptz,
         (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']*)''\)'))[1]::timestamptz,
         i.inhdetachpending
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = 'lock_events'::regclass
$$;
CREATE VIEW "lock_event_partitions" AS SELECT * FROM baton_ledger_partitions();

-- Makes sure partitions exist from the end of the newest one (or today) up to
-- `ahead` days after today (UTC), so no append ever finds no partition. Each
-- is created on its own and then attached: ATTACH PARTITION takes only SHARE
-- UPDATE EXCLUSIVE on lock_events, so appends and reads go on meanwhile
-- (CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE). Idempotent;
-- concurrent callers queue on an advisory lock. Returns the partitions made.
CREATE FUNCTION "baton_ensure_ledger_partitions"("ahead" int) RETURNS SETOF text LANGUAGE plpgsql
    SET "TimeZone" = 'UTC' SET "DateStyle" = 'ISO, YMD' AS $$
DECLARE
  last_end timestamptz;
  day date;
  name text;
BEGIN
  PERFORM pg_advisory_xact_lock(7290011);
  SELECT max(to_at) INTO last_end FROM lock_event_partitions;
  -- From today at the earliest: every append is stamped with the clock, so
  -- no event can fall in days already past that have no partition.
  day := greatest((last_end AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date);
  WHILE day <= (now() AT TIME ZONE 'UTC')::date + ahead LOOP
    name := 'lock_events_' || to_char(day, 'YYYYMMDD');
    EXECUTE format('CREATE TABLE %I (LIKE lock_events INCLUDING DEFAULTS)', name);
    EXECUTE format('ALTER TABLE lock_events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   name, day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
    RETURN NEXT name;
    day := day + 1;
  END LOOP;
END $$;

-- The events written before this migration stay where they are, attached as
-- one partition that ends at the next UTC midnight after its newest event
-- (or dropped at once when there are none): nothing is copied. Retention drops
-- it whole once its end is older than the retention window.
DO $$
DECLARE newest timestamptz;
BEGIN
  SELECT max("at") INTO newest FROM lock_events_history;
  IF newest IS NULL THEN
    DROP TABLE lock_events_history;
  ELSE
    ALTER TABLE lock_events_history DROP CONSTRAINT lock_events_history_pkey;
    EXECUTE format('ALTER TABLE lock_events ATTACH PARTITION lock_events_history FOR VALUES FROM (MINVALUE) TO (%L)',
                   ((newest AT TIME ZONE 'UTC')::date + 1)::timestamp AT TIME ZONE 'UTC');
  END IF;
END $$;

SELECT count(*) FROM baton_ensure_ledger_partitions(7);

-- Finished runs, oldest first: what run retention deletes (in batches).
CREATE INDEX "heartbeat_runs_finished_idx" ON "heartbeat_runs"("finished_at") WHERE "status" <> 'RUNNING';

-- One appending statement per transaction. The primary key used to refuse a
-- second statement's events (it would reuse positions 0, 1, ... and so seqs);
-- with `at` in the key it no longer does, so the seq function refuses it: the
-- first event of a statement (position 0) checks that no earlier statement of
-- this transaction appended, and marks the transaction. One call per
-- statement, not per event.
CREATE FUNCTION "baton_first_append"() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('baton.appended_in', true) = pg_current_xact_id()::text THEN
    RAISE EXCEPTION 'a transaction appended lock events in two statements'
      USING HINT = 'append all of a transaction''s events in one statement (docs/events.md)';
  END IF;
  PERFORM set_config('baton.appended_in', pg_current_xact_id()::text, true);
  RETURN true;
END $$;

CREATE OR REPLACE FUNCTION "baton_event_seq"("stamp" xid8, "position" bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN stamp = pg_current_xact_id() AND position >= 0 AND position < 1048576
               AND (position > 0 OR baton_first_append())
              THEN stamp::text::bigint * 1048576 + position
              ELSE baton_bad_event(stamp, position) END
$$;
