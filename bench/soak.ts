// The soak (issue 12): 64 agents over 100,000 issues for 10 minutes (--quick:
// 16 agents, 10,000 issues, 1 minute), against the API as its own process, with
// the recovery loop running as its own process, and agents "killed" at random:
// a killed agent stops heartbeating and vanishes mid-job, holding its lock, as
// a SIGKILLed one would, and a new agent takes its place. Afterwards every
// lease is let run out, one sweep runs, and the history checker must find the
// ledger, the rows and everything the agents were told consistent, with the
// audit at zero. The API's memory is sampled throughout (the curve is in the
// results).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import pg from "pg";
import { checkHistory } from "../support/history.js";
import type { Told } from "../support/history.js";
import { ADMIN_TOKEN, freshDatabase, gql, startApi } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

const PORT = 4793;
const LEASE_SECONDS = 10;
/** The chance that an agent dies in the middle of a job. */
const KILL_CHANCE = 0.01;
/** BENCH_SOAK_KEYS=N spreads the issues over N concurrency keys, each limited to BENCH_SOAK_KEY_LIMIT (2) active issues. */
const KEYS = Number(process.env.BENCH_SOAK_KEYS ?? 0);
const KEY_LIMIT = Number(process.env.BENCH_SOAK_KEY_LIMIT ?? 2);

type Claim = { claimIssue: { __typename: string; issue?: { id: string; lockEpoch: number } } };

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const agents = options.quick ? 16 : 64;
  const issues = options.quick ? 10_000 : 100_000;
  const seconds = Number(process.env.BENCH_SOAK_SECONDS ?? (options.quick ? 60 : 600));
  const databaseUrl = await freshDatabase("baton_bench_soak");
  const api = await startApi(databaseUrl, PORT, { BATON_RUN_LEASE_SECONDS: String(LEASE_SECONDS) });
  const recovery = spawn(process.execPath, ["--import", "tsx", "src/bin/recovery.ts"], {
    env: { ...process.env, DATABASE_URL: databaseUrl, BATON_RECOVERY_INTERVAL_MS: "2000" },
    stdio: "ignore",
  });
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${api.child.pid}/status`, "utf8"))![1]) / 1024;
  /** The API's live JavaScript heap, from its own /metrics: RSS alone also counts heap V8 has not handed back yet. */
  const heap = async () => {
    const text = await (await fetch(`http://127.0.0.1:${PORT}/metrics`)).text();
    return Math.round(Number(/^baton_nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? NaN) / 1024 / 1024);
  };
  const told: Told[] = [];
  const tally = { jobs: 0, requeued: 0, killed: 0, errors: 0 };
  const memory: [number, number, number][] = [];
  try {
    const { createCompany } = await gql<{ createCompany: { company: { id: string }; boardKey: string } }>(
      api.url,
      ADMIN_TOKEN,
      `mutation { createCompany(name: "soak") { company { id } boardKey } }`,
    );
    const companyId = createCompany.company.id;
    const keys: string[] = [];
    for (let i = 0; i < agents; i++) {
      const { createAgent } = await gql<{ createAgent: { apiKey: string } }>(
        api.url,
        createCompany.boardKey,
        `mutation($n: String!) { createAgent(name: $n) { apiKey } }`,
        { n: `agent ${i}` },
      );
      keys.push(createAgent.apiKey);
    }
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    await db.query(
      `INSERT INTO issues (company_id, title, priority, concurrency_key)
       SELECT $1, 'job ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority,
              CASE WHEN $3::int > 0 THEN 'k' || (g % $3::int) ELSE '' END
         FROM generate_series(1, $2::int) g`,
      [companyId, issues, KEYS],
    );
    if (KEYS > 0) await db.query(`UPDATE concurrency_keys SET max_active = $2 WHERE company_id = $1 AND key <> ''`, [companyId, KEY_LIMIT]);
    await db.end();
    /** With keys: the most keys ever seen over their limit, or with a count that disagrees with the issues (both must stay 0). */
    const keyWatch = { over: 0, miscounted: 0 };
    const watcher = new pg.Client({ connectionString: databaseUrl });
    await watcher.connect();
    let watching = false;
    const watchKeys = async () => {
      if (KEYS === 0 || watching) return; // one sample at a time on this client
      watching = true;
      try {
        const { rows } = await watcher.query(
          `SELECT count(*) FILTER (WHERE counted > max_active)::int AS over, count(*) FILTER (WHERE counted <> active)::int AS miscounted
             FROM (SELECT k.max_active, k.active,
                          (SELECT count(*) FROM issues i WHERE i.company_id = k.company_id AND i.concurrency_key = k.key
                              AND i.concurrency_key <> '' AND i.status IN ('CLAIMED', 'IN_PROGRESS')) AS counted
                     FROM concurrency_keys k WHERE k.company_id = $1 AND k.key <> '') x`,
          [companyId],
        );
        keyWatch.over = Math.max(keyWatch.over, rows[0].over);
        keyWatch.miscounted = Math.max(keyWatch.miscounted, rows[0].miscounted);
      } finally {
        watching = false;
      }
    };

    const started = performance.now();
    const deadline = started + seconds * 1000;
    const sample = async () => memory.push([Math.round((performance.now() - started) / 1000), Math.round(rss()), await heap().catch(() => NaN)]);
    const sampler = setInterval(() => void sample(), 10_000);
    const keySampler = setInterval(() => void watchKeys().catch(() => {}), 1_000);
    await sample();

    /** One agent's life: a run, heartbeats, jobs; until it is killed (then a new life) or the soak ends. */
    async function life(key: string): Promise<"killed" | "done"> {
      const call = <T>(query: string, variables?: Record<string, unknown>) => gql<T>(api.url, key, query, variables);
      let runId: string;
      try {
        runId = (await call<{ startRun: { id: string } }>(`mutation { startRun { id } }`)).startRun.id;
      } catch {
        tally.errors++;
        return "done";
      }
      const beat = setInterval(
        () => void call(`mutation($r: ID!) { heartbeatRun(runId: $r) { __typename } }`, { r: runId }).catch(() => {}),
        (LEASE_SECONDS * 1000) / 3,
      );
      try {
        while (performance.now() < deadline) {
          let claim: Claim;
          try {
            claim = await call<Claim>(
              `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id lockEpoch } } } }`,
              { r: runId },
            );
          } catch {
            tally.errors++;
            return "killed"; // an unknown outcome: this run may hold an issue; leave it to its lease, as a dead agent would
          }
          const issue = claim.claimIssue.issue;
          if (claim.claimIssue.__typename === "RunNotActive") return "killed";
          if (!issue) {
            await new Promise((resolve) => setTimeout(resolve, 200));
            continue;
          }
          told.push({ kind: "claimed", runId, issueId: issue.id, lockEpoch: issue.lockEpoch });
          const acquired = await call<{ acquireExecution: { __typename: string } }>(
            `mutation($r: ID!, $i: ID!) { acquireExecution(runId: $r, issueId: $i) { __typename } }`,
            { r: runId, i: issue.id },
          ).catch(() => null);
          if (acquired?.acquireExecution.__typename !== "ExecutionAcquired") return "killed";
          if (Math.random() < KILL_CHANCE) {
            tally.killed++;
            return "killed"; // dies mid-job: no release, no more heartbeats
          }
          const outcome = Math.random() < 0.2 ? "REQUEUE" : "DONE";
          const released = await call<{ releaseIssue: { __typename: string } }>(
            `mutation($r: ID!, $i: ID!, $o: ReleaseOutcome!) { releaseIssue(runId: $r, issueId: $i, outcome: $o) { __typename } }`,
            { r: runId, i: issue.id, o: outcome },
          ).catch(() => null);
          if (released?.releaseIssue.__typename !== "IssueReleased") return "killed";
          told.push({ kind: "released", runId, issueId: issue.id });
          tally.jobs++;
          if (outcome === "REQUEUE") tally.requeued++;
        }
        await call(`mutation($r: ID!) { finishRun(runId: $r, status: SUCCEEDED) { __typename } }`, { r: runId }).catch(() => {});
        return "done";
      } finally {
        clearInterval(beat);
      }
    }
    await Promise.all(
      keys.map(async (key) => {
        while ((await life(key)) === "killed" && performance.now() < deadline);
      }),
    );
    clearInterval(sampler);
    clearInterval(keySampler);
    await sample();
    await watchKeys();
    await watcher.end();

    // Every lease runs out, then the recovery loop (still running) frees what the dead held.
    const check = new pg.Client({ connectionString: databaseUrl });
    await check.connect();
    let held = -1;
    for (const until = Date.now() + (LEASE_SECONDS + 30) * 1000; Date.now() < until; ) {
      held = (await check.query(`SELECT count(*)::int AS n FROM issues WHERE checkout_run_id IS NOT NULL`)).rows[0].n;
      if (held === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    const audit = await gql<{ lockAudit: Record<string, unknown> }>(
      api.url,
      createCompany.boardKey,
      `query($c: ID!) { lockAudit(companyId: $c) { doubleClaims halfReleasedLocks miscountedKeys locksHeldByDeadRuns unescalatedExhausted } }`,
      { c: companyId },
    );
    await check.end();
    const violations = await checkHistory(databaseUrl, companyId, told);
    const curve = memory.map(([t, mb, used]) => `${t}s ${mb}/${used}`).join(", ");
    return {
      name: "soak",
      columns: [
        "agents",
        "issues",
        "keys (limit)",
        "keys ever over limit or miscounted",
        "seconds",
        "jobs done",
        "requeued",
        "agents killed mid-job",
        "call errors",
        "locks still held",
        "audit",
        "checker violations",
        "API RSS start → end MB",
        "API heap used start → end MB",
      ],
      rows: [
        {
          agents,
          issues: issues.toLocaleString("en"),
          "keys (limit)": KEYS > 0 ? `${KEYS} (${KEY_LIMIT})` : "none",
          "keys ever over limit or miscounted": KEYS > 0 ? `${keyWatch.over} / ${keyWatch.miscounted} (sampled every second)` : "",
          seconds,
          "jobs done": tally.jobs.toLocaleString("en"),
          requeued: tally.requeued.toLocaleString("en"),
          "agents killed mid-job": tally.killed,
          "call errors": tally.errors,
          "locks still held": held,
          audit: JSON.stringify(audit.lockAudit),
          "checker violations": violations.length,
          "API RSS start → end MB": `${memory[0]![1]} → ${memory.at(-1)![1]}`,
          "API heap used start → end MB": `${memory[0]![2]} → ${memory.at(-1)![2]}`,
        },
      ],
      notes: [
        `Agents die mid-job with probability ${KILL_CHANCE} per job (no release, no heartbeat; lease ${LEASE_SECONDS} s); the recovery loop runs as its own process every 2 s. Goal: zero checker violations, the audit at zero, memory flat.`,
        `API memory over the run, RSS/heap used in MB every 10 s: ${curve}.`,
        ...(violations.length ? [`First violations: ${violations.slice(0, 5).join(" | ")}`] : []),
      ],
    };
  } finally {
    recovery.kill("SIGTERM");
    await api.stop();
  }
}
