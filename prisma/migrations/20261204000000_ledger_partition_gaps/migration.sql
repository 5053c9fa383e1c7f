-- The ledger's days ahead are made by what is missing, not by what is newest
-- (docs/operations.md, "Retention"; docs/invariants.md #16): a partition
-- beyond the days ahead (after a forward jump of the database clock, or made
-- by hand) stops no day before it from being made, and the gauge
-- baton_ledger_partitions_ahead_days counts only the days held without a gap.

-- The first instant from now on that no partition holds: the end of the
-- partitions that follow one another without a gap from now. A partition
-- being detached holds nothing for new statements, and a DEFAULT partition
-- (Baton never makes one) is no day: neither counts. Ranges never overlap, so
-- at most one partition holds any instant and the walk is a chain.
CREATE FUNCTION "baton_ledger_covered_until"() RETURNS timestamptz LANGUAGE sql STABLE AS $$
  WITH RECURSIVE
    parts AS MATERIALIZED (
      SELECT coalesce(p.from_at, '-infinity') AS from_at, p.to_at FROM lock_event_partitions p
       WHERE NOT p.detach_pending AND p.to_at IS NOT NULL),
    walk(t) AS (
      SELECT now()
      UNION ALL
      SELECT p.to_at FROM walk w JOIN parts p ON p.from_at <= w.t AND p.to_at > w.t)
  SELECT max(t) FROM walk
$$;

-- Makes sure every instant from today (UTC) to the end of `ahead` days after
-- it is held by a partition, whatever exists beyond or between: each stretch
-- no partition holds becomes partitions of its own, split at UTC midnights
-- (a whole day is named lock_events_YYYYMMDD), and partitions that exist are
-- left as they are, the history partition (FROM MINVALUE) included. A stretch
-- of which a DEFAULT partition already holds rows is left to it (attaching
-- the stretch would fail on those rows). Each is created on its own and then
-- attached: ATTACH PARTITION takes only SHARE UPDATE EXCLUSIVE on lock_events,
-- so appends and reads go on meanwhile. Idempotent; concurrent callers queue
-- on an advisory lock. Returns the partitions made, in time order.
CREATE OR REPLACE FUNCTION "baton_ensure_ledger_partitions"("ahead" int) RETURNS SETOF text LANGUAGE plpgsql
    SET "TimeZone" = 'UTC' SET "DateStyle" = 'ISO, YMD' AS $$
DECLARE
  -- From today at the earliest: every append is stamped with the clock, so
  -- no event can fall in days already past that have no partition.
  cursor_at timestamptz := date_trunc('day', now());
  stop_at timestamptz := date_trunc('day', now()) + make_interval(days => ahead + 1);
  held_until timestamptz;
  piece_end timestamptz;
  default_name text;
  in_default boolean;
  base text;
  name text;
  n int;
BEGIN
  PERFORM pg_advisory_xact_lock(7290011);
  SELECT c.relname::text INTO default_name
    FROM pg_partitioned_table pt JOIN pg_class c ON c.oid = pt.partdefid
   WHERE pt.partrelid = 'lock_events'::regclass;
  WHILE cursor_at < stop_at LOOP
    -- Held already (by a detach-pending partition too: its range cannot be attached again).
    SELECT coalesce(p.to_at, 'infinity') INTO held_until FROM lock_event_partitions p
     WHERE p.name IS DISTINCT FROM default_name
       AND coalesce(p.from_at, '-infinity') <= cursor_at AND coalesce(p.to_at, 'infinity') > cursor_at;
    IF FOUND THEN
      cursor_at := held_until;
      CONTINUE;
    END IF;
    -- Not held: up to the next partition, the next midnight or the end, whichever comes first.
    SELECT least(min(p.from_at), date_trunc('day', cursor_at) + interval '1 day', stop_at) INTO piece_end
      FROM lock_event_partitions p WHERE p.from_at > cursor_at;
    in_default := false;
    IF default_name IS NOT NULL THEN
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE "at" >= $1 AND "at" < $2)', default_name)
         INTO in_default USING cursor_at, piece_end;
    END IF;
    IF NOT in_default THEN
      base := 'lock_events_' || to_char(cursor_at, 'YYYYMMDD')
              || CASE WHEN cursor_at = date_trunc('day', cursor_at) THEN '' ELSE to_char(cursor_at, '_HH24MISS') END;
      name := base;
      n := 1;
      -- A table of that name that is no partition (detached, not yet dropped) is left alone.
      WHILE to_regclass(quote_ident(name)) IS NOT NULL LOOP
        n := n + 1;
        name := base || '_' || n;
      END LOOP;
      EXECUTE format('CREATE TABLE %I (LIKE lock_events INCLUDING DEFAULTS)', name);
      EXECUTE format('ALTER TABLE lock_events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, cursor_at, piece_end);
      RETURN NEXT name;
    END IF;
    cursor_at := piece_end;
  END LOOP;
END $$;
