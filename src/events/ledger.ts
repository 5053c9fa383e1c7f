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
import { eventJson, named, queryOne, sql } from "../db/sql.js";
import type { Sql } from "../db/sql.js";
import { EventsPrunedError } from "../domain/errors.js";
import type { LockEvent } from "../domain/types.js";

export interface LedgerPage {
  readonly events: readonly LockEvent[];
  /** Every event below it is final: one not in a short page does not exist. */
  readonly horizon: bigint;
  readonly ceiling: bigint;
  readonly startedAt: number;
}

interface PrunedColumns {
  pruned_through: string | null;
  oldest_kept: string | null;
}

/**
 * Columns `pruned_through` (the company's newest seq retention may have
 * dropped) and, only when that lies beyond afterSeq, `oldest_kept` (the first
 * final event after it): for refusePruned, read in the same statement as the
 * page so the two cannot disagree.
 */
export const prunedColumns = (companyId: string, afterSeq: bigint): Sql => sql`
  (SELECT x.through_seq::text FROM lock_events_pruned x WHERE x.company_id = ${companyId}::uuid) AS pruned_through,
  -- one probe of each day's key, and only for a read that is refused
  (SELECT (SELECT k.seq FROM lock_events k
            WHERE k.company_id = x.company_id AND k.seq > x.through_seq AND k.seq < (SELECT baton_event_horizon())
            ORDER BY k.seq LIMIT 1)::text
     FROM lock_events_pruned x
    WHERE x.company_id = ${companyId}::uuid AND x.through_seq > ${afterSeq.toString()}::bigint) AS oldest_kept`;

/**
 * Refuses a read that resumes after `afterSeq` when retention may have dropped
 * events after it: the reader would otherwise skip them without knowing.
 */
export function refusePruned(afterSeq: bigint, row: PrunedColumns): void {
  if (row.pruned_through === null || afterSeq >= BigInt(row.pruned_through)) return;
  throw new EventsPrunedError(afterSeq, BigInt(row.pruned_through), row.oldest_kept === null ? null : BigInt(row.oldest_kept));
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
   */
  page(companyId: string, afterSeq: bigint, first: number): Promise<LedgerPage> {
    return this.shared(`page:${companyId}:${afterSeq}:${first}`, async () => {
      const startedAt = performance.now();
      const row = await queryOne<{ events: LockEvent[]; horizon: string; ceiling: string } & PrunedColumns>(
        this.db,
        // READ_LEDGER_PAGE: only final events, below the snapshot's horizon (docs/events.md),
        // computed once for the statement; and, in the same snapshot, whether retention
        // dropped events after afterSeq (then the page is refused, not served short).
        named("READ_LEDGER_PAGE", sql`
          WITH h AS MATERIALIZED (SELECT baton_event_horizon() AS horizon, baton_event_ceiling() AS ceiling)
          SELECT coalesce((SELECT json_agg(p.event ORDER BY p.seq) FROM (
                   SELECT e.seq, ${eventJson("e")} AS event FROM lock_events e
                    WHERE e.company_id = ${companyId}::uuid AND e.seq > ${afterSeq.toString()}::bigint AND e.seq < (SELECT horizon FROM h)
                    ORDER BY e.seq LIMIT ${first}::int) p), '[]'::json) AS events,
                 (SELECT horizon FROM h)::text AS horizon, (SELECT ceiling FROM h)::text AS ceiling,
                 ${prunedColumns(companyId, afterSeq)}`),
      );
      refusePruned(afterSeq, row);
      return { events: row.events, horizon: BigInt(row.horizon), ceiling: BigInt(row.ceiling), startedAt };
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
        named("READ_LEDGER_END", sql`
          -- (never below what retention dropped: a stream starting there would be refused)
          SELECT greatest(coalesce(max(seq), 0),
                          coalesce((SELECT through_seq FROM lock_events_pruned WHERE company_id = ${companyId}::uuid), 0))::text AS seq
            FROM lock_events
           WHERE company_id = ${companyId}::uuid AND seq < (SELECT baton_event_horizon())`),
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
      sql`SELECT extract(epoch FROM clock_timestamp() - least(
                   (SELECT min(xact_start) FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND datname = current_database()),
                   (SELECT min(prepared) FROM pg_prepared_xacts)))::float8 AS s`,
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
