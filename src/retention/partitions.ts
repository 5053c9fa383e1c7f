// Ledger retention: lock_events is partitioned by the UTC day its events were
// appended (migration 20261202000000_ledger_retention), so old history goes
// by dropping whole partitions: no DELETE, no bloat, and appends never wait.
//
// Two promises are kept:
// - An append always finds a partition: every day from today to a week ahead
//   has one (gaps filled, whatever exists beyond), made by every process that
//   opens the database (src/bin/database.ts) and topped up by every retention pass and,
//   hourly, by every API instance.
// - A reader is never silently skipped forward: before a partition goes, each
//   company's newest seq in it is recorded in lock_events_pruned, and a read
//   resuming below that seq is refused with EVENTS_PRUNED (src/events/history.ts).
//   The record commits before the partition is detached, and DETACH ...
//   CONCURRENTLY waits for every statement that could still read it, so no
//   reader can see the rows gone and the record not yet there.
import pg from "pg";
import type { Queryable } from "../db/client.js";
import { sql, statement } from "../db/sql.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

/** Days of partitions kept ready beyond today (UTC). */
export const PARTITION_DAYS_AHEAD = 7;

/** The minimum a caller needs to run SQL: a pg client or pool. */
type Sql = Pick<pg.ClientBase, "query">;

/**
 * Every day from today to PARTITION_DAYS_AHEAD days
 * after it held by a partition, whatever exists beyond or between (each gap
 * filled, partitions that exist left as they are); returns the names it
 * made. Each is created apart and attached (SHARE UPDATE EXCLUSIVE on
 * lock_events: appends and reads go on). A database migrated before
 * retention existed has no such function: nothing to do.
 */
export async function ensureLedgerPartitions(db: Sql | string): Promise<string[]> {
  if (typeof db === "string") {
    const client = new pg.Client({ connectionString: db, application_name: "baton-partitions" });
    client.on("error", () => {}); // a lost connection fails the query in flight, which the caller sees
    await client.connect();
    try {
      return await ensureLedgerPartitions(client);
    } finally {
      await client.end().catch(() => {});
    }
  }
  const { rows: found } = await db.query<{ ok: boolean }>(
    `/* HAS_LEDGER_PARTITIONS_FUNCTION */ SELECT to_regprocedure('baton_ensure_ledger_partitions(int)') IS NOT NULL AS ok`,
  );
  if (!found[0]?.ok) return [];
  const { rows } = await db.query<{ name: string }>(`/* ENSURE_LEDGER_PARTITIONS */ SELECT baton_ensure_ledger_partitions($1::int) AS name`, [
    PARTITION_DAYS_AHEAD,
  ]);
  return rows.map((r) => r.name);
}

export interface LedgerPrune {
  /** Partitions detached and dropped, oldest first (and detached tables a failed pass left behind). */
  dropped: string[];
  /** Partitions made ahead. */
  created: string[];
  /** Companies whose pruned-through seq was raised. */
  companies: number;
  /** false: another process held the retention lock; this pass did nothing. */
  ran: boolean;
  /** What failed, one line each; the pass went on with the steps that do not depend on it. */
  failures: string[];
}

/** Session advisory lock held by the one process pruning at a time. */
const RETENTION_LOCK = 7290012;

/**
 * How long a detach may wait for the transactions that can still see its
 * partition (a backup, a long report). The wait holds up no claim or read:
 * only this pass, which runs beside the sweeps and is cut short on stop.
 */
const DETACH_WAIT = "10min";

/**
 * One retention pass over the ledger: drops every partition whose whole day
 * is older than `retentionDays` (0 keeps everything), then tops up the
 * partitions ahead. Runs on its own connection (DETACH ... CONCURRENTLY
 * cannot run in a transaction, and the pass is fenced by a session lock), so
 * `databaseUrl`, not a pool. Several recovery processes may call it; one
 * works, the others return at once. `signal` ends it at once: its statement
 * is cancelled and its connection closed, and a detach cut short is finished
 * by the next pass (test/retention/retention.test.ts, "a pass stopped …").
 */
export async function pruneLedger(databaseUrl: string, retentionDays: number, signal?: AbortSignal): Promise<LedgerPrune> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: "baton-retention" });
  client.on("error", () => {}); // a lost connection fails the query in flight; nothing else to do
  await client.connect();
  // A backend whose client went away keeps running its statement (a detach
  // waiting on readers would finish later, beside the next pass): cancel it first.
  const stop = () => void cancelBackend(databaseUrl, backendPid(client)).finally(() => client.end().catch(() => {}));
  signal?.addEventListener("abort", stop, { once: true });
  const result: LedgerPrune = { dropped: [], created: [], companies: 0, ran: false, failures: [] };
  const failed = (step: string, err: unknown) => result.failures.push(`${step}: ${(err as Error).message}`);
  const ident = (name: string) => pg.escapeIdentifier(name);
  /** DETACH ... CONCURRENTLY / FINALIZE, waiting as long as DETACH_WAIT for readers, then the drop. */
  const detachAndDrop = async (name: string, how: "CONCURRENTLY" | "FINALIZE") => {
    await client.query(`SET lock_timeout = '${DETACH_WAIT}'`);
    try {
      await client.query(`/* DETACH_LEDGER_PARTITION */ ALTER TABLE lock_events DETACH PARTITION ${ident(name)} ${how}`);
    } finally {
      await client.query("SET lock_timeout = '2s'");
    }
    await dropDetached(name);
  };
  const dropDetached = async (name: string) => {
    await client.query(`/* DROP_LEDGER_TABLE */ DROP TABLE ${ident(name)}`);
    result.dropped.push(name);
  };
  try {
    // Plain lock waits here give up soon and try next pass.
    await client.query("SET lock_timeout = '2s'");
    const { rows: got } = await client.query<{ ok: boolean }>("/* TRY_RETENTION_LOCK */ SELECT pg_try_advisory_lock($1) AS ok", [RETENTION_LOCK]);
    if (!got[0]?.ok) return result;
    result.ran = true;
    try {
      if (retentionDays > 0) {
        try {
          // Tables a pass detached but could not drop (it
          // died, or the drop timed out). They are no longer partitions, so nothing
          // reads them; their seqs were recorded before the detach.
          const { rows: orphans } = await client.query<{ name: string }>(
            `/* LEFT_BEHIND_LEDGER_TABLES */
             SELECT c.relname AS name FROM pg_class c
              WHERE c.relkind = 'r' AND c.relnamespace = (SELECT l.relnamespace FROM pg_class l WHERE l.oid = 'lock_events'::regclass)
                AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
                AND (c.relname = 'lock_events_history'
                     OR (c.relname ~ '^lock_events_[0-9]{8}$'
                         AND to_date(substr(c.relname, 13), 'YYYYMMDD') + 1 <= (now() - make_interval(days => $1)) AT TIME ZONE 'UTC'))
              ORDER BY c.relname`,
            [retentionDays],
          );
          for (const { name } of orphans) await dropDetached(name);
          // A pass stopped between its two DETACH transactions leaves the partition
          // detach-pending (new statements no longer see it); finished here.
          const { rows: pending } = await client.query<{ name: string }>(
            `/* DETACH_PENDING_PARTITIONS */ SELECT name FROM lock_event_partitions WHERE detach_pending`,
          );
          for (const { name } of pending) await detachAndDrop(name, "FINALIZE");
          // Whole days before the window; no new event can land in
          // one (an event's `at` is the clock when it was appended).
          const { rows: expired } = await client.query<{ name: string }>(
            `/* EXPIRED_LEDGER_PARTITIONS */
             SELECT name FROM lock_event_partitions
              WHERE NOT detach_pending AND to_at <= now() - make_interval(days => $1)
              ORDER BY to_at`,
            [retentionDays],
          );
          for (const { name } of expired) {
            if (signal?.aborted) break;
            // Each company's newest seq in the partition, one
            // probe of its key per company, committed before the rows go. Only raised.
            const recorded = await client.query(
              `/* RECORD_PRUNED_THROUGH */
               INSERT INTO lock_events_pruned AS p (company_id, through_seq)
               SELECT c.id, m.seq FROM companies c
                 CROSS JOIN LATERAL (SELECT e.seq FROM ${ident(name)} e WHERE e.company_id = c.id ORDER BY e.seq DESC LIMIT 1) m
               ON CONFLICT (company_id) DO UPDATE SET through_seq = greatest(p.through_seq, excluded.through_seq), pruned_at = now()
               WHERE p.through_seq < excluded.through_seq`,
            );
            result.companies += recorded.rowCount ?? 0;
            await detachAndDrop(name, "CONCURRENTLY");
          }
        } catch (err) {
          // One partition at a time can be detach-pending: the rest waits for the next pass.
          if (!signal?.aborted) failed("dropping expired days", err);
        }
      }
      try {
        if (!signal?.aborted) result.created = await ensureLedgerPartitions(client);
      } catch (err) {
        if (!signal?.aborted) failed("making days ahead", err);
      }
    } finally {
      await client.query("/* RELEASE_RETENTION_LOCK */ SELECT pg_advisory_unlock($1)", [RETENTION_LOCK]).catch(() => {});
    }
    return result;
  } finally {
    signal?.removeEventListener("abort", stop);
    await client.end().catch(() => {});
  }
}

/** The backend's pid, which node-postgres keeps from the connection's start but does not type. */
const backendPid = (client: pg.Client): number | undefined => (client as unknown as { processID?: number | null }).processID ?? undefined;

/** Cancels the statement a backend is running, from a connection of its own; quiet if it cannot. */
async function cancelBackend(databaseUrl: string, pid: number | undefined): Promise<void> {
  if (pid === undefined) return;
  const canceller = new pg.Client({ connectionString: databaseUrl, application_name: "baton-retention-stop", connectionTimeoutMillis: 2_000 });
  canceller.on("error", () => {});
  try {
    await canceller.connect();
    await canceller.query("/* CANCEL_RETENTION_PASS */ SELECT pg_cancel_backend($1)", [pid]);
  } catch {
    // the database is away: the backend's statement ends with its connection
  } finally {
    await canceller.end().catch(() => {});
  }
}

/** How often an API instance tops up the partitions ahead. */
const KEEPER_EVERY_MS = 60 * 60 * 1000;

/**
 * Every API instance tops up the partitions ahead once an hour, so appends
 * find a partition even where no recovery process runs and the server stays
 * up for weeks. Idempotent and cheap when nothing is missing (a catalog read).
 * Returns the function that stops it.
 */
export function keepLedgerPartitions(db: Queryable, log: Logger): () => void {
  const timer = setInterval(() => {
    const ahead = statement("KEEP_LEDGER_PARTITIONS_AHEAD", sql`SELECT count(*)::int AS n FROM baton_ensure_ledger_partitions(${PARTITION_DAYS_AHEAD}::int)`);
    db.$queryRaw(ahead).catch((err: unknown) => log("warn", "could not make the ledger's partitions ahead; the next hour tries again", errorFields(err)));
  }, KEEPER_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
