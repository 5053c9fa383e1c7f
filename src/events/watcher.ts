// The ledger watcher: a safety net under pub/sub, and the one place that
// notices delivery being held back. Every interval it reads, for each company
// that has subscribers on this instance (one small query for all of them),
// the newest final seq and the commit time of the oldest event that is
// committed but not final yet, and:
//
// - nudges the company's streams with the newest final seq, so events whose
//   publish was lost (Redis down, a process killed between commit and
//   publish, a recovery loop running without Redis) still arrive within an
//   interval, with no client action;
// - reports how long events have been held back by an open transaction
//   (docs/events.md, "The one caveat"): as a gauge, and, past
//   BATON_LEDGER_HOLD_WARNING_MS, as a warning naming the oldest open
//   transaction, at most once per that interval.
import type { Db } from "../db/client.js";
import { queryAll, queryOne, sql, statement } from "../db/sql.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

export type Nudge = (latestSeq: bigint) => void;

interface PollRow {
  id: string;
  seq: string;
  held_ms: number | null;
}

/** The session most likely to hold delivery back: the oldest open transaction of this database that has an xid. */
interface Holder {
  pid: number | null;
  usename: string | null;
  application_name: string | null;
  client_addr: string | null;
  state: string | null;
  open_s: number | null;
  prepared_gid: string | null;
}

export class LedgerWatcher {
  private readonly byCompany = new Map<string, Set<Nudge>>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private lastWarning = 0;
  /** How long the oldest committed-but-not-final event of a watched company has waited, at the last poll (0: none). */
  heldBackMs = 0;

  constructor(
    private readonly db: Db,
    private readonly intervalMs: number,
    private readonly log: Logger,
    private readonly holdWarningMs = 10_000,
  ) {}

  watch(companyId: string, nudge: Nudge): () => void {
    let set = this.byCompany.get(companyId);
    if (!set) {
      set = new Set();
      this.byCompany.set(companyId, set);
    }
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
      // Per company, the newest final seq and how long the
      // oldest held-back event has waited (both from the (company_id, seq) key).
      const rows = await queryAll<PollRow>(
        this.db,
        statement(
          "WATCH_LEDGER",
          sql`
          WITH h AS MATERIALIZED (SELECT baton_event_horizon() AS horizon)
          SELECT c.id::text,
                 coalesce((SELECT max(e.seq) FROM lock_events e WHERE e.company_id = c.id AND e.seq < (SELECT horizon FROM h)), 0)::text AS seq,
                 (SELECT extract(epoch FROM clock_timestamp() - min(e.at)) * 1000 FROM lock_events e
                   WHERE e.company_id = c.id AND e.seq >= (SELECT horizon FROM h))::float8 AS held_ms
            FROM unnest(${[...this.byCompany.keys()]}::uuid[]) AS c(id)`,
        ),
      );
      let held = 0;
      for (const row of rows) {
        held = Math.max(held, row.held_ms ?? 0);
        for (const nudge of this.byCompany.get(row.id) ?? []) nudge(BigInt(row.seq));
      }
      this.heldBackMs = held;
      if (held >= this.holdWarningMs && Date.now() - this.lastWarning >= this.holdWarningMs) {
        this.lastWarning = Date.now();
        await this.warnHeldBack(held);
      }
    } catch (err) {
      this.log("warn", "ledger watcher poll failed", errorFields(err));
    } finally {
      this.polling = false;
    }
  }

  /** The warning, naming the oldest open transaction (visible to roles with pg_read_all_stats). */
  private async warnHeldBack(heldMs: number): Promise<void> {
    const holder = await queryOne<Holder | undefined>(
      this.db,
      statement(
        "FIND_OLDEST_OPEN_TRANSACTION",
        sql`
        SELECT a.pid, a.usename::text, a.application_name, a.client_addr::text, a.state,
               extract(epoch FROM clock_timestamp() - a.xact_start)::float8 AS open_s,
               (SELECT p.gid FROM pg_prepared_xacts p ORDER BY age(p.transaction) DESC LIMIT 1) AS prepared_gid
          FROM (SELECT 1) one
          LEFT JOIN LATERAL (SELECT * FROM pg_stat_activity s
                              WHERE s.backend_xid IS NOT NULL AND s.datname = current_database()
                              ORDER BY age(s.backend_xid) DESC LIMIT 1) a ON true`,
      ),
    ).catch(() => undefined);
    this.log("warn", "lock events are held back by an open transaction: subscribers receive them when it ends", {
      heldBackSeconds: Math.round(heldMs / 1000),
      oldestTransaction: holder
        ? {
            pid: holder.pid,
            user: holder.usename,
            application: holder.application_name,
            client: holder.client_addr,
            state: holder.state,
            openSeconds: holder.open_s === null ? null : Math.round(holder.open_s),
            preparedTransaction: holder.prepared_gid,
          }
        : null,
      advice: "end that transaction; set idle_in_transaction_session_timeout for interactive roles (docs/operations.md)",
    });
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
