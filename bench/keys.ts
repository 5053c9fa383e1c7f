// Concurrency keys (issue 15): claim throughput and latency with 1,000 keys,
// every one of them limited, against the same run without keys, on the same
// database and API in one run. Target: claims/s and claim p50 with keys stay
// within 20% of the run without keys.
//   - A "no keys": N open issues in the unkeyed pool (as claims.ts refills);
//   - B "1,000 keys, limit 1": the same N issues, the same priorities and
//     ages, spread round-robin over 1,000 keys, each key with max_active 1.
// Each agent loops claimIssue(includeUnassigned: true) through the API (one
// mutation per claim, as claims.ts) and releases what it got right away
// (releaseIssue BLOCKED: DONE from CLAIMED is refused without the execution
// lock), so nothing piles up as active. Claim latency is timed on its own;
// claims/s counts claim + release cycles. Configurations alternate A, B, A,
// B (…) and each reports its median, since this machine's speed drifts.
import { claimNextForEachStatement } from "../src/locks/claim/claimNextForEach.js";
import { fixture } from "./fixture.js";
import type { Fixture } from "./fixture.js";
import { gql, percentile } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;
const RELEASE = `mutation($r: ID!, $i: ID!) { releaseIssue(runId: $r, issueId: $i, outcome: BLOCKED) { __typename } }`;

const KEYS = 1_000;
/**
 * Each key's limit. With 1 every claim fills its key, which leaves the turn
 * index until the release: the limit binds on every claim. 16 agents hold at
 * most 16 issues at once, so at least 984 of the 1,000 keys always have room:
 * the agents are never starved.
 */
const MAX_ACTIVE = 1;

interface Config {
  name: string;
  keys: number;
  maxActive: number | null;
}

const CONFIGS: Config[] = [
  { name: "A: no keys", keys: 0, maxActive: null },
  { name: `B: ${KEYS.toLocaleString("en")} keys, limit ${MAX_ACTIVE}`, keys: KEYS, maxActive: MAX_ACTIVE },
];

interface Measurement {
  claimsPerSecond: number;
  claimP50: number;
  claimP99: number;
  releaseP50: number;
  /** Claims answered other than IssueClaimed (NoIssueAvailable): an agent starved. */
  empty: number;
  /** Most keys seen at their limit at once (sampled every 250 ms). */
  keysAtLimit: number;
  /** Distinct keys that gave out an issue. */
  keysServed: number;
}

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const levels = [1, 16];
  const seconds = options.quick ? 2 : 10;
  const backlog = options.quick ? 20_000 : 100_000;
  const rounds = options.quick ? 2 : 3;
  const f = await fixture("baton_bench_keys", Math.max(...levels), 4714);
  // results[config][agents] = one Measurement per round
  const results = new Map<string, Map<number, Measurement[]>>(CONFIGS.map((c) => [c.name, new Map(levels.map((a) => [a, []]))]));
  const notes: string[] = [];
  let explain = "";
  try {
    for (let round = 0; round < rounds; round++) {
      // A then B at each level, so the two runs compared sit side by side in time.
      for (const agents of levels) {
        for (const config of CONFIGS) {
          await refill(f, backlog, config);
          results
            .get(config.name)!
            .get(agents)!
            .push(await cycles(f, agents, seconds, config));
        }
      }
    }
    const missed = levels.some((a) => ratio(results, a, (m) => m.claimsPerSecond) < 0.8 || ratio(results, a, (m) => m.claimP50) > 1.2);
    if (missed || process.env.BENCH_KEYS_EXPLAIN) explain = await explainClaim(f, backlog);
  } finally {
    await f.close();
  }

  const rows: ScenarioResult["rows"] = [];
  for (const agents of levels) {
    for (const config of CONFIGS) {
      const ms = results.get(config.name)!.get(agents)!;
      const keyed = config.keys > 0;
      rows.push({
        agents,
        config: config.name,
        "claims/s": Math.round(median(ms.map((m) => m.claimsPerSecond))),
        "claim p50 ms": median(ms.map((m) => m.claimP50)).toFixed(2),
        "claim p99 ms": median(ms.map((m) => m.claimP99)).toFixed(2),
        "release p50 ms": median(ms.map((m) => m.releaseP50)).toFixed(2),
        "claims/s per round": ms.map((m) => Math.round(m.claimsPerSecond)).join(", "),
        "B/A claims/s": keyed ? ratio(results, agents, (m) => m.claimsPerSecond).toFixed(2) : "",
        "B/A claim p50": keyed ? ratio(results, agents, (m) => m.claimP50).toFixed(2) : "",
        "keys at limit (max)": keyed ? Math.max(...ms.map((m) => m.keysAtLimit)) : "",
        "keys served": keyed ? Math.min(...ms.map((m) => m.keysServed)) : "",
        "no issue": ms.reduce((s, m) => s + m.empty, 0),
      });
    }
  }
  for (const agents of levels) {
    const tput = ratio(results, agents, (m) => m.claimsPerSecond);
    const p50 = ratio(results, agents, (m) => m.claimP50);
    const met = tput >= 0.8 && p50 <= 1.2;
    notes.push(
      `target (issue 15) at ${agents} agent${agents > 1 ? "s" : ""}: claims/s and claim p50 with ${KEYS} limited keys within 20% of no keys — ` +
        `claims/s B/A ${tput.toFixed(2)}× (${Math.round(medianOf(results, CONFIGS[1]!, agents, (m) => m.claimsPerSecond))} vs ${Math.round(medianOf(results, CONFIGS[0]!, agents, (m) => m.claimsPerSecond))}/s), ` +
        `claim p50 B/A ${p50.toFixed(2)}× (${medianOf(results, CONFIGS[1]!, agents, (m) => m.claimP50).toFixed(2)} vs ${medianOf(results, CONFIGS[0]!, agents, (m) => m.claimP50).toFixed(2)} ms): ${met ? "met" : "not met"}`,
    );
  }
  notes.push(
    `${seconds}s per measurement, ${backlog.toLocaleString("en")} open issues refilled before each (same priorities and ages in A and B; in B issue g has key (g−1)/4 mod ${KEYS}, so every key holds every priority). ` +
      `Order A, B at each level in turn, repeated ${rounds}×; each cell is the median of its ${rounds} rounds. ` +
      `Each agent claims (claimIssue, includeUnassigned) then releases it BLOCKED (DONE from CLAIMED is refused); claim latency is the claim alone, claims/s counts claim + release cycles.`,
    `Limit ${MAX_ACTIVE} per key: every claim fills its key (it leaves the turn index until released), so the limit decides every claim, yet 16 agents hold at most 16 of the ${KEYS} keys and never starve ("no issue" counts claims answered other than IssueClaimed). ` +
      `"keys at limit" is the most keys seen full at once (sampled every 250 ms), "keys served" the fewest distinct keys that gave out an issue in one measurement.`,
  );
  if (explain) notes.push(`EXPLAIN ANALYZE of CLAIM_NEXT_FOR_EACH (one request) in B:\n\n\`\`\`\n${explain}\n\`\`\``);
  return {
    name: "concurrency keys",
    columns: [
      "agents",
      "config",
      "claims/s",
      "claim p50 ms",
      "claim p99 ms",
      "release p50 ms",
      "claims/s per round",
      "B/A claims/s",
      "B/A claim p50",
      "keys at limit (max)",
      "keys served",
      "no issue",
    ],
    rows,
    notes,
  };
}

/**
 * Deletes every issue, event and key row of the fixture, then inserts `open`
 * OPEN issues as Fixture.refill does (same titles, priorities and ages), with
 * `config.keys` keys round-robin within each priority ('' when 0); the
 * trigger creates the keys' rows, then every named key gets the limit.
 */
async function refill(f: Fixture, open: number, config: Config): Promise<void> {
  await f.db.query(`TRUNCATE lock_events`);
  await f.db.query(`TRUNCATE issues CASCADE`);
  await f.db.query(`DELETE FROM concurrency_keys WHERE company_id = $1`, [f.companyId]);
  await f.db.query(
    `INSERT INTO issues (company_id, title, priority, created_at, concurrency_key)
     SELECT $1, 'job ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority, now() + g * interval '1 microsecond',
            CASE WHEN $3::int = 0 THEN '' ELSE 'key-' || ((g - 1) / 4) % $3::int END
       FROM generate_series(1, $2) g`,
    [f.companyId, open, config.keys],
  );
  if (config.maxActive !== null) {
    const { rowCount } = await f.db.query(`UPDATE concurrency_keys SET max_active = $2 WHERE company_id = $1 AND key <> ''`, [f.companyId, config.maxActive]);
    if (rowCount !== config.keys) throw new Error(`expected ${config.keys} key rows from the trigger, found ${rowCount}`);
  }
  await f.db.query(`VACUUM ANALYZE issues`);
  await f.db.query(`VACUUM ANALYZE concurrency_keys`);
  await f.db.query(`VACUUM ANALYZE companies`);
  await f.db.query(`VACUUM ANALYZE heartbeat_runs`);
}

/** `agents` loops of claim then release through the API for `seconds`. */
async function cycles(f: Fixture, agents: number, seconds: number, config: Config): Promise<Measurement> {
  const claimLatencies: number[] = [];
  const releaseLatencies: number[] = [];
  let claims = 0;
  let empty = 0;
  let keysAtLimit = 0;
  // Sampled in A too (it finds none), so both runs carry the same extra query.
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      if (!sampling) break;
      const { rows } = await f.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM concurrency_keys WHERE company_id = $1 AND max_active IS NOT NULL AND active >= max_active`,
        [f.companyId],
      );
      keysAtLimit = Math.max(keysAtLimit, rows[0]!.n);
    }
  })();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  try {
    await Promise.all(
      Array.from({ length: agents }, async (_, i) => {
        const w = f.workers[i]!;
        while (performance.now() < deadline) {
          const t0 = performance.now();
          const { claimIssue } = await gql<{ claimIssue: { __typename: string; issue?: { id: string } } }>(f.url, w.key, CLAIM, { r: w.runId });
          const t1 = performance.now();
          claimLatencies.push(t1 - t0);
          if (claimIssue.__typename !== "IssueClaimed") {
            empty++;
            if (claimIssue.__typename !== "NoIssueAvailable") throw new Error(`claimIssue → ${claimIssue.__typename}`);
            return;
          }
          claims++;
          const { releaseIssue } = await gql<{ releaseIssue: { __typename: string } }>(f.url, w.key, RELEASE, { r: w.runId, i: claimIssue.issue!.id });
          releaseLatencies.push(performance.now() - t1);
          if (releaseIssue.__typename !== "IssueReleased") throw new Error(`releaseIssue → ${releaseIssue.__typename}`);
        }
      }),
    );
  } finally {
    sampling = false;
    await sampler;
  }
  const elapsed = (performance.now() - started) / 1000;
  claimLatencies.sort((a, b) => a - b);
  releaseLatencies.sort((a, b) => a - b);
  const { rows } = await f.db.query<{ served: number; over: number; active: number }>(
    `SELECT (SELECT count(DISTINCT concurrency_key)::int FROM issues WHERE company_id = $1 AND status = 'BLOCKED') AS served,
            (SELECT count(*)::int FROM concurrency_keys WHERE company_id = $1 AND active > max_active) AS over,
            (SELECT coalesce(sum(active), 0)::int FROM concurrency_keys WHERE company_id = $1) AS active`,
    [f.companyId],
  );
  if (rows[0]!.over > 0 || rows[0]!.active !== 0)
    throw new Error(`after ${config.name}: ${rows[0]!.over} keys over their limit, ${rows[0]!.active} issues still active`);
  return {
    claimsPerSecond: claims / elapsed,
    claimP50: percentile(claimLatencies, 50),
    claimP99: percentile(claimLatencies, 99),
    releaseP50: percentile(releaseLatencies, 50),
    empty,
    keysAtLimit,
    keysServed: rows[0]!.served,
  };
}

/** The plan of the claim statement the API sends for one idle claim, on a fresh B backlog (rolled back). */
async function explainClaim(f: Fixture, backlog: number): Promise<string> {
  await refill(f, backlog, CONFIGS[1]!);
  const w = f.workers[0]!;
  const statement = claimNextForEachStatement(f.companyId, [
    { actor: { companyId: f.companyId, agentId: w.agentId, agentNameKey: w.nameKey }, runId: w.runId, includeUnassigned: true },
  ]);
  const client = await f.db.connect();
  try {
    await client.query("BEGIN");
    // Warm once, then the plan that counts.
    await client.query({ text: `EXPLAIN (ANALYZE, BUFFERS) ${statement.text}`, values: statement.values });
    await client.query("ROLLBACK");
    await client.query("BEGIN");
    const { rows } = await client.query<{ "QUERY PLAN": string }>({ text: `EXPLAIN (ANALYZE, BUFFERS) ${statement.text}`, values: statement.values });
    return rows.map((r) => r["QUERY PLAN"]).join("\n");
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function medianOf(results: Map<string, Map<number, Measurement[]>>, config: Config, agents: number, pick: (m: Measurement) => number): number {
  return median(results.get(config.name)!.get(agents)!.map(pick));
}

/** B's median over A's median. */
function ratio(results: Map<string, Map<number, Measurement[]>>, agents: number, pick: (m: Measurement) => number): number {
  return medianOf(results, CONFIGS[1]!, agents, pick) / medianOf(results, CONFIGS[0]!, agents, pick);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { defaultOptions } = await import("./lib.js");
  console.log(JSON.stringify(await run(defaultOptions(process.argv.includes("--quick"))), null, 2));
}
