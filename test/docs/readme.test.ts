// The README's worked session runs as written: every `sh` block of it, in
// order, in bash, against a real server (its URL and admin token put in for
// the two lines a reader edits). The steps' answers are checked, and the
// `json` helper must turn a GraphQL error into one readable line.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ADMIN_TOKEN, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

const README = readFileSync(path.resolve(import.meta.dirname, "../../README.md"), "utf8");
let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

/** The shell blocks of the worked session, less the one that starts the server. */
function workedSession(): string[] {
  const section = README.slice(README.indexOf("## A worked session"), README.indexOf("\n## ", README.indexOf("## A worked session") + 5));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((block) => !block.startsWith("BATON_RUN_LEASE_SECONDS="));
}

/** Runs a script in bash; asynchronously, since the server it talks to runs in this process. */
async function bash(script: string): Promise<string> {
  return (await promisify(execFile)("bash", ["-euo", "pipefail", "-c", script], { encoding: "utf8", timeout: 60_000 })).stdout;
}

it("runs as written, step by step, and ends with a clean audit", async () => {
  const blocks = workedSession();
  expect(blocks.length).toBeGreaterThanOrEqual(9);
  // Step 8 reads the ledger, where an event shows once every older transaction
  // on the cluster has ended (docs/events.md): other test files run beside
  // this one, so ask again until the release is there, as a reader would.
  const patient = (block: string) =>
    block.includes("lockEvents(")
      ? `for i in $(seq 1 200); do out=$(${block.trim()}); case "$out" in *'"kind":"RELEASED"'*) break;; esac; sleep 0.05; done; echo "$out"\n`
      : block;
  const script = blocks
    .map(patient)
    .join("\n")
    .replace(/^URL=.*$/m, `URL=${h.url}`)
    .replace(/^ADMIN_TOKEN=.*$/m, `ADMIN_TOKEN=${ADMIN_TOKEN}`);
  const out = await bash(script);
  for (const step of [
    '"__typename":"IssueClaimed"',
    '"__typename":"ExecutionAcquired"',
    '"__typename":"IssueReleased"',
    '"kind":"RELEASED"',
    '"status":"SUCCEEDED"',
  ]) {
    expect(out).toContain(step);
  }
  expect(out).toContain('"lockAudit":{"doubleClaims":0,"halfReleasedLocks":0,"locksHeldByDeadRuns":0,"unescalatedExhausted":0}');
  expect(out).not.toContain("errors");
});

it("its json helper prints a GraphQL error as one line, not a Node stack", async () => {
  const helper = workedSession().find((b) => b.includes("json() {"))!;
  let stderr = "";
  try {
    await bash(`${helper}\necho '{"errors":[{"message":"missing or unknown token","extensions":{"code":"UNAUTHENTICATED"}}]}' | json data.me.role`);
  } catch (err) {
    stderr = String((err as { stderr?: string }).stderr);
  }
  expect(stderr.trim()).toBe("GraphQL error: missing or unknown token (UNAUTHENTICATED)");
});
