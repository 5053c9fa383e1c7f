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
import type { LockEvent } from "../domain/types.js";

export interface LedgerPage {
  readonly events: readonly LockEvent[];
  /** Every event below it is final: one not in a short page does not exist. */
  readonly horizon: bigint;
  readonly ceiling: bigint;
  readonly startedAt: number;
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
      const row = await queryOne<{ events: LockEvent[]; horizon: string; ceiling: string }>(
        this.db,
        // READ_LEDGER_PAGE: only final events, below the snapshot's horizon (docs/events.md),
        // computed once for the statement.
        named("READ_LEDGER_PAGE", sql`
          WITH h AS MATERIALIZED (SELECT baton_event_horizon() AS horizon, baton_event_ceiling() AS ceiling)
          SELECT coalesce((SELECT json_agg(p.event ORDER BY p.seq) FROM (
                   SELECT e.seq, ${eventJson("e")} AS event FROM lock_events e
                    WHERE e.company_id = ${companyId}::uuid AND e.seq > ${afterSeq.toString()}::bigint AND e.seq < (SELECT horizon FROM h)
                    ORDER BY e.seq LIMIT ${first}::int) p), '[]'::json) AS events,
                 (SELECT horizon FROM h)::text AS horizon, (SELECT ceiling FROM h)::text AS ceiling`),
      );
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
          SELECT coalesce(max(seq), 0)::text AS seq FROM lock_events
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
