// Prometheus metrics: what an operator of an agent fleet watches. Each process
// has its own registry (the API's is served on GET /metrics; the recovery
// loop's on --metrics-port).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

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
    help: "Requests, operations and connections refused by a limit (src/limits.ts), by the limit's name.",
    labelNames: ["limit"] as const,
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
    const ledger = options.ledger;
    if (ledger) {
      new Gauge({
        name: "baton_ledger_held_back_seconds",
        help: "How long the oldest committed lock event of a company with subscribers here has waited to become final (an older transaction is still open); 0 when none.",
        registers: [this.registry],
        collect() {
          this.set(ledger.heldBackMs() / 1000);
        },
      });
      new Gauge({
        name: "baton_oldest_open_transaction_seconds",
        help: "Age of the oldest open transaction in Baton's database that holds a transaction id: lock events committed after it began wait for it to end (needs pg_read_all_stats to see other roles' sessions).",
        registers: [this.registry],
        async collect() {
          this.set(await ledger.oldestTransactionSeconds().catch(() => 0));
        },
      });
    }
  }

  /** Counts a mutation's outcome and passes the result through. */
  outcome<R extends { __typename: string }>(mutation: string, result: R): R {
    this.outcomes.inc({ mutation, outcome: result.__typename });
    if ((result as { adopted?: boolean }).adopted) this.adoptions.inc();
    return result;
  }
}
