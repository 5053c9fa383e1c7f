// The figures an operator's dashboard asks of the whole
// database, for /metrics (src/metrics.ts): how long the oldest claimable issue
// of each company has waited, how many running runs are late with their
// heartbeat, and how big and how old the ledger is; and, read with it, the
// status changes written to the ledger since the last read
// (src/reads/statusTimes.ts). /metrics is public, so the read is shared and
// made at most once every SNAPSHOT_MAX_AGE_MS.
import { queryOne, raw, sql, statement } from "../db/sql.js";
import { claimable } from "../locks/shared/fragments.js";
import type { Queryable } from "../db/client.js";
import { StatusTimes } from "./statusTimes.js";

export const SNAPSHOT_MAX_AGE_MS = 5_000;

export interface FleetSnapshot {
  /** Per company with claimable work: seconds its oldest claimable issue (OPEN, an attempt left, ready) has waited: since its creation, or its notBefore. */
  oldestClaimable: { companyId: string; seconds: number }[];
  /** RUNNING runs whose last heartbeat is older than half their lease: the next to be recovered if they stay silent. */
  runsPastHalfLease: number;
  /** lock_events rows, PostgreSQL's estimate (each partition's pg_class.reltuples, kept by ANALYZE): a count(*) would read the whole ledger. */
  ledgerRows: number;
  /** Seconds since the oldest event still in the ledger; 0 when it is empty. */
  oldestEventSeconds: number;
  /**
   * Days from now to the first instant no ledger partition holds (baton_ledger_covered_until()): appends fail once it
   * reaches 0 (docs/operations.md, Retention).
   */
  ledgerDaysAhead: number;
  /** How long issues stayed in the statuses they left, found by this and earlier reads and not yet taken (take() gives each out once). */
  statusTimes: StatusTimes;
}

/**
 * Each company's oldest claimable issue is the first of four probes of
 * issues_pool_idx (one per priority) and of issues_claimable_idx (one per
 * agent and priority), the oldest event one probe of lock_events_pkey per
 * company: the cost grows with companies and agents, never with the issues
 * or the ledger. A delayed issue counts from its notBefore, not from its
 * creation: it was not waiting for an agent before then. (An issue that
 * waited on blockers still counts from its creation.)
 */
const fleetFigures = statement(
  "FLEET_SNAPSHOT",
  sql`
  SELECT
    (SELECT coalesce(json_agg(json_build_object('companyId', c.id, 'seconds', extract(epoch FROM now() - o.oldest)::float8) ORDER BY c.id), '[]'::json)
       FROM companies c
       CROSS JOIN LATERAL (
         SELECT least(
           -- unassigned: the first of each priority in issues_pool_idx
           (SELECT min(x.created_at) FROM unnest(enum_range(NULL::issue_priority)) AS p(priority)
             CROSS JOIN LATERAL (
               SELECT greatest(i.created_at, i.not_before) AS created_at FROM issues i
                WHERE i.company_id = c.id AND i.priority = p.priority AND ${raw(claimable("i"))}
                  AND i.assignee_agent_id IS NULL
                ORDER BY i.created_at LIMIT 1) x),
           -- assigned: each agent's first of each priority in issues_claimable_idx
           (SELECT min(x.created_at) FROM agents a CROSS JOIN unnest(enum_range(NULL::issue_priority)) AS p(priority)
             CROSS JOIN LATERAL (
               SELECT greatest(i.created_at, i.not_before) AS created_at FROM issues i
                WHERE i.company_id = c.id AND i.assignee_agent_id = a.id AND i.priority = p.priority
                  AND ${raw(claimable("i"))}
                ORDER BY i.created_at LIMIT 1) x
             WHERE a.company_id = c.id)) AS oldest
       ) o
      WHERE o.oldest IS NOT NULL) AS "oldestClaimable",
    (SELECT count(*)::int FROM heartbeat_runs r
      WHERE r.status = 'RUNNING' AND now() - r.last_heartbeat_at > (r.lease_expires_at - r.last_heartbeat_at) / 2) AS "runsPastHalfLease",
    -- summed over the day partitions: autovacuum analyzes each of them, never the partitioned parent
    (SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::float8 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'lock_events'::regclass) AS "ledgerRows",
    coalesce((SELECT extract(epoch FROM now() - min(e.at))::float8 FROM companies c
               CROSS JOIN LATERAL (SELECT l.at FROM lock_events l WHERE l.company_id = c.id ORDER BY l.seq LIMIT 1) e), 0) AS "oldestEventSeconds",
    -- contiguous from now: a partition beyond a missing day does not count
    (extract(epoch FROM baton_ledger_covered_until() - now()) / 86400)::float8 AS "ledgerDaysAhead"`,
);

/** Reads fleetFigures at most once every SNAPSHOT_MAX_AGE_MS, however often it is asked; concurrent askers share one read. */
export class FleetSnapshots {
  private last: { at: number; value: Promise<FleetSnapshot> } | null = null;

  readonly statusTimes: StatusTimes;

  constructor(private readonly db: Queryable) {
    this.statusTimes = new StatusTimes(db);
    // From the ledger's end now: status changes from this process's start on are timed.
    this.statusTimes.start().catch(() => undefined);
  }

  read(): Promise<FleetSnapshot> {
    if (this.last && performance.now() - this.last.at < SNAPSHOT_MAX_AGE_MS) return this.last.value;
    // A failed ledger read leaves its cursor where it was: the next read takes what it missed.
    const times = this.statusTimes.advance().catch(() => undefined);
    const value = queryOne<Omit<FleetSnapshot, "statusTimes">>(this.db, fleetFigures).then(async (figures) => {
      await times;
      return { ...figures, statusTimes: this.statusTimes };
    });
    this.last = { at: performance.now(), value };
    value.catch(() => (this.last = null)); // a failed read is not kept: the next scrape tries again
    return value;
  }
}
