// Claim throughput and latency at 1, 4, 16 and 64 concurrent agents, three
// ways, on the same database and rows in one run:
//   - through the API (GraphQL over HTTP, keep-alive, one mutation per claim);
//   - the statement the API runs for it, CLAIM_NEXT_FOR_EACH for a group of
//     one, with its ledger append, run directly with node-postgres, prepared;
//   - the bare claim (one SKIP LOCKED UPDATE, no ledger, no run check): the
//     ceiling any design could reach; at 16 agents also under pgbench.
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { claimNextForEachStatement } from "../src/locks/claim/claimNextForEach.js";
import { fixture } from "./fixture.js";
import { checkedCpu, cpuSeconds, gql, load, postgresCpuSeconds } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;

/** The bare claim: what SKIP LOCKED alone costs, with no ledger, no run check and no answer beyond the id. */
const BARE = `UPDATE issues i SET status = 'CLAIMED', checkout_run_id = $1, claimed_at = now(), lock_epoch = i.lock_epoch + 1, updated_at = now()
  WHERE i.id = (SELECT c.id FROM issues c
                 WHERE c.company_id = $2 AND c.status = 'OPEN' AND c.attempt_count < c.max_attempts
                   AND c.assignee_agent_id IS NULL AND $3::uuid IS NOT NULL
                 ORDER BY c.priority, c.created_at, c.id LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING i.id`;

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const levels = [1, 4, 16, 64];
  const seconds = options.quick ? 2 : 10;
  const backlog = options.quick ? 20_000 : 200_000;
  const f = await fixture("baton_bench_claims", 64, 4711);
  const rows: ScenarioResult["rows"] = [];
  const api: [number, number][] = [];
  const direct: [number, number][] = [];
  const bare: [number, number][] = [];
  const notes: string[] = [];
  try {
    for (const agents of levels) {
      await f.refill(backlog);
      const cpuBefore = { api: cpuSeconds(f.apiPid), pg: postgresCpuSeconds(), self: process.cpuUsage() };
      const viaApi = await load(agents, seconds, async (i) => {
        const w = f.workers[i]!;
        const data = await gql<{ claimIssue: { __typename: string } }>(f.url, w.key, CLAIM, { r: w.runId });
        return data.claimIssue.__typename === "IssueClaimed";
      });
      const apiCpu = {
        api: (cpuSeconds(f.apiPid) ?? NaN) - (cpuBefore.api ?? NaN),
        pg: checkedCpu("PostgreSQL", postgresCpuSeconds() - cpuBefore.pg),
        self: cpuTotal(process.cpuUsage(cpuBefore.self)),
      };
      await f.refill(backlog);
      const raw = await load(agents, seconds, async (i) => {
        const w = f.workers[i]!;
        const actor = { companyId: f.companyId, agentId: w.agentId, agentNameKey: w.nameKey };
        const statement = claimNextForEachStatement(f.companyId, [{ actor, runId: w.runId, includeUnassigned: true }]);
        const { rows: r } = await f.db.query({ name: "claim_next_for_each", text: statement.text, values: statement.values });
        return (r[0]?.answers?.[0]?.issue ?? null) !== null;
      });
      await f.refill(backlog);
      const ceiling = await load(agents, seconds, async (i) => {
        const w = f.workers[i]!;
        const { rows: r } = await f.db.query({ name: "bare_claim", text: BARE, values: [w.runId, f.companyId, w.agentId] });
        return r.length > 0;
      });
      let pgbench = "";
      if (agents === 16) {
        const { perSecond, cpu: pgbenchCpu } = await viaPgbench(f, agents, seconds, backlog);
        pgbench = String(Math.round(perSecond));
        // Where a claim's CPU goes: on 2 cores shared by all of it, claims/s is bounded by 2 s / (the sum per claim).
        const us = (s: number, claims: number) => Math.round((s / claims) * 1e6);
        const apiClaims = viaApi.perSecond * seconds;
        notes.push(
          `CPU per claim at 16 agents (µs, from /proc): through the API — API process ${us(apiCpu.api, apiClaims)}, PostgreSQL ${us(apiCpu.pg, apiClaims)}, ` +
            `load generator ${us(apiCpu.self, apiClaims)} (total ${us(apiCpu.api + apiCpu.pg + apiCpu.self, apiClaims)}); ` +
            `bare claim under pgbench — PostgreSQL ${us(pgbenchCpu.pg, pgbenchCpu.claims)}, pgbench ${us(pgbenchCpu.pgbench, pgbenchCpu.claims)} (total ${us(pgbenchCpu.pg + pgbenchCpu.pgbench, pgbenchCpu.claims)}).`,
        );
      }
      rows.push({
        agents,
        "API claims/s": Math.round(viaApi.perSecond),
        "API p50 ms": viaApi.p50.toFixed(1),
        "API p99 ms": viaApi.p99.toFixed(1),
        "its statement claims/s": Math.round(raw.perSecond),
        "its statement p99 ms": raw.p99.toFixed(1),
        "bare claim claims/s": Math.round(ceiling.perSecond),
        "bare claim p99 ms": ceiling.p99.toFixed(1),
        "API / its statement": `${Math.round((viaApi.perSecond / raw.perSecond) * 100)}%`,
        "API / bare claim": `${Math.round((viaApi.perSecond / ceiling.perSecond) * 100)}%`,
        "bare claim, pgbench claims/s": pgbench,
      });
      api.push([agents, viaApi.perSecond]);
      direct.push([agents, raw.perSecond]);
      bare.push([agents, ceiling.perSecond]);
      if (agents === 16) {
        const underPgbench = Number(pgbench);
        notes.push(
          `target (issue 13): API claimIssue at 16 agents ≥ 0.7× the bare claim under pgbench — measured ${(viaApi.perSecond / underPgbench).toFixed(2)}× (${Math.round(viaApi.perSecond)} vs ${Math.round(underPgbench)}/s): ${viaApi.perSecond / underPgbench >= 0.7 ? "met" : "not met"}`,
          `target: API p99 < 15 ms at 16 agents — measured ${viaApi.p99.toFixed(1)} ms: ${viaApi.p99 < 15 ? "met" : "not met"}`,
        );
      }
    }
  } finally {
    await f.close();
  }
  notes.push(
    `${seconds}s per measurement, ${backlog} open issues, includeUnassigned pool. "Its statement" is CLAIM_NEXT_FOR_EACH for one request, as an idle API instance sends it, through node-postgres, prepared; "bare claim" is one SKIP LOCKED UPDATE with no ledger and no run check.`,
  );
  return {
    name: "claim throughput",
    columns: [
      "agents",
      "API claims/s",
      "API p50 ms",
      "API p99 ms",
      "its statement claims/s",
      "its statement p99 ms",
      "bare claim claims/s",
      "bare claim p99 ms",
      "API / its statement",
      "API / bare claim",
      "bare claim, pgbench claims/s",
    ],
    rows,
    notes,
    chart: {
      title: "Claims per second",
      xLabel: "concurrent agents",
      yLabel: "claims/s",
      series: { API: api, "its statement, direct": direct, "bare claim (no ledger)": bare },
    },
  };
}

/**
 * The bare claim with pgbench -M prepared: each client uses its own agent and
 * run. Also the CPU it costs, sampled while pgbench's backends are alive (an
 * ended backend's CPU leaves /proc with it): from 0.5 s in to 0.5 s before
 * the end, claims counted from the tps.
 */
async function viaPgbench(
  f: Awaited<ReturnType<typeof fixture>>,
  agents: number,
  seconds: number,
  backlog: number,
): Promise<{ perSecond: number; cpu: { pg: number; pgbench: number; claims: number } }> {
  await f.refill(backlog);
  await f.db.query(`CREATE TABLE IF NOT EXISTS bench_clients (n int PRIMARY KEY, run_id uuid, agent_id uuid)`);
  await f.db.query(`TRUNCATE bench_clients`);
  for (const [n, w] of f.workers.entries()) await f.db.query(`INSERT INTO bench_clients VALUES ($1, $2, $3)`, [n, w.runId, w.agentId]);
  const text = BARE.replace("$1", "(SELECT run_id FROM bench_clients WHERE n = :client_id)")
    .replace("$2", `'${f.companyId}'`)
    .replace("$3", "(SELECT agent_id FROM bench_clients WHERE n = :client_id)");
  mkdirSync("bench/results/tmp", { recursive: true });
  writeFileSync("bench/results/tmp/claim.sql", `${text.replace(/\s+/g, " ")};\n`);
  const child = spawn(
    "pgbench",
    ["-n", "-M", "prepared", "-c", String(agents), "-j", "2", "-T", String(seconds), "-f", "bench/results/tmp/claim.sql", f.databaseUrl],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const window = Math.max(0.5, seconds - 1);
  await sleep(500);
  const before = { pg: postgresCpuSeconds(), pgbench: cpuSeconds(child.pid) ?? 0 };
  await sleep(window * 1000);
  const cpu = { pg: checkedCpu("PostgreSQL", postgresCpuSeconds() - before.pg), pgbench: (cpuSeconds(child.pid) ?? 0) - before.pgbench, claims: 0 };
  if ((await exited) !== 0) throw new Error(`pgbench failed: ${out.trim().split("\n").at(-1) ?? ""}`);
  const perSecond = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  cpu.claims = perSecond * window;
  return { perSecond, cpu };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { defaultOptions } = await import("./lib.js");
  console.log(JSON.stringify(await run(defaultOptions(process.argv.includes("--quick"))), null, 2));
}

/** user + system seconds of a process.cpuUsage() difference. */
function cpuTotal(usage: NodeJS.CpuUsage): number {
  return (usage.user + usage.system) / 1e6;
}
