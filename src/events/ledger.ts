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
import { queryOne, sql } from "../db/sql.js";
import { listLockEvents } from "../locks/reads.js";
import type { LockEvent } from "../locks/types.js";

export class LedgerReader {
  private readonly inFlight = new Map<string, Promise<unknown>>();

  constructor(private readonly db: Queryable) {}

  /** Up to `first` events of the company with seq > afterSeq, ascending. Do not modify the array. */
  page(companyId: string, afterSeq: bigint, first: number): Promise<readonly LockEvent[]> {
    return this.shared(`page:${companyId}:${afterSeq}:${first}`, () =>
      listLockEvents(this.db, companyId, { afterSeq: afterSeq.toString(), first }),
    );
  }

  /** The company's newest committed seq (0 when it has none, or no such company). */
  lastSeq(companyId: string): Promise<bigint> {
    return this.shared(`last:${companyId}`, async () => {
      const row = await queryOne<{ seq: string } | undefined>(
        this.db,
        sql`SELECT last_event_seq::text AS seq FROM companies WHERE id = ${companyId}::uuid`,
      );
      return BigInt(row?.seq ?? "0");
    });
  }

  private shared<T>(key: string, read: () => Promise<T>): Promise<T> {
    const running = this.inFlight.get(key);
    if (running) return running as Promise<T>;
    const started = read().finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, started);
    return started;
  }
}
