import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/helpers/globalSetup.ts"],
    // Each test file gets its own database cloned from a migrated template, so
    // files run in parallel; most of their time is spent waiting on PostgreSQL.
    pool: "forks",
    maxWorkers: 3,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["default"],
  },
});
