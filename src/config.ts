// The environment, read once, validated, and frozen. Only src/bin/* call
// loadConfig(); everything else receives the config it needs as an argument.
import { LIMIT_SETTINGS } from "./bounds/settings.js";
import type { Limits } from "./bounds/settings.js";

export interface Config {
  /** HTTP/WS port; 0 picks a free one. */
  readonly port: number;
  readonly host: string;
  /** PostgreSQL URL; undefined starts an embedded PostgreSQL in dataDir. */
  readonly databaseUrl: string | undefined;
  /** Redis URL for cross-instance events; undefined uses in-process pub/sub. */
  readonly redisUrl: string | undefined;
  /** Admin bearer token; undefined generates one at start. */
  readonly adminToken: string | undefined;
  readonly runLeaseSeconds: number;
  readonly recoveryIntervalMs: number;
  /** How often delayed issues whose notBefore has passed are made claimable (API instances and recovery); 0: never. */
  readonly wakeIntervalMs: number;
  /** How long an MCP session over HTTP may go without a request before it ends and its run is finished. */
  readonly mcpSessionIdleSeconds: number;
  /** Days of ledger history kept (whole UTC days, by partition); 0 keeps everything. */
  readonly eventRetentionDays: number;
  /** Days a finished run no issue refers to is kept; 0 keeps every run. */
  readonly runRetentionDays: number;
  /** Where the embedded PostgreSQL keeps its data. */
  readonly dataDir: string;
  /** Connections in this process's PostgreSQL pool. */
  readonly dbPoolSize: number;
  /** How often subscriptions look in the ledger for events whose publish was lost. */
  readonly ledgerPollMs: number;
  readonly ledgerHoldWarningMs: number;
  /** Live events a subscription may hold for a slow client before it is ended (SUBSCRIPTION_OVERFLOW). */
  readonly subscriptionBuffer: number;
  /** Bounds on what clients control (src/bounds/settings.ts). */
  readonly limits: Limits;
  /** Origins a browser may call the API from (CORS); empty: none. */
  readonly corsOrigins: readonly string[];
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got ${JSON.stringify(raw)}`);
  const value = Number(raw.trim());
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function optionalString(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw ? raw : undefined;
}

/**
 * Placeholders that documentation and compose files tend to carry, or their
 * shape filled in by hand: never a real secret. An ellipsis, a template in
 * angle brackets, or one character eight times in a row (a random hex token
 * of 48 has that by chance about once in 7 million).
 */
const PLACEHOLDER_TOKEN = /change-?me|placeholder|your[-_ ]?(admin[-_ ]?)?token|\.\.\.|…|^<.*>$|(.)\2{7}/i;

function corsOrigins(env: NodeJS.ProcessEnv): string[] {
  const raw = optionalString(env, "BATON_CORS_ORIGINS");
  if (!raw) return [];
  return raw.split(",").map((origin) => {
    const value = origin.trim();
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new ConfigError(`BATON_CORS_ORIGINS must list origins such as https://board.example.com, got ${JSON.stringify(value)}`);
    }
    if (url.origin !== value.replace(/\/$/, "")) {
      throw new ConfigError(`BATON_CORS_ORIGINS must list bare origins (scheme://host[:port]), got ${JSON.stringify(value)}`);
    }
    return url.origin;
  });
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const adminToken = optionalString(env, "BATON_ADMIN_TOKEN");
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError("BATON_ADMIN_TOKEN must be at least 16 characters long");
  }
  if (adminToken !== undefined && PLACEHOLDER_TOKEN.test(adminToken)) {
    throw new ConfigError("BATON_ADMIN_TOKEN looks like a placeholder: set a random secret (e.g. openssl rand -hex 24)");
  }
  const limits = Object.freeze(Object.fromEntries(LIMIT_SETTINGS.map((s) => [s.name, integer(env, s.env, s.fallback, s.min, s.max)])) as unknown as Limits);
  return Object.freeze({
    port: integer(env, "PORT", 4000, 0, 65535),
    host: optionalString(env, "HOST") ?? "127.0.0.1",
    databaseUrl: optionalString(env, "DATABASE_URL"),
    redisUrl: optionalString(env, "REDIS_URL"),
    adminToken,
    runLeaseSeconds: integer(env, "BATON_RUN_LEASE_SECONDS", 60, 1, 86_400),
    recoveryIntervalMs: integer(env, "BATON_RECOVERY_INTERVAL_MS", 5000, 10, 3_600_000),
    wakeIntervalMs: integer(env, "BATON_WAKE_INTERVAL_MS", 250, 0, 60_000),
    mcpSessionIdleSeconds: integer(env, "BATON_MCP_SESSION_IDLE_SECONDS", 1800, 1, 604_800),
    eventRetentionDays: integer(env, "BATON_EVENT_RETENTION_DAYS", 30, 0, 36_500),
    runRetentionDays: integer(env, "BATON_RUN_RETENTION_DAYS", 30, 0, 36_500),
    dataDir: optionalString(env, "BATON_DATA_DIR") ?? ".baton",
    dbPoolSize: integer(env, "BATON_DB_POOL_SIZE", 10, 1, 200),
    ledgerPollMs: integer(env, "BATON_LEDGER_POLL_MS", 1000, 50, 60_000),
    ledgerHoldWarningMs: integer(env, "BATON_LEDGER_HOLD_WARNING_MS", 10_000, 100, 3_600_000),
    subscriptionBuffer: integer(env, "BATON_SUBSCRIPTION_BUFFER", 10_000, 1, 1_000_000),
    limits,
    corsOrigins: Object.freeze(corsOrigins(env)),
  });
}
