// The environment is read once, at start: a bad value stops the process with
// a message naming the variable, never a default silently used instead.
import { expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";

it("has the documented defaults", () => {
  expect(loadConfig({})).toMatchObject({
    port: 4000,
    databaseUrl: undefined,
    redisUrl: undefined,
    adminToken: undefined,
    runLeaseSeconds: 60,
    recoveryIntervalMs: 5000,
    dataDir: ".baton",
    ledgerPollMs: 1000,
    subscriptionBuffer: 10_000,
  });
});

it("reads what is set, and treats blank as unset", () => {
  const config = loadConfig({ PORT: "0", BATON_RUN_LEASE_SECONDS: " 30 ", REDIS_URL: "  ", BATON_SUBSCRIPTION_BUFFER: "50" });
  expect(config).toMatchObject({ port: 0, runLeaseSeconds: 30, redisUrl: undefined, subscriptionBuffer: 50 });
  expect(Object.isFrozen(config)).toBe(true);
});

it.each([
  [{ PORT: "80a" }, /PORT must be a whole number/],
  [{ PORT: "70000" }, /PORT must be between 0 and 65535/],
  [{ BATON_RUN_LEASE_SECONDS: "0" }, /BATON_RUN_LEASE_SECONDS must be between 1/],
  [{ BATON_RUN_LEASE_SECONDS: "-5" }, /BATON_RUN_LEASE_SECONDS must be a whole number/],
  [{ BATON_RECOVERY_INTERVAL_MS: "1.5" }, /BATON_RECOVERY_INTERVAL_MS must be a whole number/],
  [{ BATON_SUBSCRIPTION_BUFFER: "0" }, /BATON_SUBSCRIPTION_BUFFER must be between 1/],
  [{ BATON_ADMIN_TOKEN: "short" }, /BATON_ADMIN_TOKEN must be at least 16 characters/],
])("refuses %j with a message naming the variable", (env, message) => {
  expect(() => loadConfig(env)).toThrow(ConfigError);
  expect(() => loadConfig(env)).toThrow(message);
});
