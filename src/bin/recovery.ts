// The recovery loop: `npm run recovery` (its own process; run as many as you
// like). Every BATON_RECOVERY_INTERVAL_MS it sweeps: expired runs → TIMED_OUT,
// locks of dead runs freed, exhausted issues escalated (src/locks/sweep.ts).
//   --once     one sweep, then exit 0
//   --dry-run  print what a sweep would do, change nothing (implies --once)
//   --metrics-port N   serve Prometheus metrics on http://127.0.0.1:N/metrics
// SIGINT/SIGTERM: finish the statement in flight, then exit.
import { createServer } from "node:http";
import type { Server } from "node:http";
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config.js";
import { connectDb } from "../db/client.js";
import { createInProcessBus, createRedisBus } from "../events/bus.js";
import { sweep } from "../locks/sweep.js";
import { errorFields, log } from "../log.js";
import { Metrics } from "../metrics.js";
import { openDatabase } from "./database.js";

async function main() {
  const { values } = parseArgs({
    options: {
      once: { type: "boolean", default: false },
      "dry-run": { type: "boolean", default: false },
      "metrics-port": { type: "string" },
    },
    strict: true,
  });
  const metricsPort = values["metrics-port"] === undefined ? null : Number(values["metrics-port"]);
  if (metricsPort !== null && !(Number.isInteger(metricsPort) && metricsPort >= 0 && metricsPort <= 65535)) {
    throw new ConfigError("--metrics-port must be a port number");
  }
  const dryRun = values["dry-run"] ?? false;
  const once = (values.once ?? false) || dryRun;
  const config = loadConfig();
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
      server.once("error", (err: NodeJS.ErrnoException) => reject(new ConfigError(`--metrics-port ${metricsPort}: cannot listen on ${config.host} (${err.code ?? err.message})`)));
      server.listen(metricsPort, config.host, resolve);
    });
    metricsServer = server;
    log("info", "recovery metrics", { url: `http://${config.host}:${(server.address() as { port: number }).port}/metrics` });
  }
  const database = await openDatabase(config, log);
  const db = connectDb(database.url, 2, "baton-recovery");
  let stopping = false;
  let wake: (() => void) | null = null;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    log("info", "recovery stopping after the current statement", { signal });
    wake?.();
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  const totals = { sweeps: 0, timedOutRuns: 0, recoveredIssues: 0, escalatedIssues: 0, failures: 0 };
  let exitCode = 0;
  while (!stopping) {
    const started = performance.now();
    try {
      const counts = await sweep(db.prisma, bus, { dryRun, shouldStop: () => stopping });
      totals.sweeps++;
      totals.timedOutRuns += counts.timedOutRuns;
      totals.recoveredIssues += counts.recoveredIssues;
      totals.escalatedIssues += counts.escalatedIssues;
      metrics.sweeps.inc({ result: "ok" });
      metrics.recovered.inc({ change: "timed_out_runs" }, counts.timedOutRuns);
      metrics.recovered.inc({ change: "recovered_issues" }, counts.recoveredIssues);
      metrics.recovered.inc({ change: "escalated_issues" }, counts.escalatedIssues);
      log("info", dryRun ? "recovery dry run (nothing changed)" : "recovery sweep", {
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
    if (once) break;
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
  metricsServer?.close();
  await bus.close();
  await db.close();
  await database.stop();
  process.exit(exitCode);
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) process.stderr.write(`baton-recovery: ${err.message}\n`);
  else log("error", "recovery failed to start", errorFields(err));
  process.exit(1);
});
