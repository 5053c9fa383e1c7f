// The Python client (clients/python) against a real server: each Python test
// module runs as `python3 -m unittest` with the server's URL, a fresh company
// and its keys in its environment, and must exit 0. What needs this side runs
// here while Python does: a TypeScript worker beside the Python one, and a
// proxy cut under a Python stream. BATON_PYTHON picks another interpreter.
import { Baton } from "baton/client";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { cuttableProxy } from "../helpers/cuttableProxy.js";
import { ADMIN_TOKEN, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const PYTHON = process.env.BATON_PYTHON ?? "python3";
/** A Python module that has not exited by then is killed (its output says where it stood). */
const PYTHON_DEADLINE_MS = 50_000;

let h: Harness;
const scratch = mkdtempSync(path.join(tmpdir(), "baton-python-"));
const children = new Set<ChildProcess>();
beforeAll(async () => {
  h = await startHarness({ leaseSeconds: 6 }); // a heartbeat every 2 s: the tests outlive a lease only if it works
});
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(scratch, { recursive: true, force: true });
  await h?.close();
});

interface PythonRun {
  output(): string;
  exited: Promise<number | null>;
}

/** `python3 -m unittest` on one module of clients/python/tests, the company's keys in its environment. */
function unittest(module: string, co: Company, env: Record<string, string> = {}): PythonRun {
  const child = spawn(PYTHON, ["-m", "unittest", "discover", "-v", "-s", "clients/python/tests", "-p", module], {
    cwd: ROOT,
    env: {
      ...process.env,
      PYTHONPATH: "clients/python",
      PYTHONUNBUFFERED: "1",
      PYTHONDONTWRITEBYTECODE: "1",
      BATON_URL: h.url,
      BATON_ADMIN_TOKEN: ADMIN_TOKEN,
      BATON_COMPANY_ID: co.id,
      BATON_BOARD_TOKEN: co.board.token!,
      BATON_AGENT_ID: co.agents[0]!.id,
      BATON_AGENT_TOKEN: co.agents[0]!.client.token!,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), PYTHON_DEADLINE_MS);
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => {
      clearTimeout(timer);
      children.delete(child);
      resolve(code);
    }),
  );
  return { output: () => output, exited };
}

/** The module's tests all passed (its whole output is the failure message otherwise). */
async function passes(run: PythonRun): Promise<void> {
  const code = await run.exited;
  expect(code, run.output()).toBe(0);
  expect(run.output()).not.toMatch(/\bskipped\b/); // every test ran: the environment was complete
}

it("test_beside_typescript: a Python worker and a TypeScript worker drain one queue, each issue handled and released DONE once", async () => {
  const co = await createCompany(h, 2);
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 40 }, (_, i) => ({ title: `shared ${i}` })) });
  const ids = createIssues.map((issue) => issue.id);
  const handledFile = path.join(scratch, "handled-by-python");
  const python = unittest("test_beside_typescript.py", co, { BATON_HANDLED_FILE: handledFile });
  // The TypeScript worker starts once Python holds an issue: both then claim from the same queue.
  await eventually(() => (python.output().includes("handling ") ? true : undefined), "the Python worker's first issue", 20_000);
  const byTypeScript: string[] = [];
  const worker = new Baton({ url: h.url, token: co.agents[1]!.client.token! }).work(
    async (issue) => {
      byTypeScript.push(issue.id);
      await new Promise((resolve) => setTimeout(resolve, 30)); // the work
    },
    { once: true, includeUnassigned: true, concurrency: 2 },
  );
  await passes(python);
  await worker.done;
  const byPython = readFileSync(handledFile, "utf8").split("\n").filter(Boolean);
  expect(byPython.length).toBeGreaterThan(0);
  expect(byTypeScript.length).toBeGreaterThan(0);
  expect([...byPython, ...byTypeScript].sort()).toEqual([...ids].sort()); // each issue handled once, by one side
  const rows = await h.sql<{ status: string; released: string[] }>(
    `SELECT i.status, array(SELECT e.reason FROM lock_events e WHERE e.company_id = i.company_id AND e.issue_id = i.id AND e.kind = 'RELEASED') AS released
       FROM issues i WHERE i.company_id = $1`,
    [co.id],
  );
  expect(rows).toHaveLength(40);
  expect(rows.every((row) => row.status === "DONE" && row.released.length === 1 && row.released[0] === "DONE")).toBe(true);
  const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
  expect(lockAudit).toMatchObject({ doubleClaims: 0, locksHeldByDeadRuns: 0, halfReleasedLocks: 0, unescalatedExhausted: 0 });
});

it("test_outcomes: return, Requeue, Blocked and exceptions are released DONE, REQUEUE, BLOCKED and FAILED", async () => {
  await passes(unittest("test_outcomes.py", await createCompany(h, 1)));
});

it("test_lost_hold: a lost hold sets job.lost and the worker never releases that issue", async () => {
  await passes(unittest("test_lost_hold.py", await createCompany(h, 1)));
});

/** Makes two events at a time on `co`'s first agent: it claims its next issue (CLAIMED) and gives it back (RELEASED). */
async function cycler(co: Company, issues: number) {
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: issues }, (_, i) => ({ title: `cycled ${i}`, assigneeAgentId: agent.id })) });
  const { startRun } = await agent.client.ok(Ops.StartRunDocument);
  const made = { count: 0 };
  const cycle = async (): Promise<string> => {
    const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: startRun.id });
    if (claimIssue.__typename !== "IssueClaimed") throw new Error(`expected IssueClaimed, got ${claimIssue.__typename}`);
    made.count++;
    await agent.client.ok(Ops.ReleaseIssueDocument, { runId: startRun.id, issueId: claimIssue.issue.id, outcome: "REQUEUE", reason: `cycle ${made.count}` });
    made.count++;
    return claimIssue.issue.id;
  };
  /** The last event, which ends a Python reader: a claim the board takes back with `reason`. */
  const end = async (reason: string) => {
    const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: startRun.id });
    if (claimIssue.__typename !== "IssueClaimed") throw new Error(`expected IssueClaimed, got ${claimIssue.__typename}`);
    await co.board.ok(Ops.ForceReleaseDocument, { issueId: claimIssue.issue.id, reason });
  };
  return { made, cycle, end };
}

it("test_lock_changes: the stream survives cuts made while events are written, without a gap or a duplicate", async () => {
  const co = await createCompany(h, 1);
  const proxy = await cuttableProxy(new URL(h.url));
  try {
    const python = unittest("test_lock_changes.py", co, { BATON_PROXY_URL: proxy.url });
    const { made, cycle, end } = await cycler(co, 4);
    const connected = () => eventually(() => (proxy.connections() > 0 ? true : undefined), "Python's stream through the proxy", 20_000);
    for (let round = 0; round < 6; round++) {
      await connected();
      const before = made.count;
      const making = (async () => {
        for (let i = 0; i < 4; i++) await cycle();
      })();
      await eventually(() => (made.count >= before + 3 ? true : undefined), "events to be under way");
      proxy.cut(); // mid-stream, with events still being written
      await making;
    }
    // Cut, and refuse the reconnection for a moment, while events are written.
    await connected();
    proxy.state.paused = true;
    proxy.cut();
    for (let i = 0; i < 4; i++) await cycle();
    await eventually(() => (proxy.state.refused > 0 ? true : undefined), "a refused reconnection");
    proxy.state.paused = false;
    await end("end of the stream test");
    await passes(python);
    expect(made.count).toBe(56);
  } finally {
    await proxy.close();
  }
});

it("test_lock_changes_from_now: a stream from now cut before its first event misses none of the events made while it was down", async () => {
  const co = await createCompany(h, 1);
  const proxy = await cuttableProxy(new URL(h.url));
  try {
    const python = unittest("test_lock_changes_from_now.py", co, { BATON_PROXY_URL: proxy.url });
    const { made, cycle, end } = await cycler(co, 2);
    // The stream counts as open once its answer's headers arrive, which the API may send with its first keep-alive
    // (every 12 s) when there is no event to send: allow for that, on a loaded machine.
    await eventually(() => (python.output().includes("stream open") ? true : undefined), "Python's stream to open", 45_000);
    // Before any event: cut, and refuse every reconnection while events are written.
    proxy.state.paused = true;
    proxy.cut();
    for (let i = 0; i < 4; i++) await cycle();
    await eventually(() => (proxy.state.refused > 0 ? true : undefined), "a refused reconnection");
    proxy.state.paused = false;
    // Reconnected before the last event: a stream that resumed from "now" again would get that one alone.
    await eventually(() => (proxy.connections() > 0 ? true : undefined), "Python's stream to reconnect", 20_000);
    await end("end of the from-now test");
    await passes(python);
    expect(made.count).toBe(8);
  } finally {
    await proxy.close();
  }
}, 120_000);

it("test_watch_refused: a worker whose ledger watch is refused (connectionsPerKey 1) still loses a force-released hold, and the watch comes back", async () => {
  const co = await createCompany(h, 1);
  const instance = await h.startInstance({ limits: { connectionsPerKey: 1 } }); // stopped by h.close()
  await passes(unittest("test_watch_refused.py", co, { BATON_URL: instance.url }));
});

it("test_sigterm: SIGTERM or Ctrl-C drains the worker: the handler finishes, its issue is released, the run finished, exit 0", async () => {
  await passes(unittest("test_sigterm.py", await createCompany(h, 1)));
});

it("test_errors: a bad token, a syntax error, no answer and CONFLICT_RETRY are BatonErrors with their codes", async () => {
  await passes(unittest("test_errors.py", await createCompany(h, 1)));
});
