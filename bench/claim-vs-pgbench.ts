// Claims per second through the API at N concurrent agents, next to the very
// same claim statement run directly: with node-postgres from Node, and with
// pgbench. Same database, same rows, one run. Not part of `npm test`.
//   npx tsx bench/claim-vs-pgbench.ts [--agents 16] [--seconds 15] [--issues 200000]
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import pg from "pg";
import { claimNextStatement } from "../src/locks/claimIssues.js";
import { ADMIN_TOKEN, freshDatabase, gql, load, startApi } from "./lib.js";

const { values } = parseArgs({
  options: { agents: { type: "string", default: "16" }, seconds: { type: "string", default: "15" }, issues: { type: "string", default: "200000" } },
});
const agents = Number(values.agents);
const seconds = Number(values.seconds);
const issueCount = Number(values.issues);

const url = await freshDatabase("baton_bench_claim");
const db = new pg.Pool({ connectionString: url, max: agents });
const api = await startApi(url, 4711);
try {
  const { createCompany } = await gql<{ createCompany: { company: { id: string }; boardKey: string } }>(
    api.url, ADMIN_TOKEN, `mutation { createCompany(name: "bench") { company { id } boardKey } }`);
  const companyId = createCompany.company.id;
  const workers: { agentId: string; key: string; runId: string; nameKey: string }[] = [];
  for (let i = 0; i < agents; i++) {
    const { createAgent } = await gql<{ createAgent: { agent: { id: string; nameKey: string }; apiKey: string } }>(
      api.url, createCompany.boardKey, `mutation($n: String!) { createAgent(name: $n) { agent { id nameKey } apiKey } }`, { n: `agent ${i}` });
    const { startRun } = await gql<{ startRun: { id: string } }>(api.url, createAgent.apiKey, `mutation { startRun { id } }`);
    workers.push({ agentId: createAgent.agent.id, key: createAgent.apiKey, runId: startRun.id, nameKey: createAgent.agent.nameKey });
  }
  const reset = async () => {
    await db.query(`TRUNCATE lock_events`);
    await db.query(`UPDATE companies SET last_event_seq = 0`);
    await db.query(`DELETE FROM issues`);
    await db.query(
      `INSERT INTO issues (company_id, title, priority, created_at)
       SELECT $1, 'job ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority, now() + g * interval '1 microsecond'
         FROM generate_series(1, $2) g`,
      [companyId, issueCount],
    );
    await db.query(`VACUUM ANALYZE issues`);
    await db.query(`VACUUM ANALYZE companies`);
  };

  // 1. Through the API: GraphQL over HTTP, keep-alive, one mutation per claim.
  await reset();
  const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;
  const viaApi = await load(agents, seconds, async (i) => {
    const w = workers[i]!;
    const data = await gql<{ claimIssue: { __typename: string } }>(api.url, w.key, CLAIM, { r: w.runId });
    return data.claimIssue.__typename === "IssueClaimed";
  });

  // 2. The same statement (ledger append included) with node-postgres, prepared.
  await reset();
  const direct = await load(agents, seconds, async (i) => {
    const w = workers[i]!;
    const statement = claimNextStatement(w.runId, { companyId, agentId: w.agentId, agentNameKey: w.nameKey }, true);
    const { rows } = await db.query({ name: "claim_next", text: statement.text, values: statement.values });
    return rows[0]?.issue != null;
  });

  // 3. The same statement with pgbench: each client uses its own agent and run.
  await reset();
  await db.query(`CREATE TABLE IF NOT EXISTS bench_clients (n int PRIMARY KEY, run_id uuid, agent_id uuid)`);
  await db.query(`TRUNCATE bench_clients`);
  for (const [n, w] of workers.entries()) await db.query(`INSERT INTO bench_clients VALUES ($1, $2, $3)`, [n, w.runId, w.agentId]);
  const sample = claimNextStatement("RUN", { companyId, agentId: "AGENT", agentNameKey: "x" }, true);
  let text = sample.text;
  sample.values.forEach((value, index) => {
    const literal =
      value === "RUN" ? "(SELECT run_id FROM bench_clients WHERE n = :client_id)"
      : value === "AGENT" ? "(SELECT agent_id FROM bench_clients WHERE n = :client_id)"
      : typeof value === "boolean" ? String(value) : `'${String(value)}'`;
    text = text.replace(new RegExp(`\\$${index + 1}(?!\\d)`, "g"), literal);
  });
  mkdirSync("bench/results/tmp", { recursive: true });
  writeFileSync("bench/results/tmp/claim.sql", text.replace(/\s+/g, " ") + ";\n");
  const out = execFileSync("pgbench", ["-n", "-M", "prepared", "-c", String(agents), "-j", "2", "-T", String(seconds), "-r", "-f", "bench/results/tmp/claim.sql", url], {
    encoding: "utf8",
  });
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  const pgLatency = Number(/latency average = ([\d.]+) ms/.exec(out)?.[1]);

  const result = {
    at: new Date().toISOString(),
    agents,
    seconds,
    issues: issueCount,
    api: viaApi,
    nodePostgres: direct,
    pgbench: { perSecond: tps, avgLatencyMs: pgLatency },
    ratios: { apiVsNodePostgres: viaApi.perSecond / direct.perSecond, apiVsPgbench: viaApi.perSecond / tps },
  };
  const f = (n: number) => n.toFixed(1);
  console.log(`\nclaims/s at ${agents} concurrent agents, ${issueCount} open issues, ${seconds}s each`);
  console.log(`| path | claims/s | p50 ms | p99 ms |\n| --- | --- | --- | --- |`);
  console.log(`| API (GraphQL/HTTP) | ${f(viaApi.perSecond)} | ${f(viaApi.p50)} | ${f(viaApi.p99)} |`);
  console.log(`| same statement, node-postgres | ${f(direct.perSecond)} | ${f(direct.p50)} | ${f(direct.p99)} |`);
  console.log(`| same statement, pgbench -M prepared | ${f(tps)} | avg ${f(pgLatency)} | |`);
  console.log(`API / node-postgres = ${(result.ratios.apiVsNodePostgres * 100).toFixed(0)}%, API / pgbench = ${(result.ratios.apiVsPgbench * 100).toFixed(0)}%`);
  writeFileSync(`bench/results/claim-vs-pgbench.json`, JSON.stringify(result, null, 2) + "\n");
} finally {
  await api.stop();
  await db.end();
}
