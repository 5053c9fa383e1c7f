// The environment is read once, at start: a bad value stops the process with
// a message naming the variable, never a default silently used instead.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";
import { DEFAULT_LIMITS, LIMIT_SETTINGS } from "../../src/bounds/settings.js";

it("has the documented defaults", () => {
  expect(loadConfig({})).toMatchObject({
    port: 4000,
    databaseUrl: undefined,
    redisUrl: undefined,
    adminToken: undefined,
    runLeaseSeconds: 60,
    recoveryIntervalMs: 5000,
    eventRetentionDays: 30,
    runRetentionDays: 30,
    dataDir: ".baton",
    ledgerPollMs: 1000,
    subscriptionBuffer: 10_000,
    limits: DEFAULT_LIMITS,
    corsOrigins: [],
  });
});

it("reads retention in days, 0 keeping everything, and refuses what is not a day count", () => {
  expect(loadConfig({ BATON_EVENT_RETENTION_DAYS: "0", BATON_RUN_RETENTION_DAYS: "7" })).toMatchObject({ eventRetentionDays: 0, runRetentionDays: 7 });
  expect(() => loadConfig({ BATON_EVENT_RETENTION_DAYS: "-1" })).toThrow(/BATON_EVENT_RETENTION_DAYS/);
  expect(() => loadConfig({ BATON_RUN_RETENTION_DAYS: "1.5" })).toThrow(/BATON_RUN_RETENTION_DAYS/);
});

it("reads every limit from its variable, and the CORS allow-list as bare origins", () => {
  const env = Object.fromEntries(LIMIT_SETTINGS.map((s) => [s.env, String(s.min + 1)]));
  const config = loadConfig({ ...env, BATON_CORS_ORIGINS: "https://board.example.com, http://localhost:5173" });
  for (const s of LIMIT_SETTINGS) expect(config.limits[s.name]).toBe(s.min + 1);
  expect(config.corsOrigins).toEqual(["https://board.example.com", "http://localhost:5173"]);
});

it("documents every limit, with its variable and default, in docs/operations.md", () => {
  const doc = readFileSync(new URL("../../docs/operations.md", import.meta.url), "utf8");
  for (const s of LIMIT_SETTINGS) {
    expect(doc, s.env).toMatch(new RegExp(`\\| \`${s.name}\` \\| \`${s.env}\` \\| ${s.fallback.toLocaleString("en-US")}`));
  }
});

it("docker-compose has no admin token of its own and publishes the API on loopback only", () => {
  const compose = readFileSync(new URL("../../docker-compose.yml", import.meta.url), "utf8");
  expect(compose).toMatch(/BATON_ADMIN_TOKEN: \$\{BATON_ADMIN_TOKEN:\?[^}]+\}/);
  expect(compose).not.toMatch(/BATON_ADMIN_TOKEN:-/);
  expect(compose).toMatch(/- "\$\{BATON_PUBLISH_ADDRESS:-127\.0\.0\.1\}:4000:4000"/);
});

it("reads what is set, and treats blank as unset", () => {
  const config = loadConfig({ PORT: "0", BATON_RUN_LEASE_SECONDS: " 30 ", REDIS_URL: "  ", BATON_SUBSCRIPTION_BUFFER: "50" });
  expect(config).toMatchObject({ port: 0, runLeaseSeconds: 30, redisUrl: undefined, subscriptionBuffer: 50 });
  expect(Object.isFrozen(config)).toBe(true);
});

it("accepts random admin tokens (openssl rand -hex 24, and the server's own shape)", () => {
  for (let i = 0; i < 200; i++) {
    for (const token of [randomBytes(24).toString("hex"), `baton_admin_${randomBytes(24).toString("base64url")}`]) {
      expect(loadConfig({ BATON_ADMIN_TOKEN: token }).adminToken).toBe(token);
    }
  }
});

it.each([
  [{ PORT: "80a" }, /PORT must be a whole number/],
  [{ PORT: "70000" }, /PORT must be between 0 and 65535/],
  [{ BATON_RUN_LEASE_SECONDS: "0" }, /BATON_RUN_LEASE_SECONDS must be between 1/],
  [{ BATON_RUN_LEASE_SECONDS: "-5" }, /BATON_RUN_LEASE_SECONDS must be a whole number/],
  [{ BATON_RECOVERY_INTERVAL_MS: "1.5" }, /BATON_RECOVERY_INTERVAL_MS must be a whole number/],
  [{ BATON_SUBSCRIPTION_BUFFER: "0" }, /BATON_SUBSCRIPTION_BUFFER must be between 1/],
  [{ BATON_ADMIN_TOKEN: "short" }, /BATON_ADMIN_TOKEN must be at least 16 characters/],
  [{ BATON_ADMIN_TOKEN: "change-me-baton-admin-token" }, /BATON_ADMIN_TOKEN looks like a placeholder/],
  [{ BATON_ADMIN_TOKEN: "aaaaaaaaaaaaaaaaaaaa" }, /BATON_ADMIN_TOKEN looks like a placeholder/],
  [{ BATON_ADMIN_TOKEN: "baton_admin_...xxxxxxxxxxx" }, /BATON_ADMIN_TOKEN looks like a placeholder/], // the README's shape, filled in
  [{ BATON_ADMIN_TOKEN: `baton_admin_…${"0".repeat(12)}` }, /BATON_ADMIN_TOKEN looks like a placeholder/],
  [{ BATON_ADMIN_TOKEN: "<your-admin-token-here>" }, /BATON_ADMIN_TOKEN looks like a placeholder/],
  [{ BATON_MAX_BODY_BYTES: "10" }, /BATON_MAX_BODY_BYTES must be between 1024/],
  [{ BATON_MAX_SUBSCRIPTIONS_PER_SOCKET: "many" }, /BATON_MAX_SUBSCRIPTIONS_PER_SOCKET must be a whole number/],
  [{ BATON_CORS_ORIGINS: "*" }, /BATON_CORS_ORIGINS must list origins/],
  [{ BATON_CORS_ORIGINS: "https://board.example.com/path" }, /BATON_CORS_ORIGINS must list bare origins/],
])("refuses %j with a message naming the variable", (env, message) => {
  expect(() => loadConfig(env)).toThrow(ConfigError);
  expect(() => loadConfig(env)).toThrow(message);
});
