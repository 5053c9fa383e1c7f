// The work graph (issue 29) and what it costs a claim. Two measurements:
//
// 1. Claims beside a backlog that is not ready: claim throughput and latency
//    at 16 agents in two databases, each with its own Baton API, measured in
//    one run:
//      - A "ready only": N ready issues in the company (unassigned, as claims.ts);
//      - B "+ 200,000 not ready": the same N ready issues, plus, in the same
//        company, 100,000 issues waiting on blockers (issue_dependencies rows,
//        waiting_count set to match) and 100,000 delayed a day to a week
//        ahead (not_before, delayed). They are older than every ready issue
//        and of every priority, half of them assigned to the claiming agents,
//        so all of them come before the ready ones in claim order: a claim
//        that looked at them at all would pay for it.
//    Target (issue 29): B's claims/s ≥ 0.8× A's and B's claim p50 ≤ 1.2× A's.
//    Each agent loops claimIssue(includeUnassigned) through the API, one
//    mutation per claim, claims only (as claims.ts); then, as a second series,
//    the statement the API runs for it (CLAIM_NEXT_FOR_EACH for one request)
//    straight through node-postgres, where the database's share is not
//    diluted by the API's. Both databases are filled before a series starts,
//    and the series alternates short slices A B, B A, A B, … so that the two
//    sides of each pair see the same machine (its speed drifts with whatever
//    else runs on the 2 cores). The shared buffers one claim reads (EXPLAIN
//    (ANALYZE, BUFFERS) of its generic plan, the one prepared statements
//    settle on) do not drift at all: they show whether the claim reads the
//    backlog.
//
// 2. Wake-up latency. 1,000 issues delayed to instants spread over a few
//    seconds ahead, while 16 agents poll claimIssue through the API; for each,
//    claimed_at − not_before on the database clock. The API instance wakes
//    due issues every BATON_WAKE_INTERVAL_MS (default 250, left as is).
//    Target (issue 29): p99 < 1 s. Measured in A (nothing else waiting) and
//    in B (beside the backlog). Then what an agent built on the SDK sees: one
//    baton.work() worker with its defaults, and 100 issues due over 10 s.
import type pg from "pg";
import { claimNextForEachStatement } from "../src/locks/claim/claimNextForEach.js";
import { fixture } from "./fixture.js";
import type { Fixture } from "./fixture.js";
import { gql, percentile } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;

const AGENTS = 16;
const WAITING = 100_000;
const DELAYED = 100_000;
/** The waiting issues form chains of this many, each chain headed by one BLOCKED issue (not DONE, never claimable). */
const CHAIN = 100;
const WAKE_ISSUES = 1_000;
/** The wake-up issues' notBefore run from 1 s ahead to 1 s + this, evenly. */
const WAKE_SPREAD_MS = 4_000;
/** How long a claimer that got NoIssueAvailable waits before it asks again. */
const POLL_MS = 50;
/** The SDK's wake-up: this many issues, notBefore 1 s to 1 s + SDK_SPREAD_MS ahead, for one worker with the SDK's defaults. */
const SDK_ISSUES = 100;
const SDK_SPREAD_MS = 10_000;

interface Side {
  name: string;
  backlog: boolean;
  f: Fixture;
}

type Mode = "API" | "statement";
const MODES: Mode[] = ["API", "statement"];

interface Slice {
  claims: number;
  seconds: number;
  latencies: number[];
}

interface Plan {
  ms: number;
  /** Shared buffers hit + read by the whole plan (its CTEs; not the triggers). */
  buffers: number;
  /** Each index scan on issues: the index, and the rows it returned in all its loops. */
  scans: string;
  /** Each trigger the claim fired: its time (ms) and calls. */
  triggers: string;
  text: string;
}

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const sliceSeconds = options.quick ? 1.5 : 3;
  const pairs = options.quick ? 4 : 10;
  const ready = options.quick ? 20_000 : 100_000;
  const sides: Side[] = [];
  // slices[mode][side] in measurement order; slice k of A and slice k of B form pair k
  const slices = new Map<string, Slice[]>();
  const plans = new Map<string, Plan>();
  const checks: string[] = [];
  const wake = new Map<string, { latencies: number[]; unclaimed: number; early: number }>();
  let sdk: { latencies: number[]; unclaimed: number; early: number } | { error: string } | null = null;
  try {
    sides.push({ name: "A: ready only", backlog: false, f: await fixture("baton_bench_graph_a", AGENTS, 4715) });
    sides.push({ name: "B: + 100,000 waiting, 100,000 delayed", backlog: true, f: await fixture("baton_bench_graph_b", AGENTS, 4716) });
    for (const mode of MODES) {
      for (const side of sides) {
        const check = await refill(side, ready);
        if (mode === "API") {
          if (check) checks.push(check);
          plans.set(side.name, await explainClaim(side.f));
        }
        // warm: the API's and the pool's connections, and each one's prepared statement past its first custom plans
        await measure(side.f, mode, 1);
      }
      for (let k = 0; k < pairs; k++) {
        for (const side of k % 2 === 0 ? sides : [...sides].reverse()) {
          const key = `${mode}|${side.name}`;
          slices.set(key, [...(slices.get(key) ?? []), await measure(side.f, mode, sliceSeconds)]);
        }
      }
    }
    for (const side of sides) wake.set(side.name, await wakeLatency(side));
    sdk = await sdkWakeLatency(sides[0]!).catch((err: unknown) => ({ error: (err as Error).message }));
  } finally {
    for (const side of sides) await side.f.close();
  }

  const [a, b] = sides as [Side, Side];
  const stats = (mode: Mode, side: Side) => {
    const ss = slices.get(`${mode}|${side.name}`)!;
    const latencies = ss.flatMap((s) => s.latencies).sort((x, y) => x - y);
    const claims = ss.reduce((n, s) => n + s.claims, 0);
    const seconds = ss.reduce((n, s) => n + s.seconds, 0);
    return { perSecond: claims / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), slices: ss };
  };
  const rows: ScenarioResult["rows"] = [];
  const notes: string[] = [];
  for (const mode of MODES) {
    const sa = stats(mode, a);
    const sb = stats(mode, b);
    const pairRatios = sb.slices.map((s, k) => s.claims / s.seconds / (sa.slices[k]!.claims / sa.slices[k]!.seconds));
    const tput = sb.perSecond / sa.perSecond;
    const p50 = sb.p50 / sa.p50;
    for (const [side, s] of [
      [a, sa],
      [b, sb],
    ] as const) {
      const plan = plans.get(side.name)!;
      rows.push({
        claims: mode === "API" ? "claimIssue via the API" : "CLAIM_NEXT_FOR_EACH direct",
        config: side.name,
        "claims/s": Math.round(s.perSecond),
        "p50 ms": s.p50.toFixed(2),
        "p99 ms": s.p99.toFixed(2),
        "B/A claims/s": side.backlog ? tput.toFixed(2) : "",
        "B/A p50": side.backlog ? p50.toFixed(2) : "",
        "B/A p99": side.backlog ? (sb.p99 / sa.p99).toFixed(2) : "",
        "claims/s by slice": s.slices.map((x) => Math.round(x.claims / x.seconds)).join(", "),
        "B/A claims/s by pair": side.backlog ? pairRatios.map((r) => r.toFixed(2)).join(", ") : "",
        "one claim: buffers, ms": mode === "statement" ? `${plan.buffers}, ${plan.ms.toFixed(2)}` : "",
      });
    }
    notes.push(
      `target (issue 29), ${mode === "API" ? "claimIssue through the API" : "its statement sent directly"} at ${AGENTS} agents: beside ${(WAITING + DELAYED).toLocaleString("en")} not-ready issues, claims/s and p50 within 20% of without them — ` +
        `claims/s B/A ${tput.toFixed(2)}× (${Math.round(sb.perSecond)} vs ${Math.round(sa.perSecond)}/s; median of the ${pairs} pairs ${median(pairRatios).toFixed(2)}×), ` +
        `p50 B/A ${p50.toFixed(2)}× (${sb.p50.toFixed(2)} vs ${sa.p50.toFixed(2)} ms): ${tput >= 0.8 && p50 <= 1.2 ? "met" : "not met"}`,
    );
  }
  for (const side of sides) {
    const w = wake.get(side.name)!;
    const sorted = [...w.latencies].sort((x, y) => x - y);
    const p99 = percentile(sorted, 99);
    rows.push({
      claims: `wake-up: claimed_at − not_before, ${WAKE_ISSUES} issues`,
      config: side.name,
      "p50 ms": percentile(sorted, 50).toFixed(0),
      "p99 ms": p99.toFixed(0),
      "max ms": sorted.length ? sorted.at(-1)!.toFixed(0) : "",
      "over 500 ms": w.latencies.filter((ms) => ms > 500).length,
      "claimed early": w.early,
      "not claimed": w.unclaimed,
    });
    notes.push(
      `target (issue 29), ${side.name}: a delayed issue is claimed within 1 s of its notBefore — p99 ${p99.toFixed(0)} ms over ${sorted.length} of ${WAKE_ISSUES} ` +
        `(p50 ${percentile(sorted, 50).toFixed(0)}, max ${sorted.at(-1)?.toFixed(0)} ms; ${w.early} claimed before notBefore, ${w.unclaimed} not claimed): ` +
        `${p99 < 1000 && w.unclaimed === 0 && w.early === 0 ? "met" : "not met"}`,
    );
  }
  if (sdk && "error" in sdk) notes.push(`SDK wake-up: could not be measured: ${sdk.error}`);
  else if (sdk) {
    const sorted = [...sdk.latencies].sort((x, y) => x - y);
    rows.push({
      claims: `wake-up, SDK work() with its defaults, 1 worker: CLAIMED at − not_before, ${SDK_ISSUES} issues`,
      config: a.name,
      "p50 ms": percentile(sorted, 50).toFixed(0),
      "p99 ms": percentile(sorted, 99).toFixed(0),
      "max ms": sorted.length ? sorted.at(-1)!.toFixed(0) : "",
      "over 500 ms": sorted.filter((ms) => ms > 500).length,
      "claimed early": sdk.early,
      "not claimed": sdk.unclaimed,
    });
    notes.push(
      `SDK wake-up (not the target's measure; what an agent built on the SDK sees): one baton.work() worker with its defaults (includeUnassigned, idleWaitMs 5000), ` +
        `${SDK_ISSUES} delayed issues due 1 s to ${1 + SDK_SPREAD_MS / 1000} s ahead — p50 ${percentile(sorted, 50).toFixed(0)}, p99 ${percentile(sorted, 99).toFixed(0)} ms after notBefore. ` +
        `An idle worker claims again only after idleWaitMs or on a ledger event with status OPEN, and waking an issue writes none.`,
    );
  }
  const pa = plans.get(a.name)!;
  const pb = plans.get(b.name)!;
  notes.push(
    `One claim (CLAIM_NEXT_FOR_EACH for one request, its generic plan, EXPLAIN (ANALYZE, BUFFERS) on a fresh fill, rolled back): ` +
      `A ${pa.buffers} shared buffers in ${pa.ms.toFixed(2)} ms, B ${pb.buffers} in ${pb.ms.toFixed(2)} ms (B/A buffers ${(pb.buffers / pa.buffers).toFixed(2)}×). ` +
      `Unlike time, buffers do not drift with the machine's load: the same count means the claim reads none of the backlog. ` +
      `Its index scans on issues and the rows each gave — A: ${pa.scans}; B: ${pb.scans}. Its triggers — A: ${pa.triggers}; B: ${pb.triggers}.`,
    `${AGENTS} agents, claims only (nothing released); A and B in two databases on the same server, each with its own API process, both filled with ${ready.toLocaleString("en")} ready issues before each series. ` +
      `Each series (API, then the statement) warms both for 1 s, then runs ${pairs} pairs of ${sliceSeconds}s slices, A then B, B then A, …; claims/s is all claims over all slices, p50/p99 over all claims, and "by pair" the ratio within each pair.`,
    `B's backlog: ${WAITING.toLocaleString("en")} waiting issues in chains of ${CHAIN} (each waits on the one before it; the first, and every tenth, on one of ${WAITING / CHAIN} BLOCKED issues), ` +
      `waiting_count 1 or 2 as the edges say; ${DELAYED.toLocaleString("en")} delayed issues with not_before a day to a week ahead; all older than every ready issue, every priority, half assigned to the ${AGENTS} agents.`,
    ...checks,
    `Wake-up: ${WAKE_ISSUES} issues inserted delayed, not_before 1 s to ${1 + WAKE_SPREAD_MS / 1000} s ahead (evenly spread), nothing else ready; ${AGENTS} agents loop claimIssue through the API, ` +
      `asking again at once after a claim and ${POLL_MS} ms after NoIssueAvailable. Latency = claimed_at − not_before, both from the database's clock; ` +
      `it includes the wake interval (BATON_WAKE_INTERVAL_MS, default 250 ms, the one API instance's waker), the poll (${POLL_MS} ms) and the claim. ` +
      `Waking writes no event (WAKE_DUE_ISSUES), so a claimer cannot wait for one: it polls.`,
  );
  if (pb.buffers > pa.buffers * 1.2 || process.env.BENCH_GRAPH_EXPLAIN)
    notes.push(`EXPLAIN (ANALYZE, BUFFERS) of one claim in B:\n\n\`\`\`\n${pb.text}\n\`\`\``);
  return {
    name: "work graph: claims beside 200,000 not-ready issues, and wake-up",
    columns: [
      "claims",
      "config",
      "claims/s",
      "p50 ms",
      "p99 ms",
      "max ms",
      "B/A claims/s",
      "B/A p50",
      "B/A p99",
      "claims/s by slice",
      "B/A claims/s by pair",
      "one claim: buffers, ms",
      "over 500 ms",
      "claimed early",
      "not claimed",
    ],
    rows,
    notes,
  };
}

/**
 * Deletes every issue, edge and event of the side's database, then inserts
 * `ready` ready issues as Fixture.refill does (same titles, priorities and
 * ages) and, in B, the not-ready backlog before them in claim order. Returns
 * what it checked of B's backlog.
 */
async function refill(side: Side, ready: number): Promise<string> {
  const f = side.f;
  await f.db.query(`TRUNCATE lock_events`);
  await f.db.query(`TRUNCATE issues CASCADE`);
  await f.db.query(
    `INSERT INTO issues (company_id, title, priority, created_at)
     SELECT $1, 'job ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority, now() + g * interval '1 microsecond'
       FROM generate_series(1, $2) g`,
    [f.companyId, ready],
  );
  if (side.backlog) await insertBacklog(f);
  await f.db.query(`VACUUM ANALYZE issues`);
  await f.db.query(`VACUUM ANALYZE issue_dependencies`);
  await f.db.query(`VACUUM ANALYZE companies`);
  await f.db.query(`VACUUM ANALYZE heartbeat_runs`);
  if (!side.backlog) return "";
  // The backlog is what it says: readiness as the API computes it (Issue.ready), and waiting_count as the edges say.
  const { rows } = await f.db.query<{ ready: number; waiting: number; delayed: number; edges: number; wrong: number }>(
    `SELECT count(*) FILTER (WHERE status = 'OPEN' AND attempt_count < max_attempts AND waiting_count = 0 AND (not_before IS NULL OR not_before <= now()))::int AS ready,
            count(*) FILTER (WHERE waiting_count > 0)::int AS waiting,
            count(*) FILTER (WHERE delayed AND not_before > now())::int AS delayed,
            (SELECT count(*)::int FROM issue_dependencies) AS edges,
            (SELECT count(*)::int FROM issues i
              WHERE i.waiting_count <> (SELECT count(*) FROM issue_dependencies d JOIN issues b ON b.id = d.blocked_by_id
                                         WHERE d.issue_id = i.id AND b.status <> 'DONE')) AS wrong
       FROM issues WHERE company_id = $1`,
    [f.companyId],
  );
  const c = rows[0]!;
  if (c.ready !== ready || c.waiting !== WAITING || c.delayed !== DELAYED || c.wrong !== 0)
    throw new Error(`backlog not as meant: ${JSON.stringify(c)} (ready ${ready}, waiting ${WAITING}, delayed ${DELAYED}, wrong 0)`);
  return `B checked after its fill of ${c.ready.toLocaleString("en")} ready: ${c.waiting.toLocaleString("en")} waiting (${c.edges.toLocaleString("en")} edges, every waiting_count matching them), ${c.delayed.toLocaleString("en")} delayed, none of them ready.`;
}

/**
 * B's not-ready issues, with SQL alone: WAITING/CHAIN BLOCKED chain heads,
 * WAITING waiting issues and their edges, DELAYED delayed issues. Ages an hour
 * or two before the ready ones, so all of them come first in claim order.
 */
async function insertBacklog(f: Fixture): Promise<void> {
  const agents = f.workers.map((w) => w.agentId);
  // Ids made from the row's number (md5 → uuid), so that the edges need no join: a join over rows inserted a
  // moment ago is planned on the statistics of the previous fill, and one such plan took minutes.
  // The chains' blockers: BLOCKED, so neither DONE nor claimable.
  await f.db.query(
    `INSERT INTO issues (id, company_id, title, status, created_at)
     SELECT md5('blocker ' || c)::uuid, $1, 'blocker ' || c, 'BLOCKED', now() - interval '2 hours' + c * interval '1 microsecond'
       FROM generate_series(1, $2) c`,
    [f.companyId, WAITING / CHAIN],
  );
  // Waiting issue g is link (g − 1) % CHAIN of chain (g − 1) / CHAIN. It waits on the link before it, and the first
  // link and every tenth on its chain's blocker: waiting_count counts those edges (no blocker is DONE).
  // Priorities go round g by g, assignment block of four by block of four: each half has every priority.
  await f.db.query(
    `INSERT INTO issues (id, company_id, title, priority, assignee_agent_id, waiting_count, created_at)
     SELECT md5('waits ' || g)::uuid, $1, 'waits ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority,
            CASE WHEN (g / 4) % 2 = 0 THEN ($2::uuid[])[1 + (g / 8) % cardinality($2::uuid[])] END,
            (CASE WHEN (g - 1) % $4 > 0 THEN 1 ELSE 0 END) + (CASE WHEN (g - 1) % $4 = 0 OR g % 10 = 0 THEN 1 ELSE 0 END),
            now() - interval '1 hour' + g * interval '1 microsecond'
       FROM generate_series(1, $3) g`,
    [f.companyId, agents, WAITING, CHAIN],
  );
  await f.db.query(
    `INSERT INTO issue_dependencies (issue_id, blocked_by_id, company_id)
     SELECT md5('waits ' || g)::uuid, md5('waits ' || (g - 1))::uuid, $1::uuid FROM generate_series(1, $2) g WHERE (g - 1) % $3 > 0
     UNION ALL
     SELECT md5('waits ' || g)::uuid, md5('blocker ' || (1 + (g - 1) / $3))::uuid, $1::uuid FROM generate_series(1, $2) g WHERE (g - 1) % $3 = 0 OR g % 10 = 0`,
    [f.companyId, WAITING, CHAIN],
  );
  await f.db.query(
    `INSERT INTO issues (company_id, title, priority, assignee_agent_id, not_before, delayed, created_at)
     SELECT $1, 'later ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority,
            CASE WHEN (g / 4) % 2 = 0 THEN ($2::uuid[])[1 + (g / 8) % cardinality($2::uuid[])] END,
            now() + interval '1 day' + g * interval '6 seconds', true,
            now() - interval '1 hour' + g * interval '1 microsecond'
       FROM generate_series(1, $3) g`,
    [f.companyId, agents, DELAYED],
  );
}

/** AGENTS loops of one claim for `seconds`: claimIssue through the API, or its statement, prepared, straight through node-postgres. */
async function measure(f: Fixture, mode: Mode, seconds: number): Promise<Slice> {
  const claim =
    mode === "API"
      ? async (w: Fixture["workers"][number]) => {
          const { claimIssue } = await gql<{ claimIssue: { __typename: string } }>(f.url, w.key, CLAIM, { r: w.runId });
          return claimIssue.__typename === "IssueClaimed";
        }
      : async (w: Fixture["workers"][number]) => {
          const actor = { companyId: f.companyId, agentId: w.agentId, agentNameKey: w.nameKey };
          const statement = claimNextForEachStatement(f.companyId, [{ actor, runId: w.runId, includeUnassigned: true }]);
          const { rows } = await f.db.query({ name: "claim_next_for_each", text: statement.text, values: statement.values });
          return (rows[0]?.answers?.[0]?.issue ?? null) !== null;
        };
  const latencies: number[] = [];
  let empty = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    f.workers.map(async (w) => {
      while (performance.now() < deadline) {
        const t = performance.now();
        const got = await claim(w);
        latencies.push(performance.now() - t);
        if (!got) {
          empty++;
          return;
        }
      }
    }),
  );
  if (empty > 0) throw new Error(`${empty} claims found no issue: the ready set ran out`);
  return { claims: latencies.length, seconds: (performance.now() - started) / 1000, latencies };
}

/**
 * The plan of one claim as an idle API instance sends it, on a fresh fill: its
 * generic plan (what a prepared statement settles on after its first
 * executions), run twice, both rolled back; the second counts.
 */
async function explainClaim(f: Fixture): Promise<Plan> {
  const w = f.workers[0]!;
  const statement = claimNextForEachStatement(f.companyId, [
    { actor: { companyId: f.companyId, agentId: w.agentId, agentNameKey: w.nameKey }, runId: w.runId, includeUnassigned: true },
  ]);
  const client = await f.db.connect();
  try {
    // EXECUTE takes no bind parameters under EXPLAIN: the values go in as literals
    const args = statement.values.map((v) => literal(client, v)).join(", ");
    await client.query(`PREPARE bench_graph_claim AS ${statement.text}`);
    let plan: string[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        await client.query("BEGIN");
        try {
          await client.query("SET LOCAL plan_cache_mode = force_generic_plan");
          const { rows } = await client.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_graph_claim(${args})`);
          plan = rows.map((r) => r["QUERY PLAN"]);
        } finally {
          await client.query("ROLLBACK");
        }
      }
    } finally {
      await client.query("DEALLOCATE bench_graph_claim");
    }
    // The first Buffers line is the top node's: the whole plan, its CTEs included (the triggers are not in it).
    const top = plan.find((l) => /Buffers: shared/.test(l)) ?? "";
    const buffers = Number(/hit=(\d+)/.exec(top)?.[1] ?? 0) + Number(/read=(\d+)/.exec(top)?.[1] ?? 0);
    const ms = Number(/Execution Time: ([\d.]+)/.exec(plan.join("\n"))?.[1] ?? Number.NaN);
    // (a scan's "Rows Removed by Filter" is among the lines after it, before the next node)
    const scans: string[] = [];
    plan.forEach((line, i) => {
      const m = /Index (?:Only )?Scan using (\w+) on issues .*actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)/.exec(line);
      if (!m) return;
      const next = plan.slice(i + 1).findIndex((l) => l.includes("->"));
      const details = plan.slice(i + 1, next < 0 ? undefined : i + 1 + next);
      const removed = Number(/Rows Removed by Filter: (\d+)/.exec(details.join("\n"))?.[1] ?? 0) * Number(m[3]);
      scans.push(`${m[1]} ${Number(m[2]) * Number(m[3])}${removed ? ` (${removed} filtered out)` : ""}`);
    });
    const triggers = plan
      .map((l) => /Trigger (\w+) on issues: time=([\d.]+) calls=(\d+)/.exec(l))
      .filter((m) => m !== null)
      .map((m) => `${m[1]} ${m[2]} ms × ${m[3]}`)
      .join(", ");
    return { ms, buffers, scans: scans.join(", "), triggers, text: plan.join("\n") };
  } finally {
    client.release();
  }
}

/**
 * WAKE_ISSUES issues delayed to instants 1 s to 1 s + WAKE_SPREAD_MS ahead,
 * claimed by AGENTS polling claimers through the API. Returns claimed_at −
 * not_before of each claimed one (ms), how many were claimed before their
 * not_before (none, if the rule holds) and how many not by the deadline.
 */
async function wakeLatency(side: Side) {
  const f = side.f;
  await refill(side, 0);
  let claimed = 0;
  let stop = false;
  const claimers = Promise.all(
    f.workers.map(async (w) => {
      while (!stop) {
        const { claimIssue } = await gql<{ claimIssue: { __typename: string } }>(f.url, w.key, CLAIM, { r: w.runId });
        if (claimIssue.__typename === "IssueClaimed") claimed++;
        else if (claimIssue.__typename === "NoIssueAvailable") await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        else throw new Error(`claimIssue → ${claimIssue.__typename}`);
      }
    }),
  );
  try {
    await f.db.query(
      `INSERT INTO issues (company_id, title, priority, not_before, delayed)
       SELECT $1, 'wake ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority,
              now() + interval '1 second' + (g - 1) * make_interval(secs => $3::float8 / 1000 / $2), true
         FROM generate_series(1, $2) g`,
      [f.companyId, WAKE_ISSUES, WAKE_SPREAD_MS],
    );
    // deadline-bounded: every issue claimed, or 10 s past the last notBefore
    const deadline = performance.now() + 1000 + WAKE_SPREAD_MS + 10_000;
    while (claimed < WAKE_ISSUES && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  } finally {
    stop = true;
    await claimers;
  }
  const { rows } = await f.db.query<{ ms: number | null }>(
    `SELECT extract(epoch FROM claimed_at - not_before) * 1000 AS ms FROM issues WHERE company_id = $1 AND title LIKE 'wake %'`,
    [f.companyId],
  );
  const latencies = rows.filter((r) => r.ms !== null).map((r) => Number(r.ms));
  return { latencies, unclaimed: rows.length - latencies.length, early: latencies.filter((ms) => ms < 0).length };
}

/**
 * SDK_ISSUES issues delayed to instants 1 s to 1 s + SDK_SPREAD_MS ahead, with
 * nothing else to do, for one baton.work() worker with the SDK's defaults;
 * returns CLAIMED at − not_before of each (ms), from the ledger.
 */
async function sdkWakeLatency(side: Side) {
  const { Baton } = await import("../src/client/index.js");
  const f = side.f;
  await refill(side, 0);
  const worker = new Baton({ url: f.url, token: f.workers[0]!.key }).work(() => undefined, { includeUnassigned: true });
  try {
    await f.db.query(
      `INSERT INTO issues (company_id, title, priority, not_before, delayed)
       SELECT $1, 'sdk ' || g, 'MEDIUM', now() + interval '1 second' + (g - 1) * make_interval(secs => $3::float8 / 1000 / $2), true
         FROM generate_series(1, $2) g`,
      [f.companyId, SDK_ISSUES, SDK_SPREAD_MS],
    );
    // deadline-bounded: every issue done, or 15 s past the last notBefore
    const deadline = performance.now() + 1000 + SDK_SPREAD_MS + 15_000;
    for (;;) {
      const { rows } = await f.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM issues WHERE company_id = $1 AND status = 'DONE'`, [f.companyId]);
      if (rows[0]!.n >= SDK_ISSUES || performance.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    await worker.stop();
  }
  const { rows } = await f.db.query<{ ms: number | null }>(
    `SELECT extract(epoch FROM (SELECT min(e.at) FROM lock_events e WHERE e.issue_id = i.id AND e.kind = 'CLAIMED') - i.not_before) * 1000 AS ms
       FROM issues i WHERE i.company_id = $1 AND i.title LIKE 'sdk %'`,
    [f.companyId],
  );
  const latencies = rows.filter((r) => r.ms !== null).map((r) => Number(r.ms));
  return { latencies, unclaimed: rows.length - latencies.length, early: latencies.filter((ms) => ms < 0).length };
}

/** A statement value as an SQL literal: a string, a number or boolean, or an array of them. */
function literal(client: pg.PoolClient, value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (Array.isArray(value)) return client.escapeLiteral(`{${value.map((e) => (e === null ? "NULL" : `"${String(e).replace(/["\\]/g, "\\$&")}"`)).join(",")}}`);
  return client.escapeLiteral(String(value));
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { defaultOptions } = await import("./lib.js");
  console.log(JSON.stringify(await run(defaultOptions(process.argv.includes("--quick"))), null, 2));
}
