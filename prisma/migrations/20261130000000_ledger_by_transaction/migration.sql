-- The ledger numbers events by the transaction that wrote them, not by a
-- per-company counter: no lock is held from an event's append to its commit,
-- so the commits of one company no longer happen one at a time.
-- docs/events.md ("How seq is made") gives the whole argument; in short:
--
--   seq = xid * 2^20 + position within the statement
--
-- where xid is pg_current_xact_id() of the writing transaction. A reader sees
-- only events with seq < baton_event_horizon(): the oldest transaction its own
-- snapshot saw in progress (that could write this ledger), shifted the same
-- way. Every transaction with a smaller xid has ended, so no event below the
-- horizon can still appear, and a reader that resumes after a seq it was given
-- never skips one. Seqs are increasing, not gapless.
--
-- Events of one issue must also be numbered in the order they happened. A
-- transaction can take its xid (at its first row lock) and then wait for an
-- issue row that a younger transaction changes and commits; its event would
-- then sort before the younger one's. So every statement that writes an
-- event stamps the issue row with its xid (baton_event_xid), and the stamp
-- refuses to go backwards: the statement fails as a serialization failure
-- (40001), changes nothing, and runs again with a new, larger xid.

ALTER TABLE "issues" ADD COLUMN "last_event_xid" xid8 NOT NULL DEFAULT '0';
ALTER TABLE "companies" DROP COLUMN "last_event_seq";

-- Events appended before this migration keep their seqs (1, 2, 3, ...): every
-- xid-based seq is larger, so a reader resuming from an old seq loses nothing.

CREATE FUNCTION "baton_order_conflict"("previous" xid8) RETURNS xid8 LANGUAGE plpgsql AS $$
BEGIN
  IF previous = pg_current_xact_id() THEN
    RAISE EXCEPTION 'an issue''s events were appended by two statements of one transaction'
      USING HINT = 'append all of a transaction''s events in one statement (docs/events.md)';
  END IF;
  RAISE EXCEPTION 'event order conflict: issue changed by a younger transaction (%) first', previous
    USING ERRCODE = '40001';
END $$;

-- The xid to stamp on an issue row whose change writes an event: this
-- transaction's, which must be newer than the row's last event's.
CREATE FUNCTION "baton_event_xid"("previous" xid8) RETURNS xid8 LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN previous < pg_current_xact_id() THEN pg_current_xact_id() ELSE baton_order_conflict(previous) END
$$;

CREATE FUNCTION "baton_bad_event"("stamp" xid8, "position" bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  IF stamp <> pg_current_xact_id() THEN
    RAISE EXCEPTION 'an event was appended for an issue row the statement did not stamp with baton_event_xid';
  END IF;
  RAISE EXCEPTION 'a statement appended more than 1048576 events (position %)', position;
END $$;

-- The seq of the event at `position` (0, 1, ...) of this statement, for an
-- issue row stamped `stamp`. Checks the stamp, so a statement that forgot it
-- fails at once instead of misordering the ledger.
CREATE FUNCTION "baton_event_seq"("stamp" xid8, "position" bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN stamp = pg_current_xact_id() AND position >= 0 AND position < 1048576
              THEN stamp::text::bigint * 1048576 + position
              ELSE baton_bad_event(stamp, position) END
$$;

-- The reader's horizon: events below it are final. Taken from the snapshot
-- of the calling statement, so it matches exactly the rows that statement
-- sees: the oldest transaction the snapshot saw in progress, or, with none,
-- the snapshot's xmax (every older transaction had ended). A transaction in
-- progress that is running in another database right now cannot write this
-- ledger and is skipped; one whose database cannot be seen (it has ended
-- since, or it is a prepared transaction) counts, to be safe. So a long
-- transaction elsewhere on the cluster delays nothing here. Primary only: a
-- standby's snapshots do not list the transactions in progress.
CREATE FUNCTION "baton_standby_refused"() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the lock-event ledger is read from the primary only: a standby''s snapshot does not list the transactions in progress';
END $$;

CREATE FUNCTION "baton_event_horizon"() RETURNS bigint LANGUAGE sql STABLE AS $$
  WITH snap AS (SELECT pg_current_snapshot() AS s),
  elsewhere AS (
    SELECT a.backend_xid FROM pg_stat_activity a
     WHERE a.backend_xid IS NOT NULL AND a.datid IS DISTINCT FROM (SELECT oid FROM pg_database WHERE datname = current_database())
  )
  SELECT CASE WHEN pg_is_in_recovery() THEN baton_standby_refused() ELSE
         coalesce(
           (SELECT min(x) FROM snap, pg_snapshot_xip(snap.s) AS x
             WHERE xid(x) NOT IN (SELECT backend_xid FROM elsewhere)),
           (SELECT pg_snapshot_xmax(snap.s) FROM snap)
         )::text::bigint * 1048576 END
$$;

-- Above every seq committed before the calling statement began: the
-- snapshot's xmax shifted the same way. A stream uses it to tell a message
-- that announces a seq no transaction can have written (docs/events.md).
CREATE FUNCTION "baton_event_ceiling"() RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint * 1048576
$$;

COMMENT ON COLUMN "issues"."last_event_xid" IS 'xid of the transaction that wrote this issue''s newest ledger event (baton_event_xid)';
