// Full life cycle of no-op work, jobs per second, Baton next to its peers on
// the same PostgreSQL server in one run:
//   - Baton through the API (claimIssue → acquireExecution → releaseIssue DONE,
//     16 agents, each with its own key and run);
//   - Baton "batched" (claimIssues(limit, acquireExecution: true) →
//     releaseIssues), only if the schema has those mutations;
//   - graphile-worker 0.17.3: defaults (1 runner × concurrency 16) and batched
//     (localQueue.size 500, completeJobBatchDelay/failJobBatchDelay 0);
//   - pg-boss 10.4.2: work() batchSize 1 × 16 workers and batchSize 1000 × 4.
// Every system gets its own database on the same server and a backlog made
// before timing starts. A job counts when its completion is committed.
//   npx tsx bench/peers.ts [--quick]
import { loadavg } from "node:os";
import { fileURLToPath, pathToFileURL } from "node:url";
import pg from "pg";
import { Logger, run as runGraphileWorker, runMigrations as graphileMigrations } from "graphile-worker";
import PgBoss from "pg-boss";
import { ADMIN_TOKEN, ADMIN_URL, freshDatabase, gql, startApi } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

const NAME = "full life cycle vs peers";
const AGENTS = 16;
// Batched Baton: claimIssues limit × agents; BENCH_BATON_BATCH=1000x4 tries another shape.
const [BATON_BATCH_LIMIT, BATON_BATCH_AGENTS] = (process.env.BENCH_BATON_BATCH ?? "200x16").split("x").map(Number) as [number, number];
const API_PORT = 4737;
/** Batching options for graphile-worker 0.17.3 (preset.worker.*; names read from node_modules/graphile-worker/dist/index.d.ts). */
const GRAPHILE_BATCHED_WORKER_OPTIONS = { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 };
/** pg-boss 10 refuses anything under 0.5 s; the default is 2 s. */
const PGBOSS_POLLING_SECONDS = 0.5;

interface Plan {
  seconds: number;
  batonBacklog: number;
  batonBatchedBacklog: number;
  graphileDefaultBacklog: number;
  graphileBatchedBacklog: number;
  pgbossSingleBacklog: number;
  pgbossBatchedBacklog: number;
}

// Backlogs are sized so each mode runs for a measurable time at the rates in
// NOTES-performance.md: a fast mode draining 3000 jobs in 0.1 s would mostly
// measure its start-up.
const QUICK: Plan = {
  seconds: 3,
  batonBacklog: 3000,
  batonBatchedBacklog: 30_000,
  graphileDefaultBacklog: 10_000,
  graphileBatchedBacklog: 50_000,
  pgbossSingleBacklog: 3000,
  pgbossBatchedBacklog: 20_000,
};
const FULL: Plan = {
  seconds: 15,
  batonBacklog: 20_000,
  batonBatchedBacklog: 150_000,
  graphileDefaultBacklog: 50_000,
  graphileBatchedBacklog: 200_000,
  pgbossSingleBacklog: 20_000,
  pgbossBatchedBacklog: 100_000,
};

/** One timed measurement: `jobs` completions committed in `seconds`. */
interface Measured {
  jobs: number;
  seconds: number;
  backlog: number;
  drained: boolean;
  errors: string[];
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A plain, empty database for a peer (DROP … WITH (FORCE) first). */
async function plainDatabase(adminUrl: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  return databaseUrl(adminUrl, name);
}

async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/**
 * Waits for a peer's backlog to be worked: first on an in-process counter of
 * jobs handed to the task (no database load), then on the committed count.
 * Returns when `committed()` reaches `backlog` or at `deadline`.
 */
async function waitForCommitted(
  handed: () => number,
  committed: () => Promise<number>,
  backlog: number,
  deadline: number,
): Promise<{ jobs: number; end: number; drained: boolean }> {
  for (let i = 0; i < 1_000_000 && now() < deadline && handed() < backlog; i++) await sleep(5);
  for (let i = 0; i < 100_000 && now() < deadline; i++) {
    const jobs = await committed();
    if (jobs >= backlog) return { jobs, end: now(), drained: true };
    await sleep(5);
  }
  const end = now();
  return { jobs: await committed(), end, drained: false };
}

/** Resolves once the first job starts (time 0 of a peer's measurement), or throws after `ms`. */
async function firstStart(started: () => number, ms: number): Promise<number> {
  const limit = now() + ms;
  while (now() < limit) {
    const t = started();
    if (t > 0) return t;
    await sleep(2);
  }
  throw new Error(`no job started within ${ms / 1000} s`);
}

// ---------------------------------------------------------------- Baton ----

interface BatonAgent {
  key: string;
  runId: string;
}

interface BatonFleet {
  boardKey: string;
  agents: BatonAgent[];
}

async function batonFleet(apiUrl: string, label: string, size = AGENTS): Promise<BatonFleet> {
  const { createCompany } = await gql<{ createCompany: { company: { id: string }; boardKey: string } }>(
    apiUrl,
    ADMIN_TOKEN,
    `mutation($n: String!) { createCompany(name: $n) { company { id } boardKey } }`,
    { n: label },
  );
  const agents: BatonAgent[] = [];
  for (let i = 0; i < size; i++) {
    const { createAgent } = await gql<{ createAgent: { apiKey: string } }>(
      apiUrl,
      createCompany.boardKey,
      `mutation($n: String!) { createAgent(name: $n) { apiKey } }`,
      { n: `${label} agent ${i}` },
    );
    const { startRun } = await gql<{ startRun: { id: string } }>(apiUrl, createAgent.apiKey, `mutation { startRun { id } }`);
    agents.push({ key: createAgent.apiKey, runId: startRun.id });
  }
  return { boardKey: createCompany.boardKey, agents };
}

/** The backlog through the API, 1000 issues per createIssues call (one transaction each). */
async function batonBacklog(apiUrl: string, boardKey: string, count: number): Promise<void> {
  const CREATE = `mutation($inputs: [CreateIssueInput!]!) { createIssues(inputs: $inputs) { id } }`;
  for (let made = 0; made < count; ) {
    const n = Math.min(1000, count - made);
    const inputs = Array.from({ length: n }, (_, i) => ({ title: `job ${made + i}` }));
    await gql(apiUrl, boardKey, CREATE, { inputs });
    made += n;
  }
}

async function vacuumAnalyze(url: string, table: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`VACUUM ANALYZE ${table}`);
  } catch {
    // Only a planner hint before timing; the measurement does not depend on it.
  } finally {
    await client.end();
  }
}

const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;
const ACQUIRE = `mutation($r: ID!, $i: ID!) { acquireExecution(runId: $r, issueId: $i) { __typename } }`;
const RELEASE = `mutation($r: ID!, $i: ID!) { releaseIssue(runId: $r, issueId: $i, outcome: DONE) { __typename } }`;
// One request per job: the first claim takes both locks; every release claims (and starts) the next.
const CLAIM_STARTED = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true, startExecution: true) { __typename ... on IssueClaimed { issue { id } } } }`;
const RELEASE_NEXT = `mutation($r: ID!, $i: ID!) { releaseIssue(runId: $r, issueId: $i, outcome: DONE, next: { includeUnassigned: true }) { __typename ... on IssueReleased { next { issue { id } } } } }`;
// Batched: only sent when introspection shows claimIssues and releaseIssues.
const CLAIM_MANY = `mutation($r: ID!, $n: Int!) { claimIssues(runId: $r, limit: $n, includeUnassigned: true, acquireExecution: true) { __typename ... on IssuesClaimed { issues { id } } } }`;
const RELEASE_MANY = `mutation($r: ID!, $ids: [ID!]!) { releaseIssues(runId: $r, issueIds: $ids, outcome: DONE) { __typename ... on IssuesReleased { issues { id } } } }`;

/** What one round of one agent ends with: jobs completed (and what went wrong on the way), or why the agent stops. */
type Round = { jobs: number; error?: string } | { drained: true } | { error: string };

/**
 * Every agent of the fleet runs `round` until it is drained, fails, or
 * `seconds` pass (and at most `maxRounds` times, a hard cap); jobs are counted
 * when their release is committed.
 */
async function runFleet(
  fleet: BatonFleet,
  backlog: number,
  seconds: number,
  maxRounds: number,
  round: (agent: BatonFleet["agents"][number]) => Promise<Round>,
): Promise<Measured> {
  const errors: string[] = [];
  let jobs = 0;
  let drained = false;
  const started = now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    fleet.agents.map(async (agent) => {
      for (let i = 0; i < maxRounds && now() < deadline; i++) {
        const result = await round(agent).catch((error: unknown): Round => ({ error: message(error) }));
        if ("drained" in result) drained = true;
        if ("error" in result && result.error) errors.push(result.error);
        if (!("jobs" in result)) return;
        jobs += result.jobs;
      }
    }),
  );
  return { jobs, seconds: (now() - started) / 1000, backlog, drained, errors };
}

/** One job at a time per agent: claim → acquire → release DONE, until drained or `seconds`. */
function batonSingle(apiUrl: string, fleet: BatonFleet, backlog: number, seconds: number): Promise<Measured> {
  return runFleet(fleet, backlog, seconds, backlog + 10, async (agent): Promise<Round> => {
    const { claimIssue } = await gql<{ claimIssue: { __typename: string; issue?: { id: string } } }>(apiUrl, agent.key, CLAIM, { r: agent.runId });
    if (claimIssue.__typename === "NoIssueAvailable") return { drained: true };
    if (claimIssue.__typename !== "IssueClaimed" || !claimIssue.issue) return { error: `claimIssue → ${claimIssue.__typename}` };
    const issueId = claimIssue.issue.id;
    const { acquireExecution } = await gql<{ acquireExecution: { __typename: string } }>(apiUrl, agent.key, ACQUIRE, { r: agent.runId, i: issueId });
    if (acquireExecution.__typename !== "ExecutionAcquired") return { error: `acquireExecution → ${acquireExecution.__typename}` };
    const { releaseIssue } = await gql<{ releaseIssue: { __typename: string } }>(apiUrl, agent.key, RELEASE, { r: agent.runId, i: issueId });
    if (releaseIssue.__typename !== "IssueReleased") return { error: `releaseIssue → ${releaseIssue.__typename}` };
    return { jobs: 1 };
  });
}

/**
 * One request per job: claimIssue(startExecution) once, then releaseIssue(next)
 * whose answer is the agent's next issue, IN_PROGRESS, until drained or `seconds`.
 */
function batonOneRequest(apiUrl: string, fleet: BatonFleet, backlog: number, seconds: number): Promise<Measured> {
  const held = new Map<string, string>();
  return runFleet(fleet, backlog, seconds, backlog + 10, async (agent): Promise<Round> => {
    let issueId = held.get(agent.runId);
    if (!issueId) {
      const { claimIssue } = await gql<{ claimIssue: { __typename: string; issue?: { id: string } } }>(apiUrl, agent.key, CLAIM_STARTED, { r: agent.runId });
      if (claimIssue.__typename === "NoIssueAvailable") return { drained: true };
      if (claimIssue.__typename !== "IssueClaimed" || !claimIssue.issue) return { error: `claimIssue → ${claimIssue.__typename}` };
      issueId = claimIssue.issue.id;
    }
    const { releaseIssue } = await gql<{ releaseIssue: { __typename: string; next?: { issue: { id: string } } | null } }>(apiUrl, agent.key, RELEASE_NEXT, {
      r: agent.runId,
      i: issueId,
    });
    if (releaseIssue.__typename !== "IssueReleased") return { error: `releaseIssue → ${releaseIssue.__typename}` };
    if (releaseIssue.next) held.set(agent.runId, releaseIssue.next.issue.id);
    else held.delete(agent.runId);
    return { jobs: 1 };
  });
}

/**
 * Batched: claimIssues(limit, acquireExecution: true) → releaseIssues, until
 * drained or `seconds`. With limit 1 this is one job at a time in two calls
 * instead of three; but claimIssues and releaseIssues are not group-committed,
 * so under 16 agents it makes more statements and commits than the three
 * grouped calls do.
 */
function batonBatched(apiUrl: string, fleet: BatonFleet, backlog: number, seconds: number, limit = BATON_BATCH_LIMIT): Promise<Measured> {
  return runFleet(fleet, backlog, seconds, Math.ceil(backlog / limit) + 10, async (agent): Promise<Round> => {
    const { claimIssues } = await gql<{ claimIssues: { __typename: string; issues?: { id: string }[] } }>(apiUrl, agent.key, CLAIM_MANY, {
      r: agent.runId,
      n: limit,
    });
    if (claimIssues.__typename === "NoIssueAvailable" || claimIssues.issues?.length === 0) return { drained: true };
    if (claimIssues.__typename !== "IssuesClaimed" || !claimIssues.issues) return { error: `claimIssues → ${claimIssues.__typename}` };
    // claimIssues(acquireExecution: true) took both locks: the issues are IN_PROGRESS.
    const acquired = claimIssues.issues.map(({ id }) => id);
    const { releaseIssues } = await gql<{ releaseIssues: { __typename: string; issues?: { id: string }[] } }>(apiUrl, agent.key, RELEASE_MANY, {
      r: agent.runId,
      ids: acquired,
    });
    if (releaseIssues.__typename !== "IssuesReleased" || !releaseIssues.issues) return { error: `releaseIssues → ${releaseIssues.__typename}` };
    // A partial release is reported; the jobs that were released still count.
    const partial = releaseIssues.issues.length < acquired.length ? `releaseIssues released ${releaseIssues.issues.length} of ${acquired.length}` : undefined;
    return { jobs: releaseIssues.issues.length, error: partial };
  });
}

async function mutationNames(apiUrl: string): Promise<Set<string>> {
  const data = await gql<{ __type: { fields: { name: string }[] } | null }>(apiUrl, ADMIN_TOKEN, `{ __type(name: "Mutation") { fields { name } } }`);
  return new Set((data.__type?.fields ?? []).map((f) => f.name));
}

// ------------------------------------------------------- graphile-worker ----

/** Errors only; graphile-worker's info lines would flood the bench output. */
const graphileLogger = new Logger(() => (level, text) => {
  if (String(level) === "error") console.error(`[graphile-worker] ${text}`);
});

async function graphileWorker(url: string, backlog: number, seconds: number, batched: boolean): Promise<Measured> {
  const errors: string[] = [];
  await graphileMigrations({ connectionString: url, logger: graphileLogger });
  const db = new pg.Pool({ connectionString: url, max: 2 });
  try {
    // The backlog, before timing: graphile_worker.add_jobs in chunks of 10,000.
    for (let made = 0; made < backlog; ) {
      const n = Math.min(10_000, backlog - made);
      await db.query(
        `SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(
           SELECT ROW('noop', '{}'::json, NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
             FROM generate_series(1, $1::int)))`,
        [n],
      );
      made += n;
    }
    await db.query(`VACUUM ANALYZE graphile_worker._private_jobs`);
    let handed = 0;
    let t0 = 0;
    const runner = await runGraphileWorker({
      connectionString: url,
      concurrency: AGENTS,
      // One connection per concurrent job plus one, so the pool is not the bottleneck (default 10 warns).
      maxPoolSize: AGENTS + 1,
      noHandleSignals: true,
      logger: graphileLogger,
      taskList: {
        noop: async () => {
          if (handed++ === 0) t0 = now();
        },
      },
      ...(batched ? { preset: { worker: GRAPHILE_BATCHED_WORKER_OPTIONS } } : {}),
    });
    runner.events.on("pool:listen:error", ({ error }) => errors.push(message(error)));
    try {
      const start = await firstStart(() => t0, 30_000);
      // A job is done when graphile-worker has deleted its row (committed completion).
      const committed = async () => {
        const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs`);
        return backlog - rows[0]!.n;
      };
      const result = await waitForCommitted(() => handed, committed, backlog, start + seconds * 1000);
      return { jobs: result.jobs, seconds: (result.end - start) / 1000, backlog, drained: result.drained, errors };
    } finally {
      await runner.stop();
    }
  } finally {
    await db.end();
  }
}

// --------------------------------------------------------------- pg-boss ----

async function pgBoss(url: string, backlog: number, seconds: number, batchSize: number, workers: number): Promise<Measured> {
  const errors: string[] = [];
  const QUEUE = "noop";
  const boss = new PgBoss({ connectionString: url, max: AGENTS, supervise: false, schedule: false, migrate: true });
  boss.on("error", (error) => {
    if (errors.length < 20) errors.push(message(error));
  });
  const db = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await boss.start();
    await boss.createQueue(QUEUE);
    for (let made = 0; made < backlog; ) {
      const n = Math.min(5000, backlog - made);
      await boss.insert(Array.from({ length: n }, () => ({ name: QUEUE, data: {} })));
      made += n;
    }
    await db.query(`VACUUM ANALYZE pgboss.job`);
    let handed = 0;
    let t0 = 0;
    for (let w = 0; w < workers; w++) {
      await boss.work(QUEUE, { batchSize, pollingIntervalSeconds: PGBOSS_POLLING_SECONDS }, async (jobs) => {
        if (handed === 0) t0 = now();
        handed += jobs.length;
      });
    }
    const start = await firstStart(() => t0, 30_000);
    // pg-boss completes after the handler returns, without awaiting: count committed states.
    const committed = async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state = 'completed'`, [QUEUE]);
      return rows[0]!.n;
    };
    const result = await waitForCommitted(() => handed, committed, backlog, start + seconds * 1000);
    return { jobs: result.jobs, seconds: (result.end - start) / 1000, backlog, drained: result.drained, errors };
  } finally {
    await boss.stop({ graceful: true, wait: true, timeout: 5000 }).catch((error: unknown) => errors.push(message(error)));
    await db.end();
  }
}

// ------------------------------------------------------------- scenario ----

interface Row {
  system: string;
  mode: string;
  measured: Measured | null;
  /** Why there is no figure. */
  skipped?: string;
}

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const plan = options.quick ? QUICK : FULL;
  const rows: Row[] = [];
  const notes: string[] = [];
  const peerDatabases: string[] = [];
  const loadAtStart = loadavg()[0]!;

  const attempt = async (system: string, mode: string, measure: () => Promise<Measured>) => {
    try {
      rows.push({ system, mode, measured: await measure() });
    } catch (error) {
      rows.push({ system, mode, measured: null, skipped: `failed: ${message(error)}` });
    }
  };

  // Baton: one API child process, one fresh database; a company per mode so
  // leftovers of one mode are never claimed by the other.
  {
    const url = await freshDatabase("baton_bench_peers");
    let api: Awaited<ReturnType<typeof startApi>> | null = null;
    try {
      api = await startApi(url, API_PORT);
      const apiUrl = api.url;
      await attempt("Baton", "API, single (claimIssue + acquireExecution + releaseIssue)", async () => {
        const fleet = await batonFleet(apiUrl, "peers single");
        await batonBacklog(apiUrl, fleet.boardKey, plan.batonBacklog);
        await vacuumAnalyze(url, "issues");
        return batonSingle(apiUrl, fleet, plan.batonBacklog, plan.seconds);
      });

      await attempt("Baton", "API, one request per job (claimIssue startExecution, then releaseIssue next)", async () => {
        const fleet = await batonFleet(apiUrl, "peers one request");
        await batonBacklog(apiUrl, fleet.boardKey, plan.batonBacklog);
        await vacuumAnalyze(url, "issues");
        return batonOneRequest(apiUrl, fleet, plan.batonBacklog, plan.seconds);
      });

      await attempt("Baton", "API, single in two calls (claimIssues limit 1 with acquireExecution + releaseIssues: not grouped)", async () => {
        const fleet = await batonFleet(apiUrl, "peers single sdk");
        await batonBacklog(apiUrl, fleet.boardKey, plan.batonBacklog);
        await vacuumAnalyze(url, "issues");
        return batonBatched(apiUrl, fleet, plan.batonBacklog, plan.seconds, 1);
      });

      // Batched Baton: runs only once the schema has claimIssues and releaseIssues.
      const batchedMode = `API, batched (claimIssues limit ${BATON_BATCH_LIMIT} with acquireExecution + releaseIssues) × ${BATON_BATCH_AGENTS} agents`;
      let names: Set<string> | null = null;
      try {
        names = await mutationNames(apiUrl);
      } catch (error) {
        rows.push({ system: "Baton", mode: batchedMode, measured: null, skipped: `introspection failed: ${message(error)}` });
      }
      if (names) {
        const missing = ["claimIssues", "releaseIssues"].filter((n) => !names!.has(n));
        if (missing.length > 0) {
          rows.push({ system: "Baton", mode: batchedMode, measured: null, skipped: `skipped: the schema has no ${missing.join(" or ")} mutation yet` });
        } else {
          await attempt("Baton", batchedMode, async () => {
            const fleet = await batonFleet(apiUrl, "peers batched", BATON_BATCH_AGENTS);
            await batonBacklog(apiUrl, fleet.boardKey, plan.batonBatchedBacklog);
            await vacuumAnalyze(url, "issues");
            return batonBatched(apiUrl, fleet, plan.batonBatchedBacklog, plan.seconds);
          });
        }
      }
    } catch (error) {
      rows.push({ system: "Baton", mode: "API", measured: null, skipped: `failed: ${message(error)}` });
    } finally {
      // Stopped before the peers run, so it takes no CPU from them.
      if (api) await api.stop();
    }
  }

  // graphile-worker and pg-boss: each mode in its own fresh database on the same server.
  const peer = async (system: string, mode: string, database: string, measure: (url: string) => Promise<Measured>) => {
    peerDatabases.push(database);
    await attempt(system, mode, async () => measure(await plainDatabase(options.adminUrl, database)));
  };
  await peer("graphile-worker 0.17.3", `default (1 runner, concurrency ${AGENTS})`, "baton_bench_peers_gw_default", (url) =>
    graphileWorker(url, plan.graphileDefaultBacklog, plan.seconds, false),
  );
  await peer(
    "graphile-worker 0.17.3",
    `batched (concurrency ${AGENTS}, localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0)`,
    "baton_bench_peers_gw_batched",
    (url) => graphileWorker(url, plan.graphileBatchedBacklog, plan.seconds, true),
  );
  await peer("pg-boss 10.4.2", `work() batchSize 1 × ${AGENTS} workers (polling ${PGBOSS_POLLING_SECONDS} s)`, "baton_bench_peers_boss_single", (url) =>
    pgBoss(url, plan.pgbossSingleBacklog, plan.seconds, 1, AGENTS),
  );
  await peer("pg-boss 10.4.2", `work() batchSize 1000 × 4 workers (polling ${PGBOSS_POLLING_SECONDS} s)`, "baton_bench_peers_boss_batched", (url) =>
    pgBoss(url, plan.pgbossBatchedBacklog, plan.seconds, 1000, 4),
  );
  for (const name of peerDatabases) await dropDatabase(options.adminUrl, name).catch(() => undefined);

  // Table.
  const rate = (m: Measured | null) => (m && m.seconds > 0 ? m.jobs / m.seconds : NaN);
  const gwDefaultRate = () => rate(rows.find((r) => r.system.startsWith("graphile-worker") && r.mode.startsWith("default"))?.measured ?? null);
  const baseline = rate(rows.find((r) => r.system === "Baton" && r.mode.startsWith("API, single"))?.measured ?? null);
  const fmtRate = (n: number) => (Number.isFinite(n) ? (n >= 100 ? Math.round(n) : Math.round(n * 10) / 10) : "—");
  const fmtRatio = (n: number) => (Number.isFinite(n) ? Math.round(n * 100) / 100 : "—");
  const tableRows = rows.map((r) => {
    const perSecond = rate(r.measured);
    const row: Record<string, string | number> = {
      system: r.system,
      mode: r.mode,
      "jobs/s": r.measured ? fmtRate(perSecond) : (r.skipped ?? "—"),
      "ratio vs Baton API (single)": r.measured && Number.isFinite(baseline) ? fmtRatio(perSecond / baseline) : "—",
    };
    if (r.measured) {
      row.jobs = r.measured.jobs;
      row.seconds = Math.round(r.measured.seconds * 100) / 100;
      row.backlog = r.measured.backlog;
      row.drained = r.measured.drained ? "yes" : "no";
    }
    return row;
  });

  notes.push(
    `Full life cycle of a no-op job, counted when its completion is committed; ${AGENTS} concurrent agents/workers unless the mode says otherwise; ` +
      `each mode runs until its backlog is drained or ${plan.seconds} s pass (peers: from their first job start; Baton: from the first claim, setup excluded). ` +
      `Same PostgreSQL server, one database per system/mode, the Baton API child stopped before the peers run.`,
  );
  for (const r of rows) {
    if (r.measured) {
      const m = r.measured;
      notes.push(
        `${r.system} — ${r.mode}: ${m.jobs} jobs in ${m.seconds.toFixed(2)} s (backlog ${m.backlog}, ${m.drained ? "drained" : "time cap reached"})` +
          (m.errors.length ? `; ${m.errors.length} error(s), first: ${m.errors[0]}` : ""),
      );
    } else {
      notes.push(`${r.system} — ${r.mode}: ${r.skipped}`);
    }
  }
  notes.push(
    `1-minute load average ${loadAtStart.toFixed(2)} at the start, ${loadavg()[0]!.toFixed(2)} at the end (2 cores): ` +
      `other processes on the machine (tests, type-checks) skew absolute figures and, since the systems run one after another, the ratios too.`,
  );
  notes.push(
    `graphile-worker batching options used (0.17.3 has all three): preset.worker.localQueue = { size: 500 }, preset.worker.completeJobBatchDelay = 0, preset.worker.failJobBatchDelay = 0; maxPoolSize ${AGENTS + 1} in both modes.`,
  );
  notes.push(
    `pg-boss: new PgBoss({ max: ${AGENTS}, supervise: false, schedule: false }), createQueue, insert() in chunks of 5000, work(name, { batchSize, pollingIntervalSeconds: ${PGBOSS_POLLING_SECONDS} }) — 0.5 s is v10's minimum; its single-job mode is bound by that polling.`,
  );

  // The targets (issue 13): the single-job life cycle at 16 agents ≥ 1.0× graphile-worker's default mode.
  const twoCalls = rate(rows.find((r) => r.system === "Baton" && r.mode.startsWith("API, single in two calls"))?.measured ?? null);
  notes.push(
    `Target "API single life cycle at ${AGENTS} agents ≥ 1.0× graphile-worker's default mode": ${Math.max(baseline, twoCalls) / gwDefaultRate() >= 1 ? "MET" : "NOT MET"} — ` +
      `claimIssue + acquireExecution + releaseIssue ${fmtRatio(baseline / gwDefaultRate())}×, in two calls ${fmtRatio(twoCalls / gwDefaultRate())}× (graphile-worker default ${fmtRate(gwDefaultRate())} jobs/s).`,
  );
  const batched = rows.find((r) => r.system === "Baton" && r.mode.startsWith("API, batched"));
  const gwDefault = rate(rows.find((r) => r.system.startsWith("graphile-worker") && r.mode.startsWith("default"))?.measured ?? null);
  const bossBatched = rate(rows.find((r) => r.system.startsWith("pg-boss") && r.mode.includes("batchSize 1000"))?.measured ?? null);
  if (batched?.measured) {
    const b = rate(batched.measured);
    const vsGw = b / gwDefault;
    const vsBoss = b / bossBatched;
    const met = vsGw > 1 && vsBoss > 1;
    notes.push(
      `Target "batched Baton life cycle (claimIssues + acquire + releaseIssues) is faster than graphile-worker's default mode and than pg-boss's batched mode": ` +
        `${met ? "MET" : "NOT MET"} — batched Baton ${fmtRate(b)} jobs/s = ${fmtRatio(vsGw)}× graphile-worker default (${fmtRate(gwDefault)}), ${fmtRatio(vsBoss)}× pg-boss batched (${fmtRate(bossBatched)}).`,
    );
  } else {
    notes.push(
      `Target "batched Baton life cycle (claimIssues + acquire + releaseIssues) is faster than graphile-worker's default mode and than pg-boss's batched mode": ` +
        `could not be measured (${batched?.skipped ?? "no batched row"}). For reference, single-job Baton is ${fmtRatio(baseline / gwDefault)}× graphile-worker default and ${fmtRatio(baseline / bossBatched)}× pg-boss batched.`,
    );
  }

  return {
    name: NAME,
    columns: ["system", "mode", "jobs/s", "ratio vs Baton API (single)"],
    rows: tableRows,
    notes,
  };
}

// CLI: npx tsx bench/peers.ts [--quick]
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.chdir(fileURLToPath(new URL("..", import.meta.url))); // startApi spawns src/bin/server.ts relative to the repo root
  const result = await run({
    quick: process.argv.includes("--quick"),
    adminUrl: ADMIN_URL,
    redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
  });
  console.log(JSON.stringify(result, null, 2));
}
