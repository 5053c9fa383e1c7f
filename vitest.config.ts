import { createRequire } from "node:module";
import { defineConfig } from "vitest/config";

const require = createRequire(import.meta.url);

export default defineConfig({
  // One graphql module for everyone: Pothos loads it with require(), and two
  // copies (ESM and CJS) would not recognise each other's types.
  resolve: { alias: { graphql: require.resolve("graphql") } },
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
