// Event fan-out: commit-to-delivery latency of lockChanged to 1, 100 and 1,000
// graphql-ws subscribers spread evenly over TWO API instances (two processes,
// one database, one Redis). Claims are made through instance A only, so every
// event reaches instance B's subscribers through Redis (and A's too: the Redis
// bus delivers a process's own publishes back to it through the subscription).
//
// The subscribers live in several subscriber processes (bench/fanoutClient.ts,
// forked with IPC; 4 by default, --processes N or BENCH_FANOUT_PROCESSES=N),
// each opening a contiguous block of about N/P sockets, so the figure measures
// the server rather than one load-generator event loop parsing 1,000 sockets.
// This process makes the claims, collects every subscriber's deliveries at the
// end of a tier, and computes the percentiles over all of them.
//
// Latency of one delivery = the moment the subscriber's `next` callback runs
// (wall clock, this machine: performance.timeOrigin + performance.now() in
// the subscriber process) − the event's `at` (PostgreSQL clock_timestamp(),
// same machine clock, read back from lock_events with microsecond precision).
// `at` is taken inside the claiming statement, i.e. just before COMMIT, so the
// figure includes the commit itself: it is "statement done → on the
// dashboard's socket", a slight over-estimate of "commit → delivery", never an
// under-estimate. All processes read the same system clock, so timestamps from
// different subscriber processes are comparable with each other and with `at`.
//
// Event seqs are increasing per company but not consecutive (they may have
// gaps), so nothing here does seq arithmetic: the events of a tier are the
// ledger rows after the seq read before it, matched to claims by issue id, and
// a subscriber is drained when it has received as many events as were made.
//
//   npx tsx bench/fanout.ts [--quick] [--events N] [--rate PER_SECOND] [--subscribers 1,100,1000] [--processes N] [--ledger-poll-ms N] [--count-ledger-reads]
import { fork } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { ADMIN_TOKEN, cpuSeconds, freshDatabase, gql, percentile, startApi } from "./lib.js";
import type { FromChild, SubReport, SubSpec, ToChild } from "./fanoutClient.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

export interface FanoutOverrides {
  /** Measured events per subscriber count (warm-up excluded). */
  events?: number;
  /** Claims started per second (sequential; one claim in flight at a time). */
  rate?: number;
  subscriberCounts?: number[];
  /** Subscriber processes (at most one per subscriber). Default BENCH_FANOUT_PROCESSES or 4. */
  processes?: number;
  /** Extra environment for the API processes (diagnostics, e.g. BATON_LEDGER_POLL_MS). */
  apiEnv?: Record<string, string>;
  /** Count the API's reads of lock_events during the window (waits 11 s around it for PostgreSQL's statistics to flush). */
  countLedgerReads?: boolean;
  /** A database to run on instead of a fresh one (bench/retention.ts: one holding a large ledger). */
  databaseUrl?: string;
}

const DB_NAME = "baton_bench_fanout";
const DEFAULT_PROCESSES = 4;
const CONNECT_BATCH = 50; // sockets opened concurrently while connecting, per subscriber process
const CHILD_START_TIMEOUT_MS = 30_000; // a subscriber process loaded and said `ready`
const CHILD_REQUEST_TIMEOUT_MS = 30_000; // a subscriber process answers status/collect/close
const CONNECT_TIMEOUT_MS = 90_000; // all subscribers of one tier connected and acked
const WARMUP_TIMEOUT_MS = 60_000; // all subscribers received the warm-up event
const DRAIN_TIMEOUT_MS = 30_000; // after the last claim: every delivery in
const DRAIN_IDLE_MS = 10_000; // …or nothing new arrived for this long
const STOP_TIMEOUT_MS = 10_000;
const POLL_MS = 50; // how often the subscriber processes are asked for their progress while waiting

const CLAIM = `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename ... on IssueClaimed { issue { id } } } }`;
const CHILD_SCRIPT = fileURLToPath(new URL("./fanoutClient.ts", import.meta.url));

/** Wall-clock milliseconds with sub-millisecond resolution (Date.now() is whole ms). */
const wallNow = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const firstLine = (text: string) =>
  text
    .split("\n")
    .find((l) => l.trim() !== "")
    ?.trim()
    .slice(0, 300) ?? "";

type WithoutId<T> = T extends unknown ? Omit<T, "id"> : never;
type Request = WithoutId<ToChild>;
type Answer = Exclude<FromChild, { type: "ready" } | { type: "failed" } | SubReport>;

/**
 * One subscriber process seen from here. Any failure of it (a `failed`
 * message, an unexpected exit, a request not answered in time) becomes one
 * line in `failure` and rejects whatever is waiting on it; nothing hangs.
 */
class SubscriberProcess {
  readonly child: ChildProcess;
  failure: Error | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (a: Answer) => void; reject: (e: Error) => void; subs: SubReport[] }>();
  private stderr = "";
  private stopping = false;
  private readonly exited: Promise<void>;
  private readyWaiter: { resolve: () => void; reject: (e: Error) => void } | null = null;

  private constructor(readonly number: number) {
    this.child = fork(CHILD_SCRIPT, [], {
      execArgv: ["--import", "tsx"],
      serialization: "advanced",
      stdio: ["ignore", "ignore", "pipe", "ipc"],
    });
    this.child.stderr!.on("data", (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-4000);
    });
    this.exited = new Promise((resolve) => this.child.once("exit", () => resolve()));
    this.child.on("message", (message: FromChild) => this.onMessage(message));
    this.child.on("error", (err) => this.fail(`subscriber process ${this.number}: ${err.message}`));
    this.child.once("exit", (code, signal) => {
      if (!this.stopping) {
        const why = firstLine(this.stderr);
        this.fail(`subscriber process ${this.number} (pid ${this.child.pid}) exited (${signal ?? `code ${code}`})${why ? `: ${why}` : ""}`);
      }
    });
  }

  /** Forks one subscriber process and waits (at most until `deadline`, epoch ms) for it to say it is ready. */
  static async start(number: number, deadline: number): Promise<SubscriberProcess> {
    const p = new SubscriberProcess(number);
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        p.readyWaiter = { resolve, reject };
        timer = setTimeout(
          () => {
            const why = firstLine(p.stderr);
            p.fail(`subscriber process ${number} (pid ${p.child.pid}) did not start within ${CHILD_START_TIMEOUT_MS / 1000} s${why ? `: ${why}` : ""}`);
          },
          Math.max(0, deadline - Date.now()),
        );
      });
    } catch (err) {
      await p.stop();
      throw err;
    } finally {
      clearTimeout(timer);
      p.readyWaiter = null;
    }
    return p;
  }

  private fail(message: string): void {
    if (this.failure) return;
    this.failure = new Error(message);
    this.readyWaiter?.reject(this.failure);
    for (const waiter of this.pending.values()) waiter.reject(this.failure);
    this.pending.clear();
  }

  private onMessage(message: FromChild): void {
    if (message.type === "ready") {
      this.readyWaiter?.resolve();
      this.readyWaiter = null;
    } else if (message.type === "failed") {
      this.fail(`subscriber process ${this.number} (pid ${this.child.pid}) failed: ${message.message}`);
    } else if (message.type === "sub") {
      this.pending.get(message.id)?.subs.push(message);
    } else {
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      waiter?.resolve(message);
    }
  }

  private send(request: Request, timeoutMs: number): Promise<{ answer: Answer; subs: SubReport[] }> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const subs: SubReport[] = [];
      const timer = setTimeout(() => {
        this.fail(`subscriber process ${this.number} (pid ${this.child.pid}) did not answer '${request.type}' within ${(timeoutMs / 1000).toFixed(0)} s`);
      }, timeoutMs);
      this.pending.set(id, {
        subs,
        resolve: (answer) => {
          clearTimeout(timer);
          resolve({ answer, subs });
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      this.child.send({ ...request, id } as ToChild, (err) => {
        if (err) this.fail(`subscriber process ${this.number}: cannot send '${request.type}': ${err.message}`);
      });
    });
  }

  async open(subs: SubSpec[], token: string, companyId: string, afterSeq: string, deadline: number) {
    const { answer } = await this.send(
      { type: "open", subs, token, companyId, afterSeq, batch: CONNECT_BATCH, deadline },
      Math.max(0, deadline - Date.now()) + CHILD_REQUEST_TIMEOUT_MS,
    );
    return answer as Extract<Answer, { type: "opened" }>;
  }

  async status(atLeast: number) {
    const { answer } = await this.send({ type: "status", atLeast }, CHILD_REQUEST_TIMEOUT_MS);
    return answer as Extract<Answer, { type: "status" }>;
  }

  async collect(): Promise<SubReport[]> {
    return (await this.send({ type: "collect" }, CHILD_REQUEST_TIMEOUT_MS)).subs;
  }

  /** Closes its sockets (bounded), then ends it: disconnect, then SIGKILL if it is still there. Never throws. */
  async stop(): Promise<void> {
    const alive = () => this.child.exitCode === null && this.child.signalCode === null;
    if (alive() && !this.failure && this.child.connected) {
      await this.send({ type: "close", timeoutMs: STOP_TIMEOUT_MS }, STOP_TIMEOUT_MS + 5_000).catch(() => {});
    }
    this.stopping = true;
    if (!alive()) return;
    if (this.child.connected) this.child.disconnect(); // it exits on disconnect
    const timer = setTimeout(() => this.child.kill("SIGKILL"), STOP_TIMEOUT_MS);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Starts `count` subscriber processes in parallel, all within one start-up deadline; stops them all if one fails. */
async function startSubscriberProcesses(count: number): Promise<SubscriberProcess[]> {
  const deadline = Date.now() + CHILD_START_TIMEOUT_MS;
  const started = await Promise.allSettled(Array.from({ length: count }, (_, k) => SubscriberProcess.start(k, deadline)));
  const ok = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    await Promise.allSettled(ok.map((p) => p.stop()));
    throw new Error(firstLine((failed.reason as Error).message));
  }
  return ok;
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
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.split(/\s{2,}/)[1];
    return soft === undefined || soft === "unlimited" ? null : Number(soft);
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
    `SELECT (coalesce(idx_scan, 0) + coalesce(seq_scan, 0))::text AS n FROM pg_stat_user_tables WHERE relname = 'lock_events'`,
  );
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

interface TierResult {
  subscribers: number;
  processes: number;
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
  processCount: number,
): Promise<TierResult> {
  const [apiA, apiB] = apis;
  const tag = `${subscriberCount} subscriber${subscriberCount === 1 ? "" : "s"}:`;
  const notes: string[] = [];
  const violations: string[] = [];

  // A company of its own per tier: one board key for the dashboards, one agent
  // with one run making the claims, enough OPEN issues.
  const { createCompany } = await gql<{ createCompany: { company: { id: string }; boardKey: string } }>(
    apiA.url,
    ADMIN_TOKEN,
    `mutation($n: String!) { createCompany(name: $n) { company { id } boardKey } }`,
    { n: `fanout ${subscriberCount}` },
  );
  const companyId = createCompany.company.id;
  const boardKey = createCompany.boardKey;
  const { createAgent } = await gql<{ createAgent: { agent: { id: string }; apiKey: string } }>(
    apiA.url,
    boardKey,
    `mutation { createAgent(name: "claimer") { agent { id } apiKey } }`,
  );
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

  // The company's newest event so far: the subscriptions start after it, and
  // this tier's events are the ledger rows after it.
  const { rows: baseRows } = await db.query<{ seq: string }>(`SELECT coalesce(max(seq), 0)::text AS seq FROM lock_events WHERE company_id = $1`, [companyId]);
  const base = BigInt(baseRows[0]!.seq);

  const processes = Math.max(1, Math.min(processCount, subscriberCount));
  let procs: SubscriberProcess[] = [];
  try {
    procs = await startSubscriberProcesses(processes);
    const failure = () => procs.find((p) => p.failure)?.failure ?? null;
    /** Subscribers (over all processes) that have received at least `atLeast` events, and all deliveries so far. */
    const progress = async (atLeast: number) => {
      const answers = await Promise.all(procs.map((p) => p.status(atLeast)));
      return { reached: answers.reduce((n, a) => n + a.reached, 0), delivered: answers.reduce((n, a) => n + a.delivered, 0) };
    };
    /** Polls until every subscriber has `atLeast` events, `timeoutMs` passes, or no delivery arrives anywhere for `idleMs`. */
    const waitForAll = async (atLeast: number, timeoutMs: number, idleMs = Infinity) => {
      const deadline = Date.now() + timeoutMs;
      let last = -1;
      let lastChange = Date.now();
      for (;;) {
        const p = await progress(atLeast);
        if (p.reached >= subscriberCount) return { ok: true, ...p };
        if (Date.now() >= deadline) return { ok: false, ...p };
        if (p.delivered !== last) {
          last = p.delivered;
          lastChange = Date.now();
        } else if (Date.now() - lastChange >= idleMs) return { ok: false, ...p };
        await sleep(POLL_MS);
      }
    };

    // Connect: even subscribers on B (so the single subscriber of the first
    // tier sits on the instance that did NOT make the write), odd on A; each
    // process opens a contiguous block of subscribers, so it has both kinds.
    const connectStarted = Date.now();
    const connectDeadline = connectStarted + CONNECT_TIMEOUT_MS;
    const opened = await Promise.all(
      procs.map((p, k) => {
        const from = Math.floor((k * subscriberCount) / processes);
        const to = Math.floor(((k + 1) * subscriberCount) / processes);
        const specs: SubSpec[] = [];
        for (let i = from; i < to; i++) {
          const onB = i % 2 === 0;
          specs.push({ index: i, instance: onB ? "B" : "A", url: (onB ? apiB : apiA).url });
        }
        return p.open(specs, boardKey, companyId, base.toString(), connectDeadline);
      }),
    );
    const connected = opened.reduce((n, o) => n + o.connected, 0);
    const connectSeconds = (Date.now() - connectStarted) / 1000;
    if (connected < subscriberCount) {
      violations.push(
        `${tag} only ${connected}/${subscriberCount} sockets were acknowledged within ${CONNECT_TIMEOUT_MS / 1000} s` +
          ` (closed: ${opened
            .flatMap((o) => o.closed)
            .slice(0, 3)
            .join("; ")})`,
      );
    }

    // Warm-up: one claim; every subscriber that receives it has its server-side
    // stream attached to the bus (the stream subscribes before it replays).
    const warm = await gql<{ claimIssue: { __typename: string; issue?: { id: string } } }>(apiA.url, agentKey, CLAIM, { r: runId });
    if (warm.claimIssue.__typename !== "IssueClaimed" || !warm.claimIssue.issue) throw new Error(`warm-up claim returned ${warm.claimIssue.__typename}`);
    const warmIssueId = warm.claimIssue.issue.id;
    const warmStarted = Date.now();
    const warmed = await waitForAll(1, WARMUP_TIMEOUT_MS);
    if (!warmed.ok) violations.push(`${tag} only ${warmed.reached}/${subscriberCount} received the warm-up event within ${WARMUP_TIMEOUT_MS / 1000} s`);
    notes.push(
      `${tag} ${connected} sockets in ${processes} subscriber process${processes === 1 ? "" : "es"} acknowledged in ${connectSeconds.toFixed(1)} s, all live ${((Date.now() - warmStarted) / 1000).toFixed(1)} s after the warm-up claim`,
    );

    const statsFlushMs = 11_000;
    if (countLedgerReads) await sleep(statsFlushMs); // let the connect-phase replays reach the statistics counters
    const scansBefore = countLedgerReads ? await ledgerScans(db) : NaN;
    const loadBefore = loadAverage();

    // Measure: `events` claims through A, sequential, started every 1000/rate ms.
    // The subscriber processes are not asked anything until the claims are done.
    const interval = 1000 / rate;
    const responseAt = new Map<string, number>(); // issue id → when the claim's HTTP response arrived
    const claimMs: number[] = [];
    const childCpu = () => procs.map((p) => cpuSeconds(p.child.pid));
    const cpuBefore = { A: cpuSeconds(apiA.child.pid), B: cpuSeconds(apiB.child.pid), self: process.cpuUsage(), subs: childCpu() };
    const eluBefore = performance.eventLoopUtilization();
    const measureStarted = performance.now();
    const measureDeadline = measureStarted + events * interval * 3 + 60_000; // bound even if claims are slow
    let claimed = 0;
    for (let k = 0; k < events && performance.now() < measureDeadline; k++) {
      const failed = failure();
      if (failed) throw failed;
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
    // Drained: every subscriber has received as many events as were made (the warm-up and one per claim).
    const drained = await waitForAll(claimed + 1, DRAIN_TIMEOUT_MS, DRAIN_IDLE_MS);
    const elu = performance.eventLoopUtilization(eluBefore);
    const wallSeconds = (performance.now() - measureStarted) / 1000;
    const selfCpu = process.cpuUsage(cpuBefore.self);
    const cpuA = cpuSeconds(apiA.child.pid);
    const cpuB = cpuSeconds(apiB.child.pid);
    const cpuSubs = childCpu();
    if (countLedgerReads) await sleep(statsFlushMs);
    const scansDuring = countLedgerReads ? (await ledgerScans(db)) - scansBefore : NaN;
    if (!drained.ok) {
      violations.push(
        `${tag} only ${drained.reached}/${subscriberCount} subscribers received all ${claimed + 1} events within ${DRAIN_TIMEOUT_MS / 1000} s after the last claim` +
          ` (or nothing arrived for ${DRAIN_IDLE_MS / 1000} s)`,
      );
    }
    if (claimed < events) violations.push(`${tag} only ${claimed}/${events} claims were made`);

    // Every delivery of every subscriber, from all processes.
    const reports = (await Promise.all(procs.map((p) => p.collect()))).flat().sort((a, b) => a.index - b.index);
    if (reports.length !== subscriberCount) violations.push(`${tag} the subscriber processes reported ${reports.length}/${subscriberCount} subscribers`);

    // The ledger: exact `at` (µs) and issue of every event after `base`; it must
    // hold exactly the warm-up and one event per claim, all CLAIMED, matched by
    // issue id (seqs increase but need not be consecutive).
    const { rows: ledger } = await db.query<{ seq: string; at_ms: number; issue_id: string; kind: string }>(
      `SELECT e.seq::text AS seq, (extract(epoch FROM e.at) * 1000)::float8 AS at_ms, e.issue_id::text AS issue_id, e.kind::text AS kind
         FROM lock_events e WHERE e.company_id = $1 AND e.seq > $2 ORDER BY e.seq`,
      [companyId, base.toString()],
    );
    const bySeq = new Map<string, { at: number; issueId: string }>();
    for (const row of ledger) bySeq.set(row.seq, { at: row.at_ms, issueId: row.issue_id });
    const ledgerIssues = new Set(ledger.map((r) => r.issue_id));
    const unclaimedInLedger = [warmIssueId, ...responseAt.keys()].filter((id) => !ledgerIssues.has(id)).length;
    if (ledger.length !== claimed + 1 || ledger.some((r) => r.kind !== "CLAIMED") || unclaimedInLedger > 0) {
      violations.push(
        `${tag} ledger holds ${ledger.length} events after seq ${base} (expected ${claimed + 1} CLAIMED, one per claim incl. the warm-up;` +
          ` ${unclaimedInLedger} claimed issues have no event)`,
      );
    }
    const responseMinusAt: number[] = [];
    for (const row of ledger) {
      const r = responseAt.get(row.issue_id);
      if (r !== undefined) responseMinusAt.push(r - row.at_ms);
    }

    // Every subscriber: every event exactly once, in increasing seq order, no errors.
    const latencies: number[] = [];
    const byInstance: Record<"A" | "B", number[]> = { A: [], B: [] };
    const afterResponse: number[] = [];
    const firstArrival = new Map<string, number>();
    const lastArrival = new Map<string, number>();
    let delivered = 0;
    const problems = { missing: 0, duplicated: 0, outOfOrder: 0, unexpected: 0, errored: 0, closedEarly: 0, completed: 0, neverConnected: 0 };
    const examples: string[] = [];
    const example = (text: string) => {
      if (examples.length < 5) examples.push(text);
    };
    for (const s of reports) {
      const who = `subscriber ${s.index} (${s.instance})`;
      const seen = new Set<string>();
      let previous = base;
      for (let j = 0; j < s.seqs.length; j++) {
        const seqText = s.seqs[j]!;
        const arrivedAt = s.arrivedAt[j]!;
        const event = bySeq.get(seqText);
        if (!event) {
          problems.unexpected++;
          example(`${who} got seq ${seqText}, which is not one of this tier's events`);
        }
        if (seen.has(seqText)) {
          problems.duplicated++;
          example(`${who} got seq ${seqText} twice`);
          continue;
        }
        seen.add(seqText);
        const seq = BigInt(seqText);
        if (seq <= previous) {
          problems.outOfOrder++;
          example(`${who} got seq ${seq} after ${previous}`);
        }
        if (seq > previous) previous = seq;
        if (!event || event.issueId === warmIssueId) continue; // the warm-up is not measured
        delivered++;
        const latency = arrivedAt - event.at;
        latencies.push(latency);
        byInstance[s.instance].push(latency);
        const response = responseAt.get(event.issueId);
        if (response !== undefined) afterResponse.push(arrivedAt - response);
        firstArrival.set(seqText, Math.min(firstArrival.get(seqText) ?? Infinity, arrivedAt));
        lastArrival.set(seqText, Math.max(lastArrival.get(seqText) ?? -Infinity, arrivedAt));
      }
      for (const row of ledger) {
        if (!seen.has(row.seq)) {
          problems.missing++;
          if (problems.missing <= 3) example(`${who} never got seq ${row.seq}`);
        }
      }
      if (!s.connected) {
        problems.neverConnected++;
        example(`${who} was never acknowledged`);
      }
      if (s.errors.length) {
        problems.errored++;
        example(`${who} error: ${s.errors[0]}`);
      }
      if (s.closed !== null) {
        problems.closedEarly++;
        example(`${who} socket closed: ${s.closed}`);
      }
      if (s.completed) {
        problems.completed++;
        example(`${who} subscription completed by the server`);
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
      const at = bySeq.get(seq)?.at;
      if (at !== undefined) firsts.push(first - at);
      spreads.push(lastArrival.get(seq)! - first);
    }
    const [sa, sb, sr, sResp, sFirst, sSpread] = [byInstance.A, byInstance.B, afterResponse, responseMinusAt, firsts, spreads].map(sorted) as [
      number[],
      number[],
      number[],
      number[],
      number[],
      number[],
    ];
    const share = (seconds: number) => `${((seconds / wallSeconds) * 100).toFixed(0)}%`;
    const cpu = (before: number | null, after: number | null) => (before !== null && after !== null ? share(after - before) : "n/a");
    const subsCpu = cpuSubs.map((after, k) => {
      const before = cpuBefore.subs[k];
      return after !== null && before !== null && before !== undefined ? after - before : null;
    });
    const subsCpuKnown = subsCpu.filter((c): c is number => c !== null);
    const subsCpuText =
      subsCpuKnown.length === procs.length
        ? `the ${procs.length} subscriber process${procs.length === 1 ? "" : "es"} ${share(subsCpuKnown.reduce((a, b) => a + b, 0))} together (busiest ${share(Math.max(...subsCpuKnown))})`
        : "the subscriber processes n/a";
    notes.push(
      `${tag} ${claimed} claims in ${claimsSeconds.toFixed(1)} s (claim round trip p50 ${pct(sorted(claimMs), 50)} ms);` +
        ` latency on A p50/p99 ${pct(sa, 50)}/${pct(sa, 99)} ms (${sa.length} deliveries), on B ${pct(sb, 50)}/${pct(sb, 99)} ms (${sb.length});` +
        ` first subscriber of each event p50/p99 ${pct(sFirst, 50)}/${pct(sFirst, 99)} ms, first→last arrival spread p50/p99 ${pct(sSpread, 50)}/${pct(sSpread, 99)} ms;` +
        ` at→claim HTTP response p50 ${pct(sResp, 50)} ms, delivery − HTTP response p50/p99 ${pct(sr, 50)}/${pct(sr, 99)} ms;` +
        ` CPU over the measured window: API A ${cpu(cpuBefore.A, cpuA)}, API B ${cpu(cpuBefore.B, cpuB)}, ${subsCpuText},` +
        ` this (claiming) bench process ${share((selfCpu.user + selfCpu.system) / 1e6)} (event-loop utilisation ${(elu.utilization * 100).toFixed(0)}%) of one core;` +
        ` machine load average before/after ${loadBefore} / ${loadAverage()}` +
        (countLedgerReads
          ? `; ${scansDuring} scans of lock_events during the window (the claims append without scanning it; each ledger read of a subscription stream is one)`
          : ""),
    );

    return {
      subscribers: subscriberCount,
      processes,
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
    await Promise.allSettled(procs.map((p) => p.stop()));
  }
}

export async function run(options: BenchOptions, overrides: FanoutOverrides = {}): Promise<ScenarioResult> {
  const events = overrides.events ?? (options.quick ? 40 : 1000);
  const rate = overrides.rate ?? (options.quick ? 20 : 10);
  const processCount = overrides.processes ?? (Number(process.env.BENCH_FANOUT_PROCESSES) || DEFAULT_PROCESSES);
  if (!Number.isInteger(processCount) || processCount < 1) throw new Error(`subscriber processes must be a positive integer, not ${processCount}`);
  const notes: string[] = [];
  const limit = openFileLimit();
  // Each subscriber costs one fd in its subscriber process (its client socket;
  // the processes inherit this one's limit); the two API processes hold the
  // other ends (about half each, plus their pools). Keep a margin for what a
  // process has open anyway (pipes, the IPC channel, the tsx loader).
  let openNow = 0;
  try {
    openNow = readdirSync("/proc/self/fd").length;
  } catch {
    /* not Linux */
  }
  const margin = 64;
  let subscriberCounts = overrides.subscriberCounts ?? [1, 100, 1000];
  if (limit !== null) {
    const fits = subscriberCounts.filter((n) => Math.ceil(n / Math.min(processCount, n)) + margin <= limit && openNow + margin <= limit);
    if (fits.length < subscriberCounts.length) {
      notes.push(
        `Open-file limit (ulimit -n) is ${limit}: ran ${fits.join(", ") || "no"} subscriber counts instead of ${subscriberCounts.join(", ")} over ${processCount} subscriber processes. ` +
          `Raise it (ulimit -n 4096) or use more processes (--processes) to include the rest.`,
      );
      subscriberCounts = fits;
    }
  }
  notes.push(
    `Each subscriber is one graphql-ws WebSocket (graphql-ws client over 'ws'), subscribing to lockChanged(companyId, afterSeq = the company's last seq) selecting seq at issueId kind (not \`issue\`, which adds one issue read per API instance per event, shared by all its subscribers); even-numbered subscribers on instance B, odd on A; every claim goes through A; both instances share one database and Redis (${options.redisUrl}). ` +
      `The subscribers are spread over min(${processCount}, N) subscriber processes (bench/fanoutClient.ts, forked with IPC; --processes or BENCH_FANOUT_PROCESSES), each with a contiguous block of about N/P sockets on its own event loop; they report every delivery's timestamp to this process after the tier, which makes the claims and computes the percentiles over all deliveries. Open-file limit per process: ${limit ?? "unknown"}.`,
    `Latency = wall-clock time when the subscriber's next() callback ran (performance.timeOrigin + performance.now() in its subscriber process) − the event's \`at\` (PostgreSQL clock_timestamp(), taken inside the claim statement, just before COMMIT; read back from lock_events at µs precision). Same machine clock in every process and in PostgreSQL, so there is no clock skew; it includes the COMMIT itself, so it slightly over-states commit→delivery. The HTTP-response-based figure (delivery − the claim's response arriving at the claiming process) is in the per-tier notes for comparison; it can be negative, because Baton publishes before it answers.`,
    `Load: ${events} measured claims per subscriber count (plus one warm-up claim that every subscriber must receive before measuring starts), one at a time, started every ${(1000 / rate).toFixed(0)} ms (${rate}/s) through instance A: ${rate} × N messages per second leave the two API processes. The tier's events are the ledger rows after the seq read before it, matched to the claims by issue id; seqs are only required to increase, not to be consecutive.`,
    `The API's ledger watcher (BATON_LEDGER_POLL_MS, default 1 s) nudges every stream whose last seq is behind the company's; a poll that lands between a commit and its Redis message makes that instance's streams refill from the ledger, with one shared read per company (src/events/history.ts). --count-ledger-reads counts these reads; --ledger-poll-ms 60000 shows the latency without them.`,
    `All of it shares the machine's cores: PostgreSQL, Redis, the two API processes, the claiming process and the subscriber processes. Each subscriber process parses its N/P sockets' messages one after another, so an event's last timestamp in a process includes the processing of the ones before it there; real dashboards each have their own machine. The first→last arrival spread in the notes shows how much of the tail that is, and the CPU line shows what the subscriber processes cost.`,
  );

  const url = overrides.databaseUrl ?? (await freshDatabase(DB_NAME));
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const apis: Api[] = [];
  const rows: Record<string, string | number>[] = [];
  const violations: string[] = [];
  const series: Record<string, [number, number][]> = { "p50 ms": [], "p99 ms": [] };
  // One SIGTERM or Ctrl-C ends the API processes too (the subscriber
  // processes end on their own when this one's IPC channel closes).
  const onSignal = (signal: NodeJS.Signals) => {
    for (const api of apis) api.child.kill("SIGTERM");
    process.exit(signal === "SIGINT" ? 130 : 143);
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
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
      const tier = await runTier(pair, db, n, events, rate, overrides.countLedgerReads ?? false, processCount);
      rows.push({
        subscribers: tier.subscribers,
        processes: tier.processes,
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
        if (api.child.exitCode !== null || api.child.signalCode !== null)
          throw new Error(`API instance ${i === 0 ? "A" : "B"} exited during the ${n}-subscriber run`);
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
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
    await Promise.allSettled(apis.map(stopApi));
    await db.end();
  }
  return {
    name: "event fan-out",
    columns: ["subscribers", "processes", "events", "p50 ms", "p99 ms", "max ms", "delivered/expected"],
    rows,
    notes,
    chart: { title: "lockChanged commit-to-delivery latency, two API instances", xLabel: "subscribers", yLabel: "ms", series },
  };
}

// CLI: npx tsx bench/fanout.ts [--quick] [--events N] [--rate N] [--subscribers 1,100,1000] [--processes N] [--ledger-poll-ms N] [--count-ledger-reads]
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      events: { type: "string" },
      rate: { type: "string" },
      subscribers: { type: "string" },
      processes: { type: "string" },
      "ledger-poll-ms": { type: "string" },
      "count-ledger-reads": { type: "boolean", default: false },
    },
  });
  let result: ScenarioResult;
  try {
    result = await run(
      {
        quick: values.quick ?? false,
        adminUrl: process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
        redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
      },
      {
        events: values.events ? Number(values.events) : undefined,
        rate: values.rate ? Number(values.rate) : undefined,
        subscriberCounts: values.subscribers ? values.subscribers.split(",").map(Number) : undefined,
        processes: values.processes ? Number(values.processes) : undefined,
        apiEnv: values["ledger-poll-ms"] ? { BATON_LEDGER_POLL_MS: values["ledger-poll-ms"] } : undefined,
        countLedgerReads: values["count-ledger-reads"],
      },
    );
  } catch (err) {
    // One line, no stack: the message says which process failed and how.
    console.error(`fanout: ${(err as Error).message.split("\n")[0]}`);
    process.exit(1);
  }
  console.log(JSON.stringify(result, null, 2));
}
