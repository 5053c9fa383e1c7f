// The recovery loop: `npm run recovery` (its own process; run as many as you
// like). Every BATON_RECOVERY_INTERVAL_MS it sweeps: expired runs → TIMED_OUT,
// locks of dead runs freed, exhausted issues escalated (src/locks/recovery/sweep.ts).
// Hourly (and on --once) it also applies retention (src/retention/): ledger
// partitions past BATON_EVENT_RETENTION_DAYS dropped, new ones made ahead, and
// finished runs past BATON_RUN_RETENTION_DAYS deleted in batches.
// Options: see USAGE. SIGINT/SIGTERM: finish the statement in flight, then exit;
// a second signal exits at once (src/bin/shutdown.ts).
import { createServer } from "node:http";
import type { Server } from "node:http";
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config.js";
import { connectDb } from "../db/client.js";
import type { Db } from "../db/client.js";
import { queryOne, sql, statement } from "../db/sql.js";
import { createInProcessBus, createRedisBus } from "../events/bus.js";
import { previewSweep, sweep } from "../locks/recovery/sweep.js";
import { startWaking } from "../locks/recovery/wakeDueIssues.js";
import { pruneLedger } from "../retention/partitions.js";
import { pruneRuns } from "../retention/runs.js";
import type { SweepPreview } from "../locks/recovery/sweep.js";
import { errorFields, log } from "../log.js";
import { Metrics } from "../metrics.js";
import { startTracing } from "../tracing/setup.js";
import { openDatabase } from "./database.js";
import { onStopSignals, startupFailure } from "./shutdown.js";

const USAGE = `Usage: npm run recovery -- [options]

Frees the work of dead agent runs: runs whose lease expired become TIMED_OUT,
issues held by dead runs go back to OPEN (or ESCALATED with no attempt left),
executions past their issue's maxExecutionSeconds are taken back, and OPEN
issues with no attempt left are escalated. Delayed issues whose notBefore has
passed are made claimable every BATON_WAKE_INTERVAL_MS (default 250). Sweeps every
BATON_RECOVERY_INTERVAL_MS (default 5000) until stopped with Ctrl-C or SIGTERM.

Retention, at start and then hourly: ledger days older than
BATON_EVENT_RETENTION_DAYS (default 30) are dropped, and finished runs older
than BATON_RUN_RETENTION_DAYS (default 30) that no issue refers to are
deleted. 0 keeps everything. Issues are never deleted.

Options:
  --once               one sweep and one retention pass, then exit (0, or 1 if either failed)
  --dry-run            list what a sweep would change now, and change nothing (implies --once)
  --metrics-port N     serve Prometheus metrics on http://HOST:N/metrics (0 picks a port)
  -h, --help           show this and exit

Reads DATABASE_URL (unset: the embedded PostgreSQL in BATON_DATA_DIR), REDIS_URL and HOST.
`;

/** Retention runs at start and then at most this often (it drops whole days). */
const RETENTION_EVERY_MS = 60 * 60 * 1000;

const ago = (seconds: number | null) => (seconds === null ? "" : seconds < 120 ? `${seconds} s ago` : `${Math.round(seconds / 60)} min ago`);

/** What --dry-run prints beside ids: each issue's title and each agent's name. */
interface Names {
  titles: Record<string, string>;
  agents: Record<string, string>;
}

/** The titles and names of the issues and agents a preview lists, in one statement. */
function previewNames(db: Db, p: SweepPreview): Promise<Names> {
  const issueIds = p.issues.map((i) => i.issueId);
  const agentIds = [...p.runs.map((r) => r.agentId), ...p.issues.map((i) => i.agentId)].filter((a): a is string => a !== null);
  return queryOne<Names>(
    db,
    statement(
      "PREVIEW_SWEEP_NAMES",
      sql`SELECT
        (SELECT coalesce(json_object_agg(id, title), '{}') FROM issues WHERE id = ANY(${issueIds}::uuid[])) AS titles,
        (SELECT coalesce(json_object_agg(id, name), '{}') FROM agents WHERE id = ANY(${agentIds}::uuid[])) AS agents`,
    ),
  );
}

/** A title or name as a line shows it: quoted, cut to `width` characters. */
const named = (text: string | undefined, width = 40) => {
  if (text === undefined) return "";
  const line = text.replace(/\s+/g, " ");
  return JSON.stringify(line.length > width ? `${line.slice(0, width - 1)}…` : line);
};

/** --dry-run's list, for the operator reading a terminal: ids, with each issue's title and each agent's name beside them. */
function printPreview(p: SweepPreview, limit: number, names: Names): void {
  const lines = ["Dry run: nothing was changed.", ""];
  const more = (shown: number, total: number) => (total > shown ? [`  … and ${total - shown} more`] : []);
  const agent = (id: string | null) => (id === null ? "?" : `${named(names.agents[id])} ${id}`.trim());
  const issue = (id: string) => `issue ${id} ${named(names.titles[id])}`.trim();
  lines.push(`Runs to time out: ${p.timedOutRuns}`);
  for (const r of p.runs) lines.push(`  run ${r.runId}  agent ${agent(r.agentId)}  company ${r.companyId}  lease expired ${ago(r.expiredFor)}`);
  lines.push(...more(p.runs.length, p.timedOutRuns), "");
  const freed = p.issues.filter((i) => i.runId !== null);
  lines.push(`Issues held by dead runs, to free: ${p.recoveredIssues}`);
  for (const i of freed) {
    const holder = `run ${i.runId} (agent ${agent(i.agentId)}, ${i.runStatus}${i.deadFor === null ? "" : ` ${ago(i.deadFor)}`})`;
    lines.push(`  ${issue(i.issueId)}  ${i.status}  held by ${holder}  → ${i.becomes}, attempts ${i.attemptCount} of ${i.maxAttempts}`);
  }
  lines.push(...more(freed.length, p.recoveredIssues), "");
  const exhausted = p.issues.filter((i) => i.runId === null);
  lines.push(`OPEN issues with no attempt left, to escalate: ${p.escalatedIssues}`);
  for (const i of exhausted) lines.push(`  ${issue(i.issueId)}  company ${i.companyId}  attempts ${i.attemptCount} of ${i.maxAttempts}  → ESCALATED`);
  lines.push(...more(exhausted.length, p.escalatedIssues));
  if (p.runs.length === limit || freed.length === limit || exhausted.length === limit) lines.push("", `(at most ${limit} of each are listed)`);
  process.stdout.write(`${lines.join("\n")}\n`);
}

function options() {
  try {
    return parseArgs({
      options: {
        once: { type: "boolean", default: false },
        "dry-run": { type: "boolean", default: false },
        "metrics-port": { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
    }).values;
  } catch (err) {
    throw new ConfigError(`${(err as Error).message} (see --help)`);
  }
}

async function main() {
  const values = options();
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const metricsPort = values["metrics-port"] === undefined ? null : Number(values["metrics-port"]);
  if (metricsPort !== null && !(Number.isInteger(metricsPort) && metricsPort >= 0 && metricsPort <= 65535)) {
    throw new ConfigError("--metrics-port must be a port number");
  }
  const dryRun = values["dry-run"] ?? false;
  const once = (values.once ?? false) || dryRun;
  const config = loadConfig();
  const tracing = await startTracing({ serviceName: "baton-recovery", log }); // on only when the OTEL_* variables ask: a span per sweep
  const bus = config.redisUrl ? createRedisBus(config.redisUrl, log) : createInProcessBus();
  const metrics = new Metrics({ events: bus });
  let metricsServer: Server | null = null;
  if (metricsPort !== null) {
    // Before the database: a port that is taken is a configuration error, said plainly.
    const server = createServer((req, res) => {
      if (req.url !== "/metrics") return void res.writeHead(404).end();
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
        (err: unknown) => {
          log("error", "could not render metrics", errorFields(err));
          res.writeHead(500).end();
        },
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", (err: NodeJS.ErrnoException) =>
        reject(new ConfigError(`--metrics-port ${metricsPort}: cannot listen on ${config.host} (${err.code ?? err.message})`)),
      );
      server.listen(metricsPort, config.host, resolve);
    });
    metricsServer = server;
    log("info", "recovery metrics", { url: `http://${config.host}:${(server.address() as { port: number }).port}/metrics` });
  }
  const database = await openDatabase(config, log);
  const db = connectDb(database.url, 2, "baton-recovery");
  let stopping = false;
  let wake: (() => void) | null = null;
  // A second signal exits 1 at once, without a word (no stack either).
  onStopSignals((signal) => {
    stopping = true;
    stopRetention.abort();
    log("info", "recovery stopping after the current statement", { signal });
    wake?.();
  });
  const totals = { sweeps: 0, timedOutRuns: 0, recoveredIssues: 0, escalatedIssues: 0, failures: 0 };
  let exitCode = 0;
  let retentionDue = 0;
  let retaining: Promise<void> | null = null;
  let retentionFailed = false;
  const stopRetention = new AbortController();
  /** One retention pass (src/retention/): logged, and counted as a failure of --once. */
  const retain = async () => {
    const began = performance.now();
    try {
      const ledger = await pruneLedger(database.url, config.eventRetentionDays, stopRetention.signal);
      const runs = await pruneRuns(db.prisma, config.runRetentionDays, () => stopping);
      if (ledger.failures.length) {
        retentionFailed = true;
        log("error", "recovery retention could not finish; it is tried again in an hour", { failures: ledger.failures });
      }
      log("info", "recovery retention", {
        droppedPartitions: ledger.dropped,
        createdPartitions: ledger.created.length,
        deletedRuns: runs,
        ...(ledger.ran ? {} : { ledger: "another recovery process is pruning it" }),
        ms: Math.round(performance.now() - began),
      });
    } catch (err) {
      if (stopping) return;
      retentionFailed = true;
      log("error", "recovery retention failed; it is tried again in an hour", { ...errorFields(err), ms: Math.round(performance.now() - began) });
    }
  };
  if (dryRun) {
    const limit = 100;
    const started = performance.now();
    try {
      const preview = await previewSweep(db.prisma, limit);
      printPreview(preview, limit, await previewNames(db.prisma, preview));
      const { timedOutRuns, recoveredIssues, escalatedIssues } = preview;
      log("info", "recovery dry run (nothing changed)", { timedOutRuns, recoveredIssues, escalatedIssues, ms: Math.round(performance.now() - started) });
    } catch (err) {
      exitCode = 1;
      log("error", "recovery dry run failed", { ...errorFields(err), ms: Math.round(performance.now() - started) });
    }
    stopping = true;
  }
  // Between sweeps, delayed issues become claimable within BATON_WAKE_INTERVAL_MS of their notBefore (each sweep wakes them too).
  const waker =
    !once && config.wakeIntervalMs > 0 ? startWaking(db.prisma, config.wakeIntervalMs, (companyId, ids) => bus.announceIssues(companyId, ids)) : null;
  while (!stopping) {
    const started = performance.now();
    try {
      const counts = await sweep(db.prisma, bus, { shouldStop: () => stopping });
      totals.sweeps++;
      totals.timedOutRuns += counts.timedOutRuns;
      totals.recoveredIssues += counts.recoveredIssues;
      totals.escalatedIssues += counts.escalatedIssues;
      metrics.sweeps.inc({ result: "ok" });
      metrics.recovered.inc({ change: "timed_out_runs" }, counts.timedOutRuns);
      metrics.recovered.inc({ change: "recovered_issues" }, counts.recoveredIssues);
      metrics.recovered.inc({ change: "escalated_issues" }, counts.escalatedIssues);
      log("info", "recovery sweep", {
        ...counts,
        ms: Math.round(performance.now() - started),
        totals,
      });
    } catch (err) {
      totals.failures++;
      metrics.sweeps.inc({ result: "failed" });
      exitCode = 1;
      log("error", "recovery sweep failed", { ...errorFields(err), ms: Math.round(performance.now() - started) });
    }
    if (!stopping && !retaining && performance.now() >= retentionDue) {
      // Beside the sweeps, not in their way: a detach may wait minutes for a long reader.
      retentionDue = performance.now() + RETENTION_EVERY_MS;
      retaining = retain().finally(() => (retaining = null));
      if (once) await retaining;
    }
    if (once) {
      if (retentionFailed) exitCode = 1;
      break;
    }
    exitCode = 0;
    await new Promise<void>((resolve) => {
      // Not unref()'d: this timer is what keeps an idle loop alive between sweeps.
      const timer = setTimeout(resolve, config.recoveryIntervalMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
  await retaining;
  await waker?.stop();
  metricsServer?.close();
  await bus.close();
  await db.close();
  await database.stop();
  await tracing.shutdown(); // at most 2 s
  process.exit(exitCode);
}

main().catch((err: unknown) => {
  process.stderr.write(`${startupFailure("baton-recovery", err)}\n`);
  process.exit(1);
});
