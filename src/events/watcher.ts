// The ledger watcher: a safety net under pub/sub. Every interval it reads the
// newest seq of each company that has subscribers on this instance (one small
// query for all of them) and nudges their streams when the ledger is ahead of
// what they have passed. Events whose publish was lost — Redis down, a process
// killed between commit and publish, a recovery loop running without Redis —
// therefore still arrive, within two intervals, with no client action.
import type { Db } from "../db/client.js";
import { queryAll, sql } from "../db/sql.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

export type Nudge = (latestSeq: bigint) => void;

export class LedgerWatcher {
  private readonly byCompany = new Map<string, Set<Nudge>>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;

  constructor(
    private readonly db: Db,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  watch(companyId: string, nudge: Nudge): () => void {
    let set = this.byCompany.get(companyId);
    if (!set) this.byCompany.set(companyId, (set = new Set()));
    set.add(nudge);
    if (!this.timer) {
      this.timer = setInterval(() => void this.poll(), this.intervalMs);
      this.timer.unref();
    }
    return () => {
      set.delete(nudge);
      if (set.size === 0) this.byCompany.delete(companyId);
      if (this.byCompany.size === 0) this.stop();
    };
  }

  private async poll(): Promise<void> {
    if (this.polling || this.byCompany.size === 0) return;
    this.polling = true;
    try {
      const rows = await queryAll<{ id: string; seq: string }>(
        this.db,
        sql`SELECT id::text, last_event_seq::text AS seq FROM companies WHERE id = ANY(${[...this.byCompany.keys()]}::uuid[])`,
      );
      for (const row of rows) for (const nudge of this.byCompany.get(row.id) ?? []) nudge(BigInt(row.seq));
    } catch (err) {
      this.log("warn", "ledger watcher poll failed", errorFields(err));
    } finally {
      this.polling = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
