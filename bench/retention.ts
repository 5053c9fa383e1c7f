// Retention (issue 16): does a big ledger slow the service down, and how long
// does a retention pass take? Two databases in one run:
//   - "fresh": a new database, as every other scenario uses;
//   - "big": the same, plus 10 million ledger rows (1 million with --quick)
//     spread over the 30 UTC days before today, one partition a day, over 100
//     companies, the measured company among them with a tenth of the rows.
// Measured on both, alternating fresh/big to cancel the machine's drift:
//   - claim p50 and claims/s through the API (claim + release loops, as
//     bench/keys.ts) at 1 and 16 agents;
//   - the fan-out figures of bench/fanout.ts (p50/p99 commit-to-delivery to
//     100 subscribers on two instances) on each database.
// Then, on the big database, one retention pass with a 20-day window: it
// drops the 10 oldest day partitions (a third of the rows) while 16 agents
// keep claiming; the pass's time and the claims' worst latency and errors
// during it are reported beside the same loop's figures just before it.
// Targets: claim p50 and fan-out within 20% of fresh; the pass under 1 s.
import { fixture } from "./fixture.js";
import type { Fixture } from "./fixture.js";
import { run as fanout } from "./fanout.js";
import { gql, percentile } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";
import { pruneLedger } from "../src/retention/partitions.js";

const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;
const RELEASE = `mutation($r: ID!, $i: ID!) { releaseIssue(runId: $r, issueId: $i, outcome: BLOCKED) { __typename } }`;
const DAY_MS = 86_400_000;
const DAYS = 30;
const COMPANIES = 100;

interface Loop {
  claimsPerSecond: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
}

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const rowsInLedger = options.quick ? 1_000_000 : 10_000_000;
  const seconds = options.quick ? 2 : 8;
  const rounds = options.quick ? 2 : 3;
  const levels = [1, 16];
  const notes: string[] = [];
  const fresh = await fixture("baton_bench_retention_fresh", 16, 4721);
  const big = await fixture("baton_bench_retention_big", 16, 4722);
  const results = new Map<string, Map<number, Loop[]>>([fresh, big].map((f) => [f.databaseUrl, new Map(levels.map((a) => [a, []]))]));
  const rows: ScenarioResult["rows"] = [];
  try {
    const filled = performance.now();
    await fillLedger(big, rowsInLedger);
    notes.push(
      `Filling the big ledger (${rowsInLedger.toLocaleString("en")} rows, ${DAYS} partitions, ${COMPANIES} companies) took ${((performance.now() - filled) / 1000).toFixed(0)} s.`,
    );
    for (let round = 0; round < rounds; round++) {
      for (const agents of levels) {
        for (const f of [fresh, big]) {
          await refill(f, 20_000);
          results
            .get(f.databaseUrl)!
            .get(agents)!
            .push(await claimLoop(f, agents, seconds));
        }
      }
    }
    for (const agents of levels) {
      const cell = (f: Fixture, pick: (l: Loop) => number) => median(results.get(f.databaseUrl)!.get(agents)!.map(pick));
      for (const [name, f] of [
        ["fresh", fresh],
        ["big ledger", big],
      ] as const) {
        rows.push({
          measure: `claims, ${agents} agent${agents > 1 ? "s" : ""}`,
          database: name,
          "claims/s": Math.round(cell(f, (l) => l.claimsPerSecond)),
          "p50 ms": cell(f, (l) => l.p50).toFixed(2),
          "p99 ms": cell(f, (l) => l.p99).toFixed(2),
          "big/fresh":
            f === big
              ? `claims/s ${(cell(big, (l) => l.claimsPerSecond) / cell(fresh, (l) => l.claimsPerSecond)).toFixed(2)}×, p50 ${(cell(big, (l) => l.p50) / cell(fresh, (l) => l.p50)).toFixed(2)}×`
              : "",
        });
      }
      const p50 = cell(big, (l) => l.p50) / cell(fresh, (l) => l.p50);
      notes.push(
        `target: claim p50 with ${rowsInLedger.toLocaleString("en")} ledger rows within 20% of fresh at ${agents} agent${agents > 1 ? "s" : ""} — ${p50.toFixed(2)}×: ${p50 <= 1.2 ? "met" : "not met"}`,
      );
    }

    // Fan-out, fresh and big alternating (each run starts its own two API instances on that database).
    const fan = async (f: Fixture) =>
      (await fanout(options, { databaseUrl: f.databaseUrl, subscriberCounts: [100], events: options.quick ? 40 : 300, rate: 20 })).rows[0]!;
    const fans = { fresh: [] as Record<string, string | number>[], big: [] as Record<string, string | number>[] };
    for (let round = 0; round < rounds; round++) {
      fans.fresh.push(await fan(fresh));
      fans.big.push(await fan(big));
    }
    const fanCell = (runs: Record<string, string | number>[], column: string) => median(runs.map((r) => Number(r[column])));
    const fanP50 = fanCell(fans.big, "p50 ms") / fanCell(fans.fresh, "p50 ms");
    const fanP99 = fanCell(fans.big, "p99 ms") / fanCell(fans.fresh, "p99 ms");
    for (const [name, runs] of [
      ["fresh", fans.fresh],
      ["big ledger", fans.big],
    ] as const) {
      rows.push({
        measure: "fan-out, 100 subscribers",
        database: name,
        "p50 ms": fanCell(runs, "p50 ms").toFixed(1),
        "p99 ms": fanCell(runs, "p99 ms").toFixed(1),
        "big/fresh": runs === fans.big ? `p50 ${fanP50.toFixed(2)}×, p99 ${fanP99.toFixed(2)}×` : "",
        delivered: runs.map((r) => r["delivered/expected"]).join(", "),
      });
    }
    notes.push(
      `target: fan-out with the big ledger within 20% of fresh — p50 ${fanP50.toFixed(2)}×, p99 ${fanP99.toFixed(2)}×: ${fanP50 <= 1.2 && fanP99 <= 1.2 ? "met" : "not met"} ` +
        `(100 subscribers on two instances, ${rounds} runs on each database alternating, medians; each run's latencies are a few ms, so a fraction of a ms moves the ratio)`,
    );

    // The retention pass, with 16 agents claiming throughout.
    await refill(big, 50_000);
    const before = await claimLoop(big, 16, seconds);
    const { rows: counted } = await big.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM lock_event_partitions WHERE to_at <= now() - interval '20 days'`,
    );
    let passMs = 0;
    let dropped = 0;
    const during = await claimLoop(big, 16, seconds, async () => {
      const t = performance.now();
      dropped = (await pruneLedger(big.databaseUrl, 20)).dropped.length;
      passMs = performance.now() - t;
    });
    rows.push(
      {
        measure: "claims, 16 agents, just before the pass",
        database: "big ledger",
        "claims/s": Math.round(before.claimsPerSecond),
        "p50 ms": before.p50.toFixed(2),
        "p99 ms": before.p99.toFixed(2),
        "max ms": before.max.toFixed(1),
        errors: before.errors,
      },
      {
        measure: "claims, 16 agents, during the pass",
        database: "big ledger",
        "claims/s": Math.round(during.claimsPerSecond),
        "p50 ms": during.p50.toFixed(2),
        "p99 ms": during.p99.toFixed(2),
        "max ms": during.max.toFixed(1),
        errors: during.errors,
      },
      { measure: `retention pass (${dropped} partitions dropped)`, database: "big ledger", "pass ms": passMs.toFixed(0) },
    );
    notes.push(
      `target: a retention pass over 10 partitions in under 1 s — ${dropped} partitions (${counted[0]!.n} expired, about ${Math.round((rowsInLedger / DAYS) * dropped).toLocaleString("en")} rows) in ${passMs.toFixed(0)} ms: ${dropped >= 10 && passMs < 1000 ? "met" : "not met"}. ` +
        `Claims during the pass: ${during.errors} errors, worst ${during.max.toFixed(1)} ms against ${before.max.toFixed(1)} ms in the same loop just before.`,
      `${seconds}s per claim measurement, fresh and big alternating at each level, ${rounds} rounds, each cell the median of its rounds. Each agent claims (claimIssue, includeUnassigned) then releases BLOCKED, as bench/keys.ts.`,
    );
  } finally {
    await fresh.close();
    await big.close();
  }
  return {
    name: "retention: a big ledger and a retention pass",
    columns: ["measure", "database", "claims/s", "p50 ms", "p99 ms", "max ms", "errors", "pass ms", "delivered", "big/fresh"],
    rows,
    notes,
  };
}

/** `total` rows over the DAYS whole UTC days before today, one partition each, direct into each partition. */
async function fillLedger(f: Fixture, total: number): Promise<void> {
  const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
  const perDay = Math.floor(total / DAYS);
  const companies = [f.companyId, ...Array.from({ length: COMPANIES - 1 }, () => crypto.randomUUID())];
  for (let d = DAYS; d >= 1; d--) {
    const from = new Date(today - d * DAY_MS);
    const name = `lock_events_${from.toISOString().slice(0, 10).replaceAll("-", "")}`;
    await f.db.query(`CREATE TABLE ${name} (LIKE lock_events INCLUDING DEFAULTS)`);
    // Rows first, then attach: the indexes are built once per partition, as a restore would.
    await f.db.query(
      `INSERT INTO ${name} (company_id, seq, issue_id, kind, status, at)
       SELECT CASE WHEN g % 10 = 0 THEN $1::uuid ELSE ($2::uuid[])[1 + g % ${COMPANIES}] END,
              $3::bigint + g, md5((g % 100000)::text)::uuid,
              (ARRAY['CLAIMED','EXECUTION_ACQUIRED','RELEASED']::lock_event_kind[])[1 + g % 3],
              (ARRAY['CLAIMED','IN_PROGRESS','DONE']::issue_status[])[1 + g % 3],
              $4::timestamptz + ((g - 1) * ($5::float8 / $6)) * interval '1 millisecond'
         FROM generate_series(1, $6::int) g`,
      [f.companyId, companies, (DAYS - d) * perDay, from, DAY_MS, perDay],
    );
    await f.db.query(
      `ALTER TABLE lock_events ATTACH PARTITION ${name} FOR VALUES FROM ('${from.toISOString()}') TO ('${new Date(from.getTime() + DAY_MS).toISOString()}')`,
    );
  }
  await f.db.query(`ANALYZE lock_events`);
}

/** Replaces the company's issues (keeps the ledger) with `open` OPEN ones. */
async function refill(f: Fixture, open: number): Promise<void> {
  await f.db.query(`TRUNCATE issues CASCADE`);
  await f.db.query(
    `INSERT INTO issues (company_id, title, priority, created_at)
     SELECT $1, 'job ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority, now() + g * interval '1 microsecond'
       FROM generate_series(1, $2) g`,
    [f.companyId, open],
  );
  await f.db.query(`VACUUM ANALYZE issues`);
}

/** `agents` loops of claim then release through the API for `seconds`, with `alongside` started at once. */
async function claimLoop(f: Fixture, agents: number, seconds: number, alongside?: () => Promise<void>): Promise<Loop> {
  const latencies: number[] = [];
  let claims = 0;
  let errors = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const side = alongside?.();
  await Promise.all(
    Array.from({ length: agents }, async (_, i) => {
      const w = f.workers[i]!;
      while (performance.now() < deadline) {
        const t0 = performance.now();
        try {
          const { claimIssue } = await gql<{ claimIssue: { __typename: string; issue?: { id: string } } }>(f.url, w.key, CLAIM, { r: w.runId });
          latencies.push(performance.now() - t0);
          if (claimIssue.__typename !== "IssueClaimed") throw new Error(`claimIssue → ${claimIssue.__typename}`);
          claims++;
          await gql(f.url, w.key, RELEASE, { r: w.runId, i: claimIssue.issue!.id });
        } catch {
          errors++;
        }
      }
    }),
  );
  await side;
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { claimsPerSecond: claims / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1) ?? NaN, errors };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
