// The ledger as the streams of one API instance read it. A company's streams
// usually stand at the same seq, so one gap (a lost or reordered message, a
// Redis reconnect, a watcher nudge) makes hundreds of them ask for the same
// page at the same moment, and a dashboard reconnecting with many tabs asks for
// the same start. Identical reads asked while one is in flight share it: one
// query per company instead of one per subscriber. Nothing is cached after a
// read settles, and ledger rows never change once committed, so a shared
// answer is as good as one's own, except that it may be a moment older: a
// caller that needs rows up to a seq it knows to be committed reads again
// (stream.ts).
import type { Queryable } from "../db/client.js";
import { eventJson, queryOne, sql, statement } from "../db/sql.js";
import type { Sql } from "../db/sql.js";
import { EventsPrunedError, SeqAheadError } from "../domain/errors.js";
import type { LockEvent } from "../domain/types.js";

export interface LedgerPage {
  readonly events: readonly LockEvent[];
  /** Every event below it is final: one not in a short page does not exist. */
  readonly horizon: bigint;
  readonly ceiling: bigint;
  readonly startedAt: number;
  /** What retention dropped after the page's afterSeq, for refusePruned (read in the same statement). */
  readonly pruned: PrunedColumns;
}

export interface PrunedColumns {
  pruned_through: string | null;
  pruned_next: { next: string | null; first: string | null } | null;
}

/** Seqs are xid × 2^20 + position: one transaction's events lie in one block of X. */
const X = 1n << 20n;

/**
 * Columns `pruned_through` (the company's newest seq retention dropped) and,
 * only when that lies beyond afterSeq, `pruned_next`: `next`, the first final
 * event after afterSeq, and `first`, the first final event of next's
 * transaction. For refusePruned, read in the same statement as the page so
 * the two cannot disagree.
 */
export const prunedColumns = (companyId: string, afterSeq: bigint): Sql => sql`
  (SELECT x.through_seq::text FROM lock_events_pruned x WHERE x.company_id = ${companyId}::uuid) AS pruned_through,
  -- two probes of each day's key, and only for a read below the newest dropped seq
  (SELECT json_build_object('next', n.seq::text, 'first', f.seq::text)
     FROM lock_events_pruned x
    CROSS JOIN LATERAL (SELECT (SELECT k.seq FROM lock_events k
                                 WHERE k.company_id = x.company_id AND k.seq > ${afterSeq.toString()}::bigint AND k.seq < (SELECT baton_event_horizon())
                                 ORDER BY k.seq LIMIT 1) AS seq) n
    CROSS JOIN LATERAL (SELECT (SELECT k.seq FROM lock_events k
                                 WHERE k.company_id = x.company_id AND k.seq >= n.seq / 1048576 * 1048576 AND k.seq < (SELECT baton_event_horizon())
                                 ORDER BY k.seq LIMIT 1) AS seq) f
    WHERE x.company_id = ${companyId}::uuid AND x.through_seq > ${afterSeq.toString()}::bigint) AS pruned_next`;

/**
 * Refuses a read that resumes after `afterSeq` when retention dropped events
 * after it: the reader would otherwise skip them without knowing. Returns the
 * pruned-through seq the reader now knows of (`acknowledged`, raised when it
 * resumed at a point an EVENTS_PRUNED offered), for its next read.
 *
 * Day partitions split by `at` (the clock at the append) and seqs by
 * transaction id (taken at the first write), so a kept day can hold events
 * below the newest dropped seq T: transactions that took their id before its
 * midnight and appended after it. The offer is then the point just before the
 * oldest kept transaction after afterSeq (x × 2^20 − 1, a seq no event has
 * short of a statement of 2^20 events), accepted while that transaction
 * still has a kept event below T; every kept event after afterSeq comes from
 * there. An afterSeq that is a real seq below T is always refused: its
 * reader has not been told what was dropped.
 */
export function refusePruned(afterSeq: bigint, row: PrunedColumns, acknowledged: bigint | null = null): bigint | null {
  if (row.pruned_through === null) return acknowledged;
  const through = BigInt(row.pruned_through);
  if (afterSeq >= through || (acknowledged !== null && acknowledged >= through)) return acknowledged;
  const next = row.pruned_next?.next != null ? BigInt(row.pruned_next.next) : null;
  if (next !== null && next < through && afterSeq % X === X - 1n && next <= afterSeq + X) return through;
  if (next === null || next > through) throw new EventsPrunedError(afterSeq, through, next);
  throw new EventsPrunedError(afterSeq, (next / X) * X - 1n, BigInt(row.pruned_next!.first!));
}

/** Refuses an afterSeq at or above `ceiling`: no transaction of this cluster has made it yet. */
export function refuseAhead(afterSeq: bigint, ceiling: bigint): void {
  if (afterSeq >= ceiling) throw new SeqAheadError(afterSeq, ceiling);
}

export class LedgerReader {
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(private readonly db: Queryable) {}

  /**
   * Up to `first` final events of the company with seq > afterSeq, ascending
   * (do not modify the array), with the read's `ceiling`: every event
   * committed before the read began has a smaller seq, so an announced seq at
   * or above the ceiling of a read that began after the announcement is not a
   * committed event. `startedAt` is when the (possibly shared) read began.
   * Whether the read may resume there is the caller's to decide (refusePruned,
   * refuseAhead), each with what it knows.
   */
  page(companyId: string, afterSeq: bigint, first: number): Promise<LedgerPage> {
    return this.shared(`page:${companyId}:${afterSeq}:${first}`, async () => {
      const startedAt = performance.now();
      const row = await queryOne<{ events: LockEvent[]; horizon: string; ceiling: string } & PrunedColumns>(
        this.db,
        // Only final events, below the snapshot's horizon (docs/events.md),
        // computed once for the statement; and, in the same snapshot, what retention
        // dropped after afterSeq (the reader may then be refused, not served short).
        statement(
          "READ_LEDGER_PAGE",
          sql`
          WITH h AS MATERIALIZED (SELECT baton_event_horizon() AS horizon, baton_event_ceiling() AS ceiling)
          SELECT coalesce((SELECT json_agg(p.event ORDER BY p.seq) FROM (
                   SELECT e.seq, ${eventJson("e")} AS event FROM lock_events e
                    WHERE e.company_id = ${companyId}::uuid AND e.seq > ${afterSeq.toString()}::bigint AND e.seq < (SELECT horizon FROM h)
                    ORDER BY e.seq LIMIT ${first}::int) p), '[]'::json) AS events,
                 (SELECT horizon FROM h)::text AS horizon, (SELECT ceiling FROM h)::text AS ceiling,
                 ${prunedColumns(companyId, afterSeq)}`,
        ),
      );
      const pruned = { pruned_through: row.pruned_through, pruned_next: row.pruned_next };
      return { events: row.events, horizon: BigInt(row.horizon), ceiling: BigInt(row.ceiling), startedAt, pruned };
    });
  }

  /**
   * The company's newest final seq (0 when it has none, or no such company):
   * where a stream that starts "now" starts. Events committed but not final
   * yet come after it, so they are delivered, not lost.
   */
  lastSeq(companyId: string): Promise<bigint> {
    return this.shared(`last:${companyId}`, async () => {
      const row = await queryOne<{ seq: string }>(
        this.db,
        statement(
          "READ_LEDGER_END",
          sql`
          -- (never below what retention dropped: a stream starting there would be refused)
          SELECT greatest(coalesce(max(seq), 0),
                          coalesce((SELECT through_seq FROM lock_events_pruned WHERE company_id = ${companyId}::uuid), 0))::text AS seq
            FROM lock_events
           WHERE company_id = ${companyId}::uuid AND seq < (SELECT baton_event_horizon())`,
        ),
      );
      return BigInt(row.seq);
    });
  }

  private oldest: { at: number; value: Promise<number> } | null = null;

  /**
   * Age in seconds of the oldest open transaction that holds an xid (or a
   * prepared one): what can hold events back. For /metrics, which anyone may
   * scrape: read at most once a second, however often it is asked.
   */
  oldestTransactionSeconds(): Promise<number> {
    if (this.oldest && performance.now() - this.oldest.at < 1000) return this.oldest.value;
    const value = this.readOldestTransactionSeconds().catch(() => 0);
    this.oldest = { at: performance.now(), value };
    return value;
  }

  private async readOldestTransactionSeconds(): Promise<number> {
    const row = await queryOne<{ s: number | null }>(
      this.db,
      statement(
        "OLDEST_TRANSACTION_SECONDS",
        sql`SELECT extract(epoch FROM clock_timestamp() - least(
                   (SELECT min(xact_start) FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND datname = current_database()),
                   (SELECT min(prepared) FROM pg_prepared_xacts)))::float8 AS s`,
      ),
    );
    return row.s ?? 0;
  }

  private shared<T>(key: string, read: () => Promise<T>): Promise<T> {
    const running = this.inFlight.get(key);
    if (running) return running as Promise<T>;
    const started = read().finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, started);
    return started;
  }
}
