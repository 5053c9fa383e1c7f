// Prometheus metrics: what an operator of an agent fleet watches. Each process
// has its own registry (the API's is served on GET /metrics; the recovery
// loop's on --metrics-port).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { FleetSnapshot } from "./reads/fleetSnapshot.js";
import type { Issue } from "./domain/types.js";

/** baton_time_in_status_seconds: from a claim's fraction of a second to a backlog's week. */
export const TIME_IN_STATUS_BUCKETS = [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600];

export class Metrics {
  readonly registry = new Registry();

  /** Every lock/run mutation by its outcome (the union member's name). */
  readonly outcomes = new Counter({
    name: "baton_mutation_outcomes_total",
    help: "Lock and run mutations by outcome, e.g. claimIssue/IssueClaimed, claimIssue/CheckoutConflict.",
    labelNames: ["mutation", "outcome"] as const,
    registers: [this.registry],
  });

  readonly adoptions = new Counter({
    name: "baton_adoptions_total",
    help: "Checkouts taken over from a dead run by claimIssue.",
    registers: [this.registry],
  });

  readonly timeToFirstClaim = new Histogram({
    name: "baton_time_to_first_claim_seconds",
    help: "From an issue's creation to its first checkout (claimIssue, claimIssues, runHeartbeat), on the database clock.",
    buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600],
    registers: [this.registry],
  });

  readonly requestSeconds = new Histogram({
    name: "baton_http_request_duration_seconds",
    help: "HTTP request latency, GraphQL included.",
    labelNames: ["path", "status"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  readonly subscriptions = new Gauge({
    name: "baton_subscriptions_active",
    help: "Open subscriptions (lockChanged, issuesChanged) on this instance.",
    registers: [this.registry],
  });

  readonly limitRefusals = new Counter({
    name: "baton_limit_refusals_total",
    help: "Requests, operations and connections refused by a limit (src/bounds/settings.ts), by the limit's name.",
    labelNames: ["limit"] as const,
    registers: [this.registry],
  });

  readonly keyRevocations = new Counter({
    name: "baton_key_revocations_total",
    help:
      "Revoked keys this instance removed from its cache, by how it first heard (here: it made the revocation; pubsub; poll: the revocation poll). " +
      "poll growing while pubsub does not means pub/sub is losing messages: the poll still stops those keys within an interval.",
    labelNames: ["heard"] as const,
    registers: [this.registry],
  });

  readonly keyLookups = new Counter({
    name: "baton_key_lookups_total",
    help: "Database lookups of keys not yet cached, by result (found, unknown).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });

  readonly sweeps = new Counter({
    name: "baton_recovery_sweeps_total",
    help: "Recovery sweeps, by result.",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });

  readonly recovered = new Counter({
    name: "baton_recovery_changes_total",
    help: "What recovery sweeps changed: timed_out_runs, recovered_issues, escalated_issues.",
    labelNames: ["change"] as const,
    registers: [this.registry],
  });

  constructor(
    options: {
      events?: { stats: { published: number; publishFailures: number } };
      /** What holds event delivery back (docs/events.md, "The one caveat"). */
      ledger?: { heldBackMs: () => number; oldestTransactionSeconds: () => Promise<number> };
      /** The database-wide figures (src/reads/fleetSnapshot.ts), read at most every few seconds. */
      fleet?: () => Promise<FleetSnapshot>;
      defaults?: boolean;
    } = {},
  ) {
    if (options.defaults !== false) collectDefaultMetrics({ register: this.registry, prefix: "baton_" });
    const events = options.events;
    if (events) {
      new Counter({
        name: "baton_events_published_total",
        help: "Lock events published to the pub/sub fan-out.",
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(events.stats.published);
        },
      });
      new Counter({
        name: "baton_event_publish_failures_total",
        help: "Lock events whose publish failed (subscribers refill them from the ledger).",
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(events.stats.publishFailures);
        },
      });
    }
    const fleet = options.fleet;
    if (fleet) {
      const read = () => fleet().catch(() => null);
      new Gauge({
        name: "baton_oldest_claimable_issue_seconds",
        help:
          "Per company with claimable work: seconds since its oldest claimable issue (OPEN, an attempt left) was created. " +
          "Work waiting that long is not being taken.",
        labelNames: ["company"] as const,
        registers: [this.registry],
        async collect() {
          const snapshot = await read();
          this.reset();
          for (const c of snapshot?.oldestClaimable ?? []) this.set({ company: c.companyId }, c.seconds);
        },
      });
      const figures: [name: string, help: string, value: (f: FleetSnapshot) => number][] = [
        [
          "baton_runs_heartbeat_late",
          "RUNNING runs whose last heartbeat is older than half their lease: recovered at their lease's end if they stay silent.",
          (f) => f.runsPastHalfLease,
        ],
        ["baton_ledger_rows", "Rows in the lock_events ledger (PostgreSQL's estimate, as of the last ANALYZE).", (f) => f.ledgerRows],
        ["baton_ledger_oldest_event_seconds", "Age of the oldest event still in the ledger (0 when empty).", (f) => f.oldestEventSeconds],
        [
          "baton_ledger_partitions_ahead_days",
          "Days from now until the first instant no ledger partition holds (normally 7 to 8), counting only partitions that follow one another " +
            "without a gap: a partition beyond a missing day does not count. Appends, and so claims, fail when it reaches 0: alert below 2.",
          (f) => f.ledgerDaysAhead,
        ],
      ];
      new Histogram({
        name: "baton_time_in_status_seconds",
        help:
          "How long issues stayed in a status, by the status they left (e.g. OPEN: waiting to be claimed; IN_PROGRESS: executing), " +
          "from the lock-event ledger, on the database clock. " +
          "Every API instance counts every change of the fleet since it started: " +
          "aggregate across instances with max or avg, not sum (quantiles are the same either way).",
        labelNames: ["status"] as const,
        buckets: TIME_IN_STATUS_BUCKETS,
        registers: [this.registry],
        async collect() {
          const snapshot = await read();
          for (const t of snapshot?.statusTimes.take() ?? []) this.observe({ status: t.status }, t.seconds);
        },
      });
      new Gauge({
        name: "baton_time_in_status_lag_seconds",
        help:
          "How late baton_time_in_status_seconds is: as of its last read, the age of the last event read of the company furthest behind, " +
          "when a read stopped at its bound (10,000 events); 0 when it has read every company to the end.",
        registers: [this.registry],
        async collect() {
          const snapshot = await read();
          this.set(snapshot?.statusTimes.lagSeconds ?? 0);
        },
      });
      for (const [name, help, value] of figures) {
        new Gauge({
          name,
          help,
          registers: [this.registry],
          async collect() {
            const snapshot = await read();
            this.set(snapshot ? value(snapshot) : 0);
          },
        });
      }
    }
    const ledger = options.ledger;
    if (ledger) {
      new Gauge({
        name: "baton_ledger_held_back_seconds",
        help:
          "How long the oldest committed lock event of a company with subscribers here has waited to become final " +
          "(an older transaction is still open); 0 when none.",
        registers: [this.registry],
        collect() {
          this.set(ledger.heldBackMs() / 1000);
        },
      });
      new Gauge({
        name: "baton_oldest_open_transaction_seconds",
        help:
          "Age of the oldest open transaction in Baton's database that holds a transaction id: lock events committed after it began " +
          "wait for it to end (needs pg_read_all_stats to see other roles' sessions).",
        registers: [this.registry],
        async collect() {
          this.set(await ledger.oldestTransactionSeconds().catch(() => 0));
        },
      });
    }
  }

  /** Counts a mutation's outcome, times first claims, and passes the result through. */
  outcome<R extends { __typename: string }>(mutation: string, result: R): R {
    this.outcomes.inc({ mutation, outcome: result.__typename });
    if ((result as { adopted?: boolean }).adopted) this.adoptions.inc();
    const claimed = result as { issue?: Issue; issues?: Issue[]; alreadyHeld?: boolean };
    if (result.__typename === "IssueClaimed" && claimed.issue && !claimed.alreadyHeld) this.firstClaims([claimed.issue]);
    if (result.__typename === "IssuesClaimed" && claimed.issues) this.firstClaims(claimed.issues);
    return result;
  }

  /** Issues checked out for the first time (lockEpoch 1): how long they waited since creation. */
  firstClaims(issues: readonly Issue[]): void {
    for (const issue of issues) {
      if (issue.lockEpoch !== 1 || issue.claimedAt === null) continue;
      const waited = (new Date(issue.claimedAt).getTime() - new Date(issue.createdAt).getTime()) / 1000;
      if (Number.isFinite(waited)) this.timeToFirstClaim.observe(Math.max(0, waited));
    }
  }
}
