// Ledger retention: lock_events is partitioned by the UTC day its events were
// appended (migration 20261202000000_ledger_retention), so old history goes
// by dropping whole partitions: no DELETE, no bloat, and appends never wait.
//
// Two promises are kept:
// - An append always finds a partition: partitions exist a week ahead, made
//   by every process that opens the database (migrate) and topped up by every
//   retention pass and, hourly, by every API instance.
// - A reader is never silently skipped forward: before a partition goes, each
//   company's newest seq in it is recorded in lock_events_pruned, and a read
//   resuming below that seq is refused with EVENTS_PRUNED (src/events/ledger.ts).
//   The record commits before the partition is detached, and DETACH ...
//   CONCURRENTLY waits for every statement that could still read it, so no
//   reader can see the rows gone and the record not yet there.
import pg from "pg";
import type { Queryable } from "../db/client.js";
import { sql } from "../db/sql.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

/** Days of partitions kept ready beyond today (UTC). */
export const PARTITION_DAYS_AHEAD = 7;

/** The minimum a caller needs to run SQL: a pg client or pool. */
type Sql = Pick<pg.ClientBase, "query">;

/**
 * ENSURE_LEDGER_PARTITIONS: partitions from the end of the newest one up to
 * PARTITION_DAYS_AHEAD days after today; returns the names it made. Each is
 * created apart and attached (SHARE UPDATE EXCLUSIVE on lock_events: appends
 * and reads go on). A database migrated before retention existed has no such
 * function: nothing to do.
 */
export async function ensureLedgerPartitions(db: Sql): Promise<string[]> {
  const { rows: found } = await db.query<{ ok: boolean }>(`SELECT to_regprocedure('baton_ensure_ledger_partitions(int)') IS NOT NULL AS ok`);
  if (!found[0]?.ok) return [];
  const { rows } = await db.query<{ name: string }>(`/* ENSURE_LEDGER_PARTITIONS */ SELECT baton_ensure_ledger_partitions($1::int) AS name`, [PARTITION_DAYS_AHEAD]);
  return rows.map((r) => r.name);
}

export interface LedgerPrune {
  /** Partitions detached and dropped, oldest first. */
  dropped: string[];
  /** Partitions made ahead. */
  created: string[];
  /** Companies whose pruned-through seq was raised. */
  companies: number;
  /** false: another process held the retention lock; this pass did nothing. */
  ran: boolean;
}

/** Session advisory lock held by the one process pruning at a time. */
const RETENTION_LOCK = 7290012;

/**
 * One retention pass over the ledger: drops every partition whose whole day
 * is older than `retentionDays` (0 keeps everything), then tops up the
 * partitions ahead. Runs on its own connection (DETACH ... CONCURRENTLY
 * cannot run in a transaction, and the pass is fenced by a session lock), so
 * `databaseUrl`, not a pool. Several recovery processes may call it; one
 * works, the others return at once.
 */
export async function pruneLedger(databaseUrl: string, retentionDays: number, shouldStop: () => boolean = () => false): Promise<LedgerPrune> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: "baton-retention" });
  client.on("error", () => {}); // a lost connection fails the query in flight; nothing else to do
  await client.connect();
  const result: LedgerPrune = { dropped: [], created: [], companies: 0, ran: false };
  try {
    // A stuck lock wait here must not hold anything up for long: give up and try next pass.
    await client.query("SET lock_timeout = '2s'");
    const { rows: got } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1) AS ok", [RETENTION_LOCK]);
    if (!got[0]?.ok) return result;
    result.ran = true;
    try {
      // A pass stopped between its two DETACH transactions leaves the partition
      // half detached; its seqs were recorded before the detach began.
      const { rows: pending } = await client.query<{ name: string }>(`SELECT name FROM lock_event_partitions WHERE detach_pending`);
      for (const { name } of pending) {
        await client.query(`ALTER TABLE lock_events DETACH PARTITION ${pg.escapeIdentifier(name)} FINALIZE`);
        await client.query(`DROP TABLE ${pg.escapeIdentifier(name)}`);
        result.dropped.push(name);
      }
      if (retentionDays > 0) {
        // EXPIRED_LEDGER_PARTITIONS: whole days before the window; no new event can land in
        // one (an event's `at` is the clock when it was appended).
        const { rows: expired } = await client.query<{ name: string }>(
          `/* EXPIRED_LEDGER_PARTITIONS */
           SELECT name FROM lock_event_partitions
            WHERE NOT detach_pending AND to_at <= now() - make_interval(days => $1)
            ORDER BY to_at`,
          [retentionDays],
        );
        for (const { name } of expired) {
          if (shouldStop()) break;
          const partition = pg.escapeIdentifier(name);
          // RECORD_PRUNED_THROUGH: each company's newest seq in the partition, one
          // probe of its key per company, committed before the rows go. Only raised.
          const recorded = await client.query(
            `/* RECORD_PRUNED_THROUGH */
             INSERT INTO lock_events_pruned AS p (company_id, through_seq)
             SELECT c.id, m.seq FROM companies c
               CROSS JOIN LATERAL (SELECT e.seq FROM ${partition} e WHERE e.company_id = c.id ORDER BY e.seq DESC LIMIT 1) m
             ON CONFLICT (company_id) DO UPDATE SET through_seq = greatest(p.through_seq, excluded.through_seq), pruned_at = now()
             WHERE p.through_seq < excluded.through_seq`,
          );
          result.companies += recorded.rowCount ?? 0;
          await client.query(`ALTER TABLE lock_events DETACH PARTITION ${partition} CONCURRENTLY`);
          await client.query(`DROP TABLE ${partition}`);
          result.dropped.push(name);
        }
      }
      result.created = await ensureLedgerPartitions(client);
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [RETENTION_LOCK]).catch(() => {});
    }
    return result;
  } finally {
    await client.end().catch(() => {});
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
    db.$queryRaw(sql`/* ENSURE_LEDGER_PARTITIONS */ SELECT count(*)::int AS n FROM baton_ensure_ledger_partitions(${PARTITION_DAYS_AHEAD}::int)`).catch(
      (err: unknown) => log("warn", "could not make the ledger's partitions ahead; the next hour tries again", errorFields(err)),
    );
  }, KEEPER_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
