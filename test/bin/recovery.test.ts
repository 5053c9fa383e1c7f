// Fault tests with real processes: agents killed with SIGKILL at any moment,
// three recovery processes sweeping at once, and the recovery entrypoint's
// flags and signals.
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually, race } from "../helpers/race.js";
import { checkHistory } from "../../support/history.js";

const LEASE_SECONDS = 1;
const INTERVAL_MS = 200;
const ROOT = path.resolve(import.meta.dirname, "../..");

let h: Harness;
const children: ChildProcess[] = [];

beforeAll(async () => {
  h = await startHarness({ leaseSeconds: LEASE_SECONDS });
});
// A test that fails part-way must not leave its agents or recovery loops
// running into the next one (a stray sweeper would recover its dead locks).
async function killAll() {
  const running = children.splice(0).filter((c) => c.exitCode === null && c.signalCode === null);
  await Promise.all(
    running.map(
      (c) =>
        new Promise((resolve) => {
          c.once("exit", resolve);
          c.kill("SIGKILL");
        }),
    ),
  );
}
afterEach(killAll);
afterAll(async () => {
  await killAll();
  await h?.close();
});

/** The lease of these runs ends in an hour: a test that expires them itself must not depend on the 1 s lease outlasting a loaded machine. */
const holdLeases = (runIds: string[]) => h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() + interval '1 hour' WHERE id = ANY($1)", [runIds]);

interface Proc {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

function node(script: string, args: string[], env: Record<string, string | undefined> = {}): Proc {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  const lines: string[] = [];
  const collect = (chunk: Buffer) => lines.push(...chunk.toString().split("\n").filter(Boolean));
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, lines, exited };
}

const recovery = (args: string[] = [], env: Record<string, string | undefined> = {}) =>
  node("src/bin/recovery.ts", args, { DATABASE_URL: h.database.url, BATON_RECOVERY_INTERVAL_MS: String(INTERVAL_MS), ...env });

const parsed = (p: Proc) =>
  p.lines.flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return [];
    }
  });

describe("recovery, with real processes", () => {
  // docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
  it("agents killed with SIGKILL at any moment strand nothing beyond lease + one interval, with three recovery loops running", async () => {
    const co = await createCompany(h, 4);
    await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 400 }, (_, i) => ({ title: `job ${i}`, maxAttempts: 100 })) });
    const loops = [recovery(), recovery(), recovery()];
    await eventually(() => (loops.every((l) => parsed(l).some((e) => e.msg === "recovery sweep")) ? true : undefined), "three recovery loops to sweep", 30_000);

    for (let round = 0; round < 2; round++) {
      const agents = co.agents.map((a) => node("test/fixtures/agent.ts", [h.url, a.client.token!]));
      // Let each agent get into its loop, then kill it at a different moment.
      await eventually(() => (agents.every((a) => parsed(a).some((e) => e.step === "claimed")) ? true : undefined), "agents to claim", 30_000);
      await race(agents.length, async (i) => {
        await new Promise((r) => setTimeout(r, 10 + i * 37 + round * 13));
        agents[i]!.child.kill("SIGKILL");
        await agents[i]!.exited;
      });
      const killedAt = Date.now();
      // Every run of these agents is dead now (an agent may have started more than one).
      const agentIds = co.agents.map((a) => a.id);
      await eventually(
        async () =>
          (await h.sql("SELECT 1 FROM issues i JOIN heartbeat_runs r ON r.id = i.checkout_run_id WHERE r.agent_id = ANY($1)", [agentIds])).length === 0
            ? true
            : undefined,
        "the killed agents' locks to be freed",
        LEASE_SECONDS * 1000 + INTERVAL_MS + 5_000,
      );
      const freedAfter = Date.now() - killedAt;
      expect(freedAfter).toBeLessThan(LEASE_SECONDS * 1000 + INTERVAL_MS + 3_000);
    }
    const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
    expect(lockAudit).toMatchObject({ doubleClaims: 0, locksHeldByDeadRuns: 0, halfReleasedLocks: 0, unescalatedExhausted: 0 });
    expect(await checkHistory(h.database.url, co.id)).toEqual([]);
    const stopped = await Promise.all(
      loops.map((l) => {
        l.child.kill("SIGTERM");
        return l.exited;
      }),
    );
    expect(stopped).toEqual([0, 0, 0]);
    for (const l of loops) expect(parsed(l).some((e) => e.msg === "recovery stopping after the current statement")).toBe(true);
  });

  // docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
  it("three `recovery --once` processes at once over hundreds of dead locks: one event per recovered issue", async () => {
    const co = await createCompany(h, 3);
    const runs: string[] = [];
    for (const agent of co.agents) {
      await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 100 }, () => ({ title: "x", assigneeAgentId: agent.id })) });
      const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
      await holdLeases([run.id]);
      for (;;) {
        const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
        if (claimIssue.__typename !== "IssueClaimed") break;
      }
      runs.push(run.id);
    }
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = ANY($1)", [runs]);
    const { held } = await h.one<{ held: number }>("SELECT count(*)::int AS held FROM issues WHERE checkout_run_id = ANY($1)", [runs]);
    expect(held).toBe(300);
    const sweepers = [recovery(["--once"]), recovery(["--once"]), recovery(["--once"])];
    expect(await Promise.all(sweepers.map((s) => s.exited))).toEqual([0, 0, 0]);
    const { events, issues } = await h.one<{ events: number; issues: number }>(
      "SELECT count(*)::int AS events, count(DISTINCT issue_id)::int AS issues FROM lock_events WHERE kind = 'RECOVERED' AND run_id = ANY($1)",
      [runs],
    );
    expect([events, issues]).toEqual([held, held]);
    expect(await h.sql("SELECT 1 FROM issues WHERE checkout_run_id = ANY($1)", [runs])).toEqual([]);
    expect(await checkHistory(h.database.url, co.id)).toEqual([]);
    const logged = sweepers.flatMap((s) => parsed(s).filter((e) => e.msg === "recovery sweep"));
    expect(logged).toHaveLength(3);
    for (const line of logged) expect(line).toHaveProperty("ms");
  });

  it("--dry-run changes nothing, and --once works on the embedded default too", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    await co.board.ok(Ops.CreateIssueDocument, { input: { title: "Fix the login page", assigneeAgentId: agent.id } });
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
    await holdLeases([run.id]);
    expect((await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id })).claimIssue.__typename).toBe("IssueClaimed");
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [run.id]);
    const dry = recovery(["--dry-run"]);
    expect(await dry.exited).toBe(0);
    expect(parsed(dry).find((e) => e.msg === "recovery dry run (nothing changed)")).toMatchObject({ recoveredIssues: 1 });
    // The operator sees which run and which issue, not only counts.
    const issueId = (await h.one<{ id: string }>("SELECT id FROM issues WHERE checkout_run_id = $1", [run.id])).id;
    expect(dry.lines).toContain("Dry run: nothing was changed.");
    // Each agent's name and each issue's title beside its id.
    expect(dry.lines.find((l) => l.includes(`run ${run.id}`) && l.includes(`agent "${agent.name}" ${agent.id}`) && l.includes("lease expired"))).toBeDefined();
    expect(
      dry.lines.find(
        (l) => l.includes(`issue ${issueId} "Fix the login page"`) && l.includes(`agent "${agent.name}" ${agent.id}`) && l.includes("→ OPEN, attempts 1 of 3"),
      ),
    ).toBeDefined();
    expect(await h.sql("SELECT 1 FROM issues WHERE checkout_run_id = $1", [run.id])).toHaveLength(1);

    const dataDir = mkdtempSync(path.join(tmpdir(), "baton-embedded-"));
    chmodSync(dataDir, 0o777);
    const embedded = recovery(["--once"], { DATABASE_URL: "", BATON_DATA_DIR: dataDir });
    expect(await embedded.exited).toBe(0);
    expect(parsed(embedded).some((e) => e.msg === "recovery sweep")).toBe(true);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("--once applies retention as configured: expired ledger days and old unreferenced finished runs go, and it says so", async () => {
    const co = await createCompany(h, 1);
    const day = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000 - 12 * 86_400_000);
    const name = `lock_events_${day.toISOString().slice(0, 10).replaceAll("-", "")}`;
    await h.sql(`CREATE TABLE ${name} (LIKE lock_events INCLUDING DEFAULTS)`);
    await h.sql(
      `ALTER TABLE lock_events ATTACH PARTITION ${name} FOR VALUES FROM ('${day.toISOString()}') TO ('${new Date(day.getTime() + 86_400_000).toISOString()}')`,
    );
    await h.sql(`INSERT INTO lock_events (company_id, seq, issue_id, kind, status, at) VALUES ($1, 7, gen_random_uuid(), 'CLAIMED', 'CLAIMED', $2)`, [
      co.id,
      new Date(day.getTime() + 1000),
    ]);
    const [old] = await h.sql<{ id: string }>(
      `INSERT INTO heartbeat_runs (company_id, agent_id, status, started_at, lease_expires_at, finished_at)
       VALUES ($1, $2, 'FAILED', now() - interval '12 days', now() - interval '12 days', now() - interval '11 days') RETURNING id`,
      [co.id, co.agents[0]!.id],
    );
    // The defaults (30 days) keep both.
    const keeping = recovery(["--once"]);
    expect(await keeping.exited).toBe(0);
    expect(await h.sql("SELECT 1 FROM lock_event_partitions WHERE name = $1", [name])).toHaveLength(1);
    const pruning = recovery(["--once"], { BATON_EVENT_RETENTION_DAYS: "10", BATON_RUN_RETENTION_DAYS: "10" });
    expect(await pruning.exited).toBe(0);
    expect(await h.sql("SELECT 1 FROM lock_event_partitions WHERE name = $1", [name])).toEqual([]);
    expect(await h.sql("SELECT 1 FROM heartbeat_runs WHERE id = $1", [old!.id])).toEqual([]);
    expect(parsed(pruning).find((e) => e.msg === "recovery retention")).toMatchObject({ droppedPartitions: [name], deletedRuns: 1 });
    const refused = recovery(["--once"], { BATON_EVENT_RETENTION_DAYS: "-3" });
    expect(await refused.exited).toBe(1);
    expect(refused.lines.join("\n")).toMatch(/BATON_EVENT_RETENTION_DAYS/);
    expect(refused.lines.join("\n")).not.toMatch(/\n\s+at /);
  });

  it("--help prints its usage and exits 0; an unknown option is one line, exit 1, no stack", async () => {
    const help = recovery(["--help"]);
    expect(await help.exited).toBe(0);
    expect(help.lines[0]).toBe("Usage: npm run recovery -- [options]");
    expect(help.lines.some((l) => l.includes("--dry-run"))).toBe(true);
    const bad = recovery(["--bogus"]);
    expect(await bad.exited).toBe(1);
    expect(bad.lines).toEqual([expect.stringMatching(/^baton-recovery: Unknown option '--bogus'.*\(see --help\)$/)]);
  });

  it("serves its own Prometheus metrics when given --metrics-port", async () => {
    const loop = recovery(["--metrics-port", "0"]);
    const line = await eventually(() => parsed(loop).find((e) => e.msg === "recovery metrics"), "the metrics address", 30_000);
    await eventually(() => parsed(loop).find((e) => e.msg === "recovery sweep"), "a sweep", 30_000);
    const text = await (await fetch(String(line.url))).text();
    expect(text).toMatch(/baton_recovery_sweeps_total\{result="ok"\} [1-9]/);
    loop.child.kill("SIGTERM");
    expect(await loop.exited).toBe(0);
    // The same port again, while this test holds it: a plain one-line refusal, no stack.
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    try {
      const taken = (holder.address() as AddressInfo).port;
      const refused = recovery(["--metrics-port", String(taken)]);
      expect(await refused.exited).toBe(1);
      expect(refused.lines).toEqual([`baton-recovery: --metrics-port ${taken}: cannot listen on 127.0.0.1 (EADDRINUSE)`]);
    } finally {
      holder.close();
    }
  });
});
