// Claim throughput and latency at 1, 4, 16 and 64 concurrent agents: through
// the API (GraphQL over HTTP, keep-alive, one mutation per claim) next to the
// very same statement run directly with node-postgres (the limit), and at 16
// agents with pgbench too. Same database, same rows, one run.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { claimNextStatement } from "../src/locks/claimIssues.js";
import { fixture } from "./fixture.js";
import { gql, load } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const levels = [1, 4, 16, 64];
  const seconds = options.quick ? 2 : 10;
  const backlog = options.quick ? 20_000 : 200_000;
  const f = await fixture("baton_bench_claims", 64, 4711);
  const rows: ScenarioResult["rows"] = [];
  const api: [number, number][] = [];
  const direct: [number, number][] = [];
  const notes: string[] = [];
  try {
    for (const agents of levels) {
      await f.refill(backlog);
      const viaApi = await load(agents, seconds, async (i) => {
        const w = f.workers[i]!;
        const data = await gql<{ claimIssue: { __typename: string } }>(f.url, w.key, CLAIM, { r: w.runId });
        return data.claimIssue.__typename === "IssueClaimed";
      });
      await f.refill(backlog);
      const raw = await load(agents, seconds, async (i) => {
        const w = f.workers[i]!;
        const statement = claimNextStatement(w.runId, { companyId: f.companyId, agentId: w.agentId, agentNameKey: w.nameKey }, true);
        const { rows: r } = await f.db.query({ name: "claim_next", text: statement.text, values: statement.values });
        return (r[0]?.issues?.length ?? 0) > 0;
      });
      let pgbench = "";
      if (agents === 16) pgbench = String(Math.round(await viaPgbench(f, agents, seconds, backlog)));
      rows.push({
        agents,
        "API claims/s": Math.round(viaApi.perSecond),
        "API p50 ms": viaApi.p50.toFixed(1),
        "API p99 ms": viaApi.p99.toFixed(1),
        "direct claims/s": Math.round(raw.perSecond),
        "direct p50 ms": raw.p50.toFixed(1),
        "direct p99 ms": raw.p99.toFixed(1),
        "API / direct": `${Math.round((viaApi.perSecond / raw.perSecond) * 100)}%`,
        "pgbench claims/s": pgbench,
      });
      api.push([agents, viaApi.perSecond]);
      direct.push([agents, raw.perSecond]);
      if (agents === 16) {
        notes.push(
          `target: API ≥ 70% of the direct statement at 16 agents — measured ${Math.round((viaApi.perSecond / raw.perSecond) * 100)}%: ${viaApi.perSecond / raw.perSecond >= 0.7 ? "met" : "not met"}`,
          `target: API p99 < 15 ms at 16 agents — measured ${viaApi.p99.toFixed(1)} ms: ${viaApi.p99 < 15 ? "met" : "not met"}`,
        );
      }
    }
  } finally {
    await f.close();
  }
  notes.push(`${seconds}s per measurement, ${backlog} open issues, includeUnassigned pool; the direct path is claimNextStatement through node-postgres, prepared.`);
  return {
    name: "claim throughput",
    columns: ["agents", "API claims/s", "API p50 ms", "API p99 ms", "direct claims/s", "direct p50 ms", "direct p99 ms", "API / direct", "pgbench claims/s"],
    rows,
    notes,
    chart: { title: "Claims per second", xLabel: "concurrent agents", yLabel: "claims/s", series: { API: api, "same statement, direct": direct } },
  };
}

/** The same statement with pgbench -M prepared: each client uses its own agent and run. */
async function viaPgbench(f: Awaited<ReturnType<typeof fixture>>, agents: number, seconds: number, backlog: number): Promise<number> {
  await f.refill(backlog);
  await f.db.query(`CREATE TABLE IF NOT EXISTS bench_clients (n int PRIMARY KEY, run_id uuid, agent_id uuid)`);
  await f.db.query(`TRUNCATE bench_clients`);
  for (const [n, w] of f.workers.entries()) await f.db.query(`INSERT INTO bench_clients VALUES ($1, $2, $3)`, [n, w.runId, w.agentId]);
  const sample = claimNextStatement("RUN", { companyId: f.companyId, agentId: "AGENT", agentNameKey: "x" }, true);
  let text = sample.text;
  sample.values.forEach((value, index) => {
    const literal =
      value === "RUN"
        ? "(SELECT run_id FROM bench_clients WHERE n = :client_id)"
        : value === "AGENT"
          ? "(SELECT agent_id FROM bench_clients WHERE n = :client_id)"
          : typeof value === "string"
            ? `'${value}'`
            : String(value);
    text = text.replace(new RegExp(`\\$${index + 1}(?!\\d)`, "g"), literal);
  });
  mkdirSync("bench/results/tmp", { recursive: true });
  writeFileSync("bench/results/tmp/claim.sql", text.replace(/\s+/g, " ") + ";\n");
  const out = execFileSync(
    "pgbench",
    ["-n", "-M", "prepared", "-c", String(agents), "-j", "2", "-T", String(seconds), "-f", "bench/results/tmp/claim.sql", f.databaseUrl],
    { encoding: "utf8" },
  );
  return Number(/tps = ([\d.]+)/.exec(out)?.[1]);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { defaultOptions } = await import("./lib.js");
  console.log(JSON.stringify(await run(defaultOptions(process.argv.includes("--quick"))), null, 2));
}
