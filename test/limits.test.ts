// Query-shape limits against the real server process: a small document must
// never be able to hold the event loop. The server runs as a child process so
// that, were validation to blow up, the test fails at its deadline instead of
// freezing the test runner along with the server.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createTestDatabase } from "./helpers/db.js";
import type { TestDatabase } from "./helpers/db.js";
import { eventually } from "./helpers/race.js";

const ROOT = path.resolve(import.meta.dirname, "..");
let database: TestDatabase;
let server: ChildProcess;
let url: string;

beforeAll(async () => {
  database = await createTestDatabase();
  server = spawn(process.execPath, ["--import", "tsx", "src/bin/server.ts"], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: database.url, PORT: "0", BATON_ADMIN_TOKEN: "limits-test-admin-token", REDIS_URL: "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  server.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  server.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  url = await eventually(() => /Baton API\s+(http:\S+)/.exec(output)?.[1], "the server to start", 30_000);
});

afterAll(async () => {
  if (server && server.exitCode === null) {
    await new Promise((resolve) => (server.once("exit", resolve), server.kill("SIGKILL")));
  }
  await database?.drop();
});

/** `query { ...f0 }` where each fragment spreads the next one `fanout` times: a document of a few hundred bytes that names 10^levels paths. */
function fragmentChain(levels: number, fanout: number): string {
  const fragments = Array.from({ length: levels }, (_, i) =>
    i === levels - 1 ? `fragment f${i} on Query { me { role } }` : `fragment f${i} on Query { ${Array(fanout).fill(`...f${i + 1}`).join(" ")} }`,
  );
  return `query { ...f0 } ${fragments.join(" ")}`;
}

it("a fragment chain that multiplies at every level is validated in one pass, not expanded", async () => {
  const query = fragmentChain(12, 10); // about 1 KB
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer limits-test-admin-token" },
    body: JSON.stringify({ query }),
    signal: AbortSignal.timeout(10_000),
  });
  expect(await response.json()).toEqual({ data: { me: { role: "ADMIN" } } });
  // The server is still serving.
  const health = await fetch(url.replace(/\/graphql$/, "/healthz"), { signal: AbortSignal.timeout(10_000) });
  expect(health.status).toBe(200);
});
