// The recovery loop: `npm run recovery` (its own process; run as many as you
// like). Every BATON_RECOVERY_INTERVAL_MS it sweeps: expired runs → TIMED_OUT,
// locks of dead runs freed, exhausted issues escalated (src/locks/sweep.ts).
//   --once     one sweep, then exit 0
//   --dry-run  print what a sweep would do, change nothing (implies --once)
// SIGINT/SIGTERM: finish the statement in flight, then exit.
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../config.js";
import { connectDb } from "../db/client.js";
import { createInProcessBus, createRedisBus } from "../events/bus.js";
import { sweep } from "../locks/sweep.js";
import { errorFields, log } from "../log.js";
import { openDatabase } from "./database.js";

async function main() {
  const { values } = parseArgs({
    options: { once: { type: "boolean", default: false }, "dry-run": { type: "boolean", default: false } },
    strict: true,
  });
  const dryRun = values["dry-run"] ?? false;
  const once = (values.once ?? false) || dryRun;
  const config = loadConfig();
  const database = await openDatabase(config, log);
  const db = connectDb(database.url, 2, "baton-recovery");
  const bus = config.redisUrl ? createRedisBus(config.redisUrl, log) : createInProcessBus();
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
      log("info", dryRun ? "recovery dry run (nothing changed)" : "recovery sweep", {
        ...counts,
        ms: Math.round(performance.now() - started),
        totals,
      });
    } catch (err) {
      totals.failures++;
      exitCode = 1;
      log("error", "recovery sweep failed", { ...errorFields(err), ms: Math.round(performance.now() - started) });
    }
    if (once) break;
    exitCode = 0;
    await new Promise<void>((resolve) => {
      wake = resolve;
      setTimeout(resolve, config.recoveryIntervalMs).unref();
    });
  }
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
