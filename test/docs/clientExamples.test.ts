// The SDK examples in docs/client.md run as written, as plain .mjs files on
// this Node, against a real server (saved inside the checkout, where
// "baton/client" resolves to the package that npm ci built).
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DOC = readFileSync(path.join(ROOT, "docs/client.md"), "utf8");
let h: Harness;
const written: string[] = [];

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  for (const file of written) rmSync(file, { force: true });
  await h?.close();
});

/** Saves the ```js block that starts with `// NAME` and runs it with node. */
async function runExample(name: string, env: Record<string, string>): Promise<string> {
  const block = [...DOC.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith(`// ${name}`));
  if (!block) throw new Error(`docs/client.md has no ${name}`);
  const file = path.join(ROOT, `.docs-test-${process.pid}-${name}`);
  writeFileSync(file, block);
  written.push(file);
  const { stdout } = await promisify(execFile)(process.execPath, [file], { env: { ...process.env, BATON_URL: h.url, ...env }, timeout: 30_000 });
  return stdout;
}

it("whoami.mjs prints the token's role", async () => {
  const co = await createCompany(h, 1);
  expect(await runExample("whoami.mjs", { BATON_TOKEN: co.agents[0]!.client.token! })).toBe(`AGENT ${co.id} ${co.agents[0]!.id}\n`);
});

it("worker.mjs works the agent's queue and stops when it is empty: DONE, and BLOCKED for a review", async () => {
  const co = await createCompany(h, 1);
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [{ title: "fix the login page" }, { title: "code review" }].map((i) => ({ ...i, assigneeAgentId: co.agents[0]!.id })),
  });
  const out = await runExample("worker.mjs", { BATON_TOKEN: co.agents[0]!.client.token! });
  expect(out).toContain("fix the login page: attempt 1, fencing token 1");
  const statuses = await h.sql<{ title: string; status: string }>("SELECT title, status FROM issues WHERE id = ANY($1) ORDER BY title", [
    createIssues.map((i) => i.id),
  ]);
  expect(statuses).toEqual([
    { title: "code review", status: "BLOCKED" },
    { title: "fix the login page", status: "DONE" },
  ]);
});

it("split.mjs splits an issue into sub-issues it waits on, works them, and comes back to it: every one DONE with its result", async () => {
  const co = await createCompany(h, 1);
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, {
    input: { title: "ship billing", assigneeAgentId: co.agents[0]!.id, payload: { parts: ["migration", "backfill"] } },
  });
  const out = (await runExample("split.mjs", { BATON_TOKEN: co.agents[0]!.client.token! })).trim().split("\n");
  expect([out.slice(0, 2).sort(), out[2], out.length]).toEqual([["ship billing: backfill: done", "ship billing: migration: done"], "ship billing: done", 3]);
  const rows = await h.sql<{ title: string; status: string; result: unknown }>(
    "SELECT title, status, result FROM issues WHERE id = $1 OR parent_id = $1 ORDER BY title",
    [createIssue.id],
  );
  expect(rows).toEqual([
    { title: "ship billing", status: "DONE", result: { done: "ship billing" } },
    { title: "ship billing: backfill", status: "DONE", result: { done: "backfill" } },
    { title: "ship billing: migration", status: "DONE", result: { done: "migration" } },
  ]);
});
