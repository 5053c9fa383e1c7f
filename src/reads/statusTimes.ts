// How long issues stay in each status, for the histogram
// baton_time_in_status_seconds (src/metrics.ts). It is derived from the
// lock-event ledger, which already holds every status change (the new `status`
// and `at` of each event): the lock statements write nothing more for it, so
// the claim path keeps its one round trip and its cost.
//
// The process serving /metrics reads the ledger forward by seq, below the
// horizon (docs/events.md, "How seq is made"), so it never skips an event and
// never reads one twice; it starts at the ledger's end when the process
// starts (no replay of history), and reads at most STATUS_TIMES_PER_READ
// events per read, shared between the companies (a busy company is caught up
// over the next reads). Each read is made with the fleet snapshot (src/reads/fleetSnapshot.ts),
// at most once every few seconds however often /metrics is scraped.
import { queryOne, sql, statement } from "../db/sql.js";
import type { Queryable } from "../db/client.js";
import type { IssueStatus } from "../domain/types.js";

/**
 * Events one STATUS_TIMES reads: each company may read its share (this over
 * the number of companies), but at least STATUS_TIMES_MIN_PER_COMPANY, so a
 * read takes at most the larger of this and STATUS_TIMES_MIN_PER_COMPANY ×
 * companies (1,000,000 with 10,000 busy companies).
 */
export const STATUS_TIMES_PER_READ = 10_000;
export const STATUS_TIMES_MIN_PER_COMPANY = 100;

/** An issue that left `status` after `seconds` in it (from the event at `seq`). */
export interface StatusTime {
  status: IssueStatus;
  seconds: number;
  issueId: string;
  seq: string;
}

interface Row {
  horizon: string;
  perCompany: number;
  companies: { companyId: string; read: number; lastSeq: string; lagSeconds: number }[];
  times: StatusTime[];
}

/**
 * Invariant: a reader that starts at the ledger's end has been shown no
 * event, and every event it is shown later is at or above this seq (the
 * horizon: no event below it can still appear).
 */
const ledgerEnd = statement("STATUS_TIMES_START", sql`SELECT baton_event_horizon()::text AS horizon`);

/**
 * Invariant: each event is read once, in seq order per company,
 * below this statement's horizon (so resuming after the last seq read, or
 * after horizon − 1 where a company was read to the end, skips nothing); at
 * most `perRead` events over all companies (each company its share, at
 * least `minPerCompany`), each by the (company_id, seq) key.
 *
 * For each event that changed its issue's status, the time in the status it
 * left runs from the first event of the run of same-status events before it
 * (or from the issue's created_at, for the status it was created in) to this
 * event's `at`. Every look back is a probe of (company_id, issue_id, seq)
 * within the issue's own events, from its creation on (`at` >= created_at
 * less an hour of clock slack, so partitions of the ledger older than the
 * issue are pruned).
 *
 * Retention may have dropped an issue's older events. Then:
 * - the run's first event still kept starts the run (only an ADOPTED event
 *   continues one, CLAIMED to CLAIMED: such a run is skipped);
 * - an issue with no earlier event kept is timed from its creation only if
 *   its whole checkout history is still there (as many CLAIMED and ADOPTED
 *   events as its lockEpoch, each of which raised it by one); otherwise it is
 *   skipped. (Left undetected: a BACKLOG -> OPEN that was dropped while the
 *   issue waited OPEN for longer than the retention; its OPEN time is then
 *   counted from creation, in the longest buckets either way.)
 * A status is entered without an event only at creation (BACKLOG or OPEN), so
 * an issue's first event left OPEN, unless it is a STATUS_CHANGED, whose
 * reason names the status it left ("BACKLOG -> OPEN").
 */
function statusTimes(after: bigint, lagging: ReadonlyMap<string, bigint>, perRead: number, minPerCompany: number) {
  const slack = sql`interval '1 hour'`;
  return statement(
    "STATUS_TIMES",
    sql`
    WITH h AS MATERIALIZED (SELECT baton_event_horizon() AS horizon),
    share AS MATERIALIZED (SELECT greatest(${minPerCompany}::int, ${perRead}::int / greatest(count(*), 1)::int) AS n FROM companies),
    batch AS MATERIALIZED (
      SELECT e.*
        FROM companies c
        LEFT JOIN unnest(${[...lagging.keys()]}::uuid[], ${[...lagging.values()].map(String)}::text[]::bigint[]) AS k(company_id, after)
          ON k.company_id = c.id
        CROSS JOIN LATERAL (
          SELECT l.company_id, l.issue_id, l.seq, l.kind, l.status, l.reason, l.at
            FROM lock_events l
           WHERE l.company_id = c.id AND l.seq > coalesce(k.after, ${after.toString()}::bigint)
             -- a filter, not a second bound of the key's range (which the planner takes as narrow):
             -- far behind, it walks the key in seq order and stops at the LIMIT, never reads the rest
             AND l.seq + 0 < (SELECT horizon FROM h)
           ORDER BY l.seq
           LIMIT (SELECT n FROM share)) e),
    -- each event with the issue's two events before it (one probe): where it changed the status
    changed AS (
      SELECT b.company_id, b.issue_id, b.seq, b.kind, b.reason, b.at, i.created_at, i.lock_epoch,
             p.seqs[1] AS prev_seq, p.statuses[1] AS prev_status, p.ats[1] AS prev_at, p.kinds[1] AS prev_kind,
             p.seqs[2] AS pp_seq, p.statuses[2] AS pp_status
        FROM batch b
        JOIN issues i ON i.id = b.issue_id
        CROSS JOIN LATERAL (
          SELECT array_agg(q.seq ORDER BY q.seq DESC) AS seqs, array_agg(q.status ORDER BY q.seq DESC) AS statuses,
                 array_agg(q.at ORDER BY q.seq DESC) AS ats, array_agg(q.kind ORDER BY q.seq DESC) AS kinds
            FROM (SELECT p.seq, p.status, p.at, p.kind FROM lock_events p
                   WHERE p.company_id = b.company_id AND p.issue_id = b.issue_id AND p.seq < b.seq
                     AND p.at >= i.created_at - ${slack} AND p.at <= b.at + ${slack}
                   ORDER BY p.seq DESC LIMIT 2) q) p
       WHERE p.seqs IS NULL OR p.statuses[1] <> b.status),
    timed AS (
      SELECT c.seq, c.issue_id, c.at, c.prev_seq IS NULL AS from_creation, c.company_id, c.created_at, c.lock_epoch,
             CASE WHEN c.prev_seq IS NOT NULL THEN c.prev_status
                  WHEN c.kind <> 'STATUS_CHANGED' THEN 'OPEN'::issue_status
                  ELSE (SELECT s FROM unnest(enum_range(NULL::issue_status)) s WHERE s::text = split_part(c.reason, ' -> ', 1)) END AS left_status,
             CASE WHEN c.prev_seq IS NULL THEN c.created_at
                  -- the first event kept: it began its run, unless it is an adoption (its run began before)
                  WHEN c.pp_seq IS NULL THEN CASE WHEN c.prev_kind <> 'ADOPTED' THEN c.prev_at END
                  WHEN c.pp_status <> c.prev_status THEN c.prev_at
                  -- a run of more than one event (adoptions): its first event
                  ELSE (SELECT CASE WHEN r.before_seq IS NOT NULL OR f.kind <> 'ADOPTED' THEN f.at END
                          FROM (SELECT (SELECT x.seq FROM lock_events x
                                         WHERE x.company_id = c.company_id AND x.issue_id = c.issue_id AND x.seq < c.pp_seq
                                           AND x.status <> c.prev_status AND x.at >= c.created_at - ${slack} AND x.at <= c.at + ${slack}
                                         ORDER BY x.seq DESC LIMIT 1) AS before_seq) r
                          CROSS JOIN LATERAL (
                            SELECT y.at, y.kind FROM lock_events y
                             WHERE y.company_id = c.company_id AND y.issue_id = c.issue_id
                               AND y.seq > coalesce(r.before_seq, -1) AND y.seq <= c.pp_seq
                               AND y.at >= c.created_at - ${slack} AND y.at <= c.at + ${slack}
                             ORDER BY y.seq LIMIT 1) f) END AS since
        FROM changed c),
    kept AS (
      SELECT t.* FROM timed t
       WHERE t.left_status IS NOT NULL AND t.since IS NOT NULL
         -- timed from creation: only with the issue's whole checkout history still kept
         AND (NOT t.from_creation
              OR t.lock_epoch = (SELECT count(*) FROM lock_events z
                                  WHERE z.company_id = t.company_id AND z.issue_id = t.issue_id
                                    AND z.kind IN ('CLAIMED', 'ADOPTED') AND z.at >= t.created_at - ${slack})))
    SELECT (SELECT horizon FROM h)::text AS horizon, (SELECT n FROM share) AS "perCompany",
           (SELECT coalesce(json_agg(json_build_object('companyId', g.company_id, 'read', g.n, 'lastSeq', g.last_seq::text,
                                                       'lagSeconds', greatest(extract(epoch FROM now() - g.last_at), 0)::float8)), '[]'::json)
              FROM (SELECT company_id, count(*)::int AS n, max(seq) AS last_seq, max(at) AS last_at FROM batch GROUP BY company_id) g) AS companies,
           (SELECT coalesce(json_agg(json_build_object('status', t.left_status, 'seconds', greatest(extract(epoch FROM t.at - t.since), 0)::float8,
                                                       'issueId', t.issue_id, 'seq', t.seq::text) ORDER BY t.seq), '[]'::json)
              FROM kept t) AS times`,
  );
}

/**
 * Reads the ledger forward (statusTimes) and keeps what it found until
 * taken. Not shared between processes: each process that serves /metrics
 * reads the whole fleet's events (every API instance counts every change).
 */
export class StatusTimes {
  /** Every company is read after this seq, unless it is in `lagging`; null until started. */
  private after: bigint | null = null;
  /** Companies whose last read stopped at its bound, with the last seq read. */
  private lagging = new Map<string, bigint>();
  private pending: StatusTime[] = [];
  private lag = 0;
  private running: Promise<void> | null = null;

  constructor(
    private readonly db: Queryable,
    private readonly perRead = STATUS_TIMES_PER_READ,
    private readonly minPerCompany = STATUS_TIMES_MIN_PER_COMPANY,
  ) {}

  /** Starts at the ledger's current end (what is there already is not replayed). */
  start(): Promise<void> {
    return this.once(async () => {
      if (this.after === null) await this.begin();
    });
  }

  /**
   * Reads what the ledger holds since the last read (starting, instead, if
   * the start failed). A call while a read is in flight shares that read: two
   * reads never run at once, so none reads from a cursor the other moves.
   */
  advance(): Promise<void> {
    return this.once(async () => {
      if (this.after === null) return this.begin();
      const row = await queryOne<Row>(this.db, statusTimes(this.after, this.lagging, this.perRead, this.minPerCompany));
      const lagging = new Map<string, bigint>();
      let lag = 0;
      for (const c of row.companies) {
        if (c.read < row.perCompany) continue;
        lagging.set(c.companyId, BigInt(c.lastSeq));
        lag = Math.max(lag, c.lagSeconds);
      }
      this.lagging = lagging;
      this.lag = lag;
      this.after = BigInt(row.horizon) - 1n;
      this.pending.push(...row.times);
    });
  }

  /** The times found since the last take, oldest first; they are given out once. */
  take(): StatusTime[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }

  /** Companies whose events are not all read yet (their last read reached its bound). */
  get behind(): number {
    return this.lagging.size;
  }

  /** As of the last read, how old the last event read of the company furthest behind was (0: none behind). */
  get lagSeconds(): number {
    return this.lag;
  }

  private async begin(): Promise<void> {
    const row = await queryOne<{ horizon: string }>(this.db, ledgerEnd);
    this.after = BigInt(row.horizon) - 1n;
  }

  private once(work: () => Promise<void>): Promise<void> {
    this.running ??= work().finally(() => (this.running = null));
    return this.running;
  }
}
