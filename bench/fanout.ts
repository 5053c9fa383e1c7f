// Event fan-out: commit-to-delivery latency of lockChanged to 1, 100 and 1,000
// graphql-ws subscribers spread evenly over TWO API instances (two processes,
// one database, one Redis). Claims are made through instance A only, so every
// event reaches instance B's subscribers through Redis (and A's too: the Redis
// bus delivers a process's own publishes back to it through the subscription).
//
// Latency of one delivery = the moment the subscriber's `next` callback runs
// (wall clock, this machine) − the event's `at` (PostgreSQL clock_timestamp(),
// same machine clock, read back from lock_events with microsecond precision).
// `at` is taken inside the claiming statement after the company's seq lock,
// i.e. just before COMMIT, so the figure includes the commit itself: it is
// "statement done → on the dashboard's socket", a slight over-estimate of
// "commit → delivery", never an under-estimate.
//
//   npx tsx bench/fanout.ts [--quick] [--events N] [--rate PER_SECOND] [--subscribers 1,100,1000] [--ledger-poll-ms N] [--count-ledger-reads]
import { readFileSync, readdirSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { createClient } from "graphql-ws";
import type { Client } from "graphql-ws";
import pg from "pg";
import WebSocket from "ws";
import { ADMIN_TOKEN, freshDatabase, gql, percentile, startApi } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

export interface FanoutOverrides {
  /** Measured events per subscriber count (warm-up excluded). */
  events?: number;
  /** Claims started per second (sequential; one claim in flight at a time). */
  rate?: number;
  subscriberCounts?: number[];
  /** Extra environment for the API processes (diagnostics, e.g. BATON_LEDGER_POLL_MS). */
  apiEnv?: Record<string, string>;
  /** Count the API's reads of lock_events during the window (waits 11 s around it for PostgreSQL's statistics to flush). */
  countLedgerReads?: boolean;
}

const DB_NAME = "baton_bench_fanout";
const CONNECT_BATCH = 50; // sockets opened concurrently while connecting
const CONNECT_TIMEOUT_MS = 90_000; // all subscribers of one tier connected and acked
const WARMUP_TIMEOUT_MS = 60_000; // all subscribers received the warm-up event
const DRAIN_TIMEOUT_MS = 30_000; // after the last claim: every delivery in
const DRAIN_IDLE_MS = 10_000; // …or nothing new arrived for this long
const STOP_TIMEOUT_MS = 10_000;

const SUBSCRIPTION = `subscription($c: ID!, $a: ID) { lockChanged(companyId: $c, afterSeq: $a) { seq at issueId kind } }`;
const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;

/** Wall-clock milliseconds with sub-millisecond resolution (Date.now() is whole ms). */
const wallNow = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Delivery {
  seq: bigint;
  arrivedAt: number;
}

interface Sub {
  index: number;
  instance: "A" | "B";
  client: Client;
  deliveries: Delivery[];
  errors: string[];
  completed: boolean;
  closed: string | null;
  connected: boolean;
  maxSeq: bigint;
  dispose: () => void;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function openFileLimit(): number | null {
  try {
    const line = readFileSync("/proc/self/limits", "utf8").split("\n").find((l) => l.startsWith("Max open files"));
    const soft = line?.split(/\s{2,}/)[1];
    return soft === undefined || soft === "unlimited" ? null : Number(soft);
  } catch {
    return null;
  }
}

/** utime + stime of a process in seconds (Linux /proc), or null. */
function cpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

function loadAverage(): string {
  try {
    return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {
    return "n/a";
  }
}

/** Scans of lock_events so far (every ledger read of a stream is one). An idle backend flushes these counters up to 10 s late. */
async function ledgerScans(db: pg.Pool): Promise<number> {
  const { rows } = await db.query<{ n: string }>(
    `SELECT (coalesce(idx_scan, 0) + coalesce(seq_scan, 0))::text AS n FROM pg_stat_user_tables WHERE relname = 'lock_events'`);
  return Number(rows[0]?.n ?? NaN);
}

type Api = Awaited<ReturnType<typeof startApi>>;

async function stopApi(api: Api): Promise<void> {
  if (api.child.exitCode !== null || api.child.signalCode !== null) return;
  const timer = setTimeout(() => api.child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  try {
    await api.stop();
  } finally {
    clearTimeout(timer);
  }
}

function openSubscriber(index: number, instance: "A" | "B", httpUrl: string, token: string, companyId: string, afterSeq: string): Sub {
  const sub: Sub = {
    index,
    instance,
    client: null as unknown as Client,
    deliveries: [],
    errors: [],
    completed: false,
    closed: null,
    connected: false,
    maxSeq: 0n,
    dispose: () => {},
  };
  sub.client = createClient({
    url: httpUrl.replace(/^http/, "ws"),
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: 0,
    lazy: false,
    onNonLazyError: () => {},
    on: {
      connected: () => {
        sub.connected = true;
      },
      closed: (event) => {
        const e = event as { code?: number; reason?: string };
        sub.closed = `${e.code ?? "?"} ${e.reason ?? ""}`.trim();
      },
    },
  });
  sub.dispose = sub.client.subscribe<{ lockChanged: { seq: string; at: string; issueId: string; kind: string } }>(
    { query: SUBSCRIPTION, variables: { c: companyId, a: afterSeq } },
    {
      next: (value) => {
        const arrivedAt = wallNow(); // first thing: the moment the message reached subscriber code
        if (value.errors?.length) {
          sub.errors.push(JSON.stringify(value.errors).slice(0, 300));
          return;
        }
        const event = value.data?.lockChanged;
        if (!event) return;
        const seq = BigInt(event.seq);
        sub.deliveries.push({ seq, arrivedAt });
        if (seq > sub.maxSeq) sub.maxSeq = seq;
      },
      error: (err) => {
        const e = err as { message?: string; reason?: string; code?: number };
        sub.errors.push(Array.isArray(err) ? JSON.stringify(err).slice(0, 300) : String(e?.message ?? e?.reason ?? e?.code ?? err));
      },
      complete: () => {
        sub.completed = true;
      },
    },
  );
  return sub;
}

async function closeSubscribers(subs: Sub[]): Promise<void> {
  await Promise.race([
    Promise.allSettled(
      subs.map(async (s) => {
        try {
          s.dispose();
        } catch {
          /* already gone */
        }
        await s.client.dispose();
      }),
    ),
    sleep(STOP_TIMEOUT_MS),
  ]);
}

/** Polls `done` every 10 ms until it holds, `timeoutMs` passes, or (with idleMs) `progress()` stops changing for idleMs. */
async function waitFor(done: () => boolean, timeoutMs: number, progress?: () => number, idleMs = Infinity): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let last = progress?.() ?? 0;
  let lastChange = Date.now();
  while (!done()) {
    if (Date.now() >= deadline) return false;
    if (progress) {
      const p = progress();
      if (p !== last) {
        last = p;
        lastChange = Date.now();
      } else if (Date.now() - lastChange >= idleMs) return false;
    }
    await sleep(10);
  }
  return true;
}

interface TierResult {
  subscribers: number;
  events: number;
  p50: number;
  p99: number;
  max: number;
  delivered: number;
  expected: number;
  notes: string[];
  violations: string[];
}

const f1 = (n: number) => (Number.isFinite(n) ? Number(n.toFixed(1)) : NaN);

async function runTier(
  apis: [Api, Api],
  db: pg.Pool,
  subscriberCount: number,
  events: number,
  rate: number,
  countLedgerReads: boolean,
): Promise<TierResult> {
  const [apiA, apiB] = apis;
  const tag = `${subscriberCount} subscriber${subscriberCount === 1 ? "" : "s"}:`;
  const notes: string[] = [];
  const violations: string[] = [];

  // A company of its own per tier: one board key for the dashboards, one agent
  // with one run making the claims, enough OPEN issues.
  const { createCompany } = await gql<{ createCompany: { company: { id: string }; boardKey: string } }>(
    apiA.url, ADMIN_TOKEN, `mutation($n: String!) { createCompany(name: $n) { company { id } boardKey } }`, { n: `fanout ${subscriberCount}` });
  const companyId = createCompany.company.id;
  const boardKey = createCompany.boardKey;
  const { createAgent } = await gql<{ createAgent: { agent: { id: string }; apiKey: string } }>(
    apiA.url, boardKey, `mutation { createAgent(name: "claimer") { agent { id } apiKey } }`);
  const agentKey = createAgent.apiKey;
  const { startRun } = await gql<{ startRun: { id: string } }>(apiA.url, agentKey, `mutation { startRun { id } }`);
  const runId = startRun.id;
  const issuesNeeded = events + 1 + 10;
  for (let made = 0; made < issuesNeeded; made += 1000) {
    const batch = Math.min(1000, issuesNeeded - made);
    await gql(apiA.url, boardKey, `mutation($i: [CreateIssueInput!]!) { createIssues(inputs: $i) { id } }`, {
      i: Array.from({ length: batch }, (_, k) => ({ title: `job ${made + k}`, priority: "MEDIUM" })),
    });
  }

  const { rows: baseRows } = await db.query<{ seq: string }>(`SELECT last_event_seq::text AS seq FROM companies WHERE id = $1`, [companyId]);
  const base = BigInt(baseRows[0]!.seq);
  const warmupSeq = base + 1n;

  const subs: Sub[] = [];
  try {
    // Connect: even subscribers on B (so the single subscriber of the first
    // tier sits on the instance that did NOT make the write), odd on A.
    const connectStarted = Date.now();
    for (let start = 0; start < subscriberCount; start += CONNECT_BATCH) {
      const batch: Sub[] = [];
      for (let i = start; i < Math.min(subscriberCount, start + CONNECT_BATCH); i++) {
        const onB = i % 2 === 0;
        batch.push(openSubscriber(i, onB ? "B" : "A", (onB ? apiB : apiA).url, boardKey, companyId, base.toString()));
      }
      subs.push(...batch);
      const left = CONNECT_TIMEOUT_MS - (Date.now() - connectStarted);
      const ok = await waitFor(() => batch.every((s) => s.connected || s.closed !== null), Math.max(0, left));
      if (!ok) break;
    }
    const connected = subs.filter((s) => s.connected).length;
    const connectSeconds = (Date.now() - connectStarted) / 1000;
    if (connected < subscriberCount) {
      violations.push(`${tag} only ${connected}/${subscriberCount} sockets were acknowledged within ${CONNECT_TIMEOUT_MS / 1000} s` +
        ` (closed: ${subs.filter((s) => s.closed).slice(0, 3).map((s) => s.closed).join("; ")})`);
    }

    // Warm-up: one claim; every subscriber that receives it has its server-side
    // stream attached to the bus (the stream subscribes before it replays).
    const warm = await gql<{ claimIssue: { __typename: string } }>(apiA.url, agentKey, CLAIM, { r: runId });
    if (warm.claimIssue.__typename !== "IssueClaimed") throw new Error(`warm-up claim returned ${warm.claimIssue.__typename}`);
    const warmStarted = Date.now();
    const allWarm = await waitFor(() => subs.every((s) => s.maxSeq >= warmupSeq), WARMUP_TIMEOUT_MS);
    const live = subs.filter((s) => s.maxSeq >= warmupSeq).length;
    if (!allWarm) violations.push(`${tag} only ${live}/${subscriberCount} received the warm-up event within ${WARMUP_TIMEOUT_MS / 1000} s`);
    notes.push(`${tag} ${connected} sockets acknowledged in ${connectSeconds.toFixed(1)} s, all live ${((Date.now() - warmStarted) / 1000).toFixed(1)} s after the warm-up claim`);

    const statsFlushMs = 11_000;
    if (countLedgerReads) await sleep(statsFlushMs); // let the connect-phase replays reach the statistics counters
    const scansBefore = countLedgerReads ? await ledgerScans(db) : NaN;
    const loadBefore = loadAverage();

    // Measure: `events` claims through A, sequential, started every 1000/rate ms.
    const interval = 1000 / rate;
    const responseAt = new Map<string, number>(); // issue id → when the claim's HTTP response arrived
    const claimMs: number[] = [];
    const cpuBefore = { A: cpuSeconds(apiA.child.pid), B: cpuSeconds(apiB.child.pid), self: process.cpuUsage() };
    const eluBefore = performance.eventLoopUtilization();
    const measureStarted = performance.now();
    const measureDeadline = measureStarted + events * interval * 3 + 60_000; // bound even if claims are slow
    let claimed = 0;
    for (let k = 0; k < events && performance.now() < measureDeadline; k++) {
      const due = measureStarted + k * interval;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const t = performance.now();
      const res = await gql<{ claimIssue: { __typename: string; issue?: { id: string } } }>(apiA.url, agentKey, CLAIM, { r: runId });
      const arrived = wallNow();
      claimMs.push(performance.now() - t);
      if (res.claimIssue.__typename !== "IssueClaimed" || !res.claimIssue.issue) {
        violations.push(`${tag} claim ${k} returned ${res.claimIssue.__typename}`);
        break;
      }
      responseAt.set(res.claimIssue.issue.id, arrived);
      claimed++;
    }
    const claimsSeconds = (performance.now() - measureStarted) / 1000;
    const expectedLast = base + 1n + BigInt(claimed);
    const totalDelivered = () => subs.reduce((n, s) => n + s.deliveries.length, 0);
    const drained = await waitFor(() => subs.every((s) => s.maxSeq >= expectedLast), DRAIN_TIMEOUT_MS, totalDelivered, DRAIN_IDLE_MS);
    const elu = performance.eventLoopUtilization(eluBefore);
    const wallSeconds = (performance.now() - measureStarted) / 1000;
    const selfCpu = process.cpuUsage(cpuBefore.self);
    const cpuA = cpuSeconds(apiA.child.pid);
    const cpuB = cpuSeconds(apiB.child.pid);
    if (countLedgerReads) await sleep(statsFlushMs);
    const scansDuring = countLedgerReads ? (await ledgerScans(db)) - scansBefore : NaN;
    if (!drained) violations.push(`${tag} not every subscriber reached seq ${expectedLast} within ${DRAIN_TIMEOUT_MS / 1000} s after the last claim`);
    if (claimed < events) violations.push(`${tag} only ${claimed}/${events} claims were made`);

    // The ledger: exact `at` (µs) and issue of every event; the seqs must be
    // exactly base+1 … base+1+claimed, all CLAIMED.
    const { rows: ledger } = await db.query<{ seq: string; at_ms: number; issue_id: string; kind: string }>(
      `SELECT e.seq::text AS seq, (extract(epoch FROM e.at) * 1000)::float8 AS at_ms, e.issue_id::text AS issue_id, e.kind::text AS kind
         FROM lock_events e WHERE e.company_id = $1 AND e.seq > $2 ORDER BY e.seq`,
      [companyId, base.toString()],
    );
    const atBySeq = new Map<bigint, number>();
    for (const row of ledger) atBySeq.set(BigInt(row.seq), row.at_ms);
    if (ledger.length !== claimed + 1 || ledger.some((r, i) => BigInt(r.seq) !== base + 1n + BigInt(i) || r.kind !== "CLAIMED")) {
      violations.push(`${tag} ledger holds ${ledger.length} events after seq ${base} (expected ${claimed + 1} CLAIMED, gapless)`);
    }
    const responseMinusAt: number[] = [];
    const responseBySeq = new Map<bigint, number>();
    for (const row of ledger) {
      const r = responseAt.get(row.issue_id);
      if (r !== undefined) {
        responseMinusAt.push(r - row.at_ms);
        responseBySeq.set(BigInt(row.seq), r);
      }
    }

    // Every subscriber: every event exactly once, in seq order, no errors.
    const latencies: number[] = [];
    const byInstance: Record<"A" | "B", number[]> = { A: [], B: [] };
    const afterResponse: number[] = [];
    const firstArrival = new Map<bigint, number>();
    const lastArrival = new Map<bigint, number>();
    let delivered = 0;
    const problems = { missing: 0, duplicated: 0, outOfOrder: 0, unexpected: 0, errored: 0, closedEarly: 0, completed: 0 };
    const examples: string[] = [];
    const example = (text: string) => {
      if (examples.length < 5) examples.push(text);
    };
    for (const s of subs) {
      const seen = new Set<bigint>();
      let previous = base;
      for (const d of s.deliveries) {
        if (d.seq <= base || d.seq > expectedLast) {
          problems.unexpected++;
          example(`subscriber ${s.index} (${s.instance}) got seq ${d.seq} outside ${base + 1n}..${expectedLast}`);
        }
        if (seen.has(d.seq)) {
          problems.duplicated++;
          example(`subscriber ${s.index} (${s.instance}) got seq ${d.seq} twice`);
          continue;
        }
        seen.add(d.seq);
        if (d.seq !== previous + 1n) {
          problems.outOfOrder++;
          example(`subscriber ${s.index} (${s.instance}) got seq ${d.seq} after ${previous}`);
        }
        previous = d.seq;
        if (d.seq <= warmupSeq || d.seq > expectedLast) continue; // the warm-up is not measured
        delivered++;
        const at = atBySeq.get(d.seq);
        if (at === undefined) continue;
        const latency = d.arrivedAt - at;
        latencies.push(latency);
        byInstance[s.instance].push(latency);
        const response = responseBySeq.get(d.seq);
        if (response !== undefined) afterResponse.push(d.arrivedAt - response);
        firstArrival.set(d.seq, Math.min(firstArrival.get(d.seq) ?? Infinity, d.arrivedAt));
        lastArrival.set(d.seq, Math.max(lastArrival.get(d.seq) ?? -Infinity, d.arrivedAt));
      }
      for (let seq = base + 1n; seq <= expectedLast; seq++) {
        if (!seen.has(seq)) {
          problems.missing++;
          if (problems.missing <= 3) example(`subscriber ${s.index} (${s.instance}) never got seq ${seq}`);
        }
      }
      if (s.errors.length) {
        problems.errored++;
        example(`subscriber ${s.index} (${s.instance}) error: ${s.errors[0]}`);
      }
      if (s.closed !== null) {
        problems.closedEarly++;
        example(`subscriber ${s.index} (${s.instance}) socket closed: ${s.closed}`);
      }
      if (s.completed) {
        problems.completed++;
        example(`subscriber ${s.index} (${s.instance}) subscription completed by the server`);
      }
    }
    const bad = Object.entries(problems).filter(([, n]) => n > 0);
    if (bad.length) {
      violations.push(`${tag} exactly-once/in-order check FAILED: ${bad.map(([k, n]) => `${k} ${n}`).join(", ")}; e.g. ${examples.join(" | ")}`);
    } else {
      notes.push(`${tag} every subscriber got every event (${claimed + 1} incl. warm-up) exactly once, in seq order; no errors, no closed sockets`);
    }

    latencies.sort((a, b) => a - b);
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const pct = (xs: number[], p: number) => f1(percentile(xs, p));
    const firsts: number[] = [];
    const spreads: number[] = [];
    for (const [seq, first] of firstArrival) {
      const at = atBySeq.get(seq);
      if (at !== undefined) firsts.push(first - at);
      spreads.push(lastArrival.get(seq)! - first);
    }
    const [sa, sb, sr, sResp, sFirst, sSpread] = [byInstance.A, byInstance.B, afterResponse, responseMinusAt, firsts, spreads].map(sorted) as [
      number[], number[], number[], number[], number[], number[],
    ];
    const cpu = (before: number | null, after: number | null) => (before !== null && after !== null ? `${((after - before) / wallSeconds * 100).toFixed(0)}%` : "n/a");
    notes.push(
      `${tag} ${claimed} claims in ${claimsSeconds.toFixed(1)} s (claim round trip p50 ${pct(sorted(claimMs), 50)} ms);` +
        ` latency on A p50/p99 ${pct(sa, 50)}/${pct(sa, 99)} ms (${sa.length} deliveries), on B ${pct(sb, 50)}/${pct(sb, 99)} ms (${sb.length});` +
        ` first subscriber of each event p50/p99 ${pct(sFirst, 50)}/${pct(sFirst, 99)} ms, first→last arrival spread p50/p99 ${pct(sSpread, 50)}/${pct(sSpread, 99)} ms;` +
        ` at→claim HTTP response p50 ${pct(sResp, 50)} ms, delivery − HTTP response p50/p99 ${pct(sr, 50)}/${pct(sr, 99)} ms;` +
        ` CPU over the measured window: API A ${cpu(cpuBefore.A, cpuA)}, API B ${cpu(cpuBefore.B, cpuB)},` +
        ` this bench process ${(((selfCpu.user + selfCpu.system) / 1e6 / wallSeconds) * 100).toFixed(0)}% (event-loop utilisation ${(elu.utilization * 100).toFixed(0)}%) of one core;` +
        ` machine load average before/after ${loadBefore} / ${loadAverage()}` +
        (countLedgerReads
          ? `; ${scansDuring} scans of lock_events during the window (the claims append without scanning it; each ledger read of a subscription stream is one)`
          : ""),
    );

    return {
      subscribers: subscriberCount,
      events: claimed,
      p50: f1(percentile(latencies, 50)),
      p99: f1(percentile(latencies, 99)),
      max: f1(latencies.at(-1) ?? NaN),
      delivered,
      expected: subscriberCount * claimed,
      notes,
      violations,
    };
  } finally {
    await closeSubscribers(subs);
  }
}

export async function run(options: BenchOptions, overrides: FanoutOverrides = {}): Promise<ScenarioResult> {
  const events = overrides.events ?? (options.quick ? 40 : 1000);
  const rate = overrides.rate ?? (options.quick ? 20 : 10);
  const notes: string[] = [];
  const limit = openFileLimit();
  // Each subscriber costs one fd here (its client socket); the two API
  // processes hold the other ends (about half each, plus their pools). Keep a
  // margin over what this process has open already (pool, pipes, keep-alive).
  let openNow = 0;
  try {
    openNow = readdirSync("/proc/self/fd").length;
  } catch {
    /* not Linux */
  }
  const margin = 64;
  let subscriberCounts = overrides.subscriberCounts ?? [1, 100, 1000];
  if (limit !== null) {
    const fits = subscriberCounts.filter((n) => openNow + n + margin <= limit);
    if (fits.length < subscriberCounts.length) {
      notes.push(
        `Open-file limit (ulimit -n) is ${limit} and ${openNow} are open: ran ${fits.join(", ") || "no"} subscriber counts instead of ${subscriberCounts.join(", ")}. ` +
          `Raise it (ulimit -n 4096) before running to include the rest; ws itself has no trouble with 1,000 sockets in one process.`,
      );
      subscriberCounts = fits;
    }
  }
  notes.push(
    `Each subscriber is one graphql-ws WebSocket (graphql-ws client over 'ws') from this one Node process, subscribing to lockChanged(companyId, afterSeq = the company's last seq) selecting seq at issueId kind (not \`issue\`, which adds one issue read per API instance per event, shared by all its subscribers); even-numbered subscribers on instance B, odd on A; every claim goes through A; both instances share one database and Redis (${options.redisUrl}). Open-file limit of this process: ${limit ?? "unknown"}.`,
    `Latency = wall-clock time when the subscriber's next() callback ran − the event's \`at\` (PostgreSQL clock_timestamp(), taken inside the claim statement after the seq lock, just before COMMIT; read back from lock_events at µs precision). Same machine clock on both ends, so there is no clock skew; it includes the COMMIT itself, so it slightly over-states commit→delivery. The HTTP-response-based figure (delivery − the claim's response arriving at this process) is in the per-tier notes for comparison; it can be negative, because Baton publishes before it answers.`,
    `Load: ${events} measured claims per subscriber count (plus one warm-up claim that every subscriber must receive before measuring starts), one at a time, started every ${(1000 / rate).toFixed(0)} ms (${rate}/s) through instance A: ${rate} × N messages per second leave the two API processes.`,
    `The API's ledger watcher (BATON_LEDGER_POLL_MS, default 1 s) nudges every stream whose last seq is behind the company's; a poll that lands between a commit and its Redis message makes that instance's streams refill from the ledger, with one shared read per company (src/events/ledger.ts). --count-ledger-reads counts these reads; --ledger-poll-ms 60000 shows the latency without them.`,
    `All of it shares 2 cores: PostgreSQL, Redis, the two API processes and this process, which parses every message of all N sockets on one event loop. At 1,000 subscribers an event's 1,000 messages are handled by this process one after another, so the last subscriber's timestamp includes the processing of the 999 before it; real dashboards each have their own machine. The first→last arrival spread in the notes shows how much of the tail that is.`,
  );

  const url = await freshDatabase(DB_NAME);
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const apis: Api[] = [];
  const rows: Record<string, string | number>[] = [];
  const violations: string[] = [];
  const series: Record<string, [number, number][]> = { "p50 ms": [], "p99 ms": [] };
  try {
    // All N dashboards share the company's one board key, so the per-key and per-company limits
    // (docs/operations.md#limits; 100 connections and 200 subscriptions per key by default) are raised here.
    const raised = String(Math.max(...subscriberCounts, 1) + 10);
    const limits = { BATON_MAX_CONNECTIONS_PER_KEY: raised, BATON_MAX_SUBSCRIPTIONS_PER_KEY: raised, BATON_MAX_SUBSCRIPTIONS_PER_COMPANY: raised };
    notes.push(`Every subscriber uses the same board key, so both instances ran with ${JSON.stringify(limits)}.`);
    const env = { ...limits, ...overrides.apiEnv, REDIS_URL: options.redisUrl };
    if (overrides.apiEnv) notes.push(`API instances ran with ${JSON.stringify(overrides.apiEnv)} (diagnostic run).`);
    apis.push(await startApi(url, await freePort(), env));
    apis.push(await startApi(url, await freePort(), env));
    const pair = apis as [Api, Api];
    for (const n of subscriberCounts) {
      const tier = await runTier(pair, db, n, events, rate, overrides.countLedgerReads ?? false);
      rows.push({
        subscribers: tier.subscribers,
        events: tier.events,
        "p50 ms": tier.p50,
        "p99 ms": tier.p99,
        "max ms": tier.max,
        "delivered/expected": `${tier.delivered}/${tier.expected}`,
      });
      series["p50 ms"]!.push([n, tier.p50]);
      series["p99 ms"]!.push([n, tier.p99]);
      notes.push(...tier.notes);
      violations.push(...tier.violations);
      for (const [i, api] of apis.entries()) {
        if (api.child.exitCode !== null || api.child.signalCode !== null) throw new Error(`API instance ${i === 0 ? "A" : "B"} exited during the ${n}-subscriber run`);
      }
    }
    const top = rows.find((r) => r.subscribers === 1000);
    if (top) {
      const p99 = Number(top["p99 ms"]);
      notes.push(`Target: p99 event delivery under 50 ms at 1,000 subscribers — ${p99 < 50 ? "MET" : "NOT MET"} (p99 ${p99} ms at ${rate} events/s).`);
    } else {
      notes.push(`Target: p99 event delivery under 50 ms at 1,000 subscribers — not measured (1,000 subscribers were not run).`);
    }
    if (violations.length) notes.push(...violations.map((v) => `VIOLATION: ${v}`));
    else notes.push("No missed, duplicated or out-of-order events at any subscriber count.");
  } finally {
    await Promise.allSettled(apis.map(stopApi));
    await db.end();
  }
  return {
    name: "event fan-out",
    columns: ["subscribers", "events", "p50 ms", "p99 ms", "max ms", "delivered/expected"],
    rows,
    notes,
    chart: { title: "lockChanged commit-to-delivery latency, two API instances", xLabel: "subscribers", yLabel: "ms", series },
  };
}

// CLI: npx tsx bench/fanout.ts [--quick] [--events N] [--rate N] [--subscribers 1,100,1000] [--ledger-poll-ms N] [--count-ledger-reads]
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      events: { type: "string" },
      rate: { type: "string" },
      subscribers: { type: "string" },
      "ledger-poll-ms": { type: "string" },
      "count-ledger-reads": { type: "boolean", default: false },
    },
  });
  const result = await run(
    {
      quick: values.quick ?? false,
      adminUrl: process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
      redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
    },
    {
      events: values.events ? Number(values.events) : undefined,
      rate: values.rate ? Number(values.rate) : undefined,
      subscriberCounts: values.subscribers ? values.subscribers.split(",").map(Number) : undefined,
      apiEnv: values["ledger-poll-ms"] ? { BATON_LEDGER_POLL_MS: values["ledger-poll-ms"] } : undefined,
      countLedgerReads: values["count-ledger-reads"],
    },
  );
  console.log(JSON.stringify(result, null, 2));
}
