// The API server: `npm start`. Reads the environment (README, Configuration),
// starts the embedded PostgreSQL when DATABASE_URL is unset, applies pending
// migrations, and serves GraphQL over HTTP, SSE and WebSocket on /graphql.
import { randomBytes } from "node:crypto";
import { buildApp } from "../app.js";
import { loadConfig } from "../config.js";
import { connectDb } from "../db/client.js";
import { createInProcessBus, createRedisBus } from "../events/bus.js";
import { log } from "../log.js";
import { startTracing } from "../tracing/setup.js";
import { openDatabase } from "./database.js";
import { onShutdown, startupFailure } from "./shutdown.js";

async function main() {
  const config = loadConfig();
  const tracing = await startTracing({ serviceName: "baton-api", log }); // on only when the OTEL_* variables ask (docs/operations.md, Tracing)
  const database = await openDatabase(config, log);
  const db = connectDb(database.url, config.dbPoolSize, "baton-api");
  const bus = config.redisUrl ? createRedisBus(config.redisUrl, log) : createInProcessBus();
  if (!config.redisUrl) {
    log("warn", "REDIS_URL is not set: lock events use in-process pub/sub, so only ONE API instance is supported");
  }
  const adminToken = config.adminToken ?? `baton_admin_${randomBytes(24).toString("base64url")}`;
  const app = buildApp({
    db: db.prisma,
    bus,
    adminToken,
    leaseSeconds: config.runLeaseSeconds,
    log,
    ledgerPollMs: config.ledgerPollMs,
    ledgerHoldWarningMs: config.ledgerHoldWarningMs,
    subscriptionBuffer: config.subscriptionBuffer,
    limits: config.limits,
    corsOrigins: config.corsOrigins,
    wakeIntervalMs: config.wakeIntervalMs,
    mcpSessionIdleSeconds: config.mcpSessionIdleSeconds,
  });
  // A failure to serve (a busy PORT, say) stops what was started, the embedded PostgreSQL included, before the one line.
  const { url } = await app.start(config.port, config.host).catch(async (err: unknown) => {
    await app.stop().catch(() => {});
    await bus.close().catch(() => {});
    await db.close().catch(() => {});
    await database.stop().catch(() => {});
    throw err;
  });
  onShutdown(log, async () => {
    await app.stop();
    await bus.close();
    await db.close();
    await database.stop();
    await tracing.shutdown(); // at most 2 s
  });
  log("info", "baton is listening", { url });
  // The one thing a person starting the server needs to see, on stdout.
  process.stdout.write(
    `\nBaton API      ${url}\nGraphiQL       ${url} (open in a browser)\n` +
      `Board          ${new URL("/board", url).href} (sign in with a board key, or the admin token)\n`,
  );
  if (!config.adminToken) process.stdout.write(`Admin token    ${adminToken}\n               (generated for this run; set BATON_ADMIN_TOKEN to keep one)\n`);
  process.stdout.write("\n");
}

main().catch((err: unknown) => {
  process.stderr.write(`${startupFailure("baton", err)}\n`);
  process.exit(1);
});
