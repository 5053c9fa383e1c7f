// Shared pieces of the benchmarks: a scratch database, a Baton API in a child
// process, a GraphQL client with keep-alive, and percentiles.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import type { ChildProcess } from "node:child_process";
import pg from "pg";
import { migrate } from "../src/db/migrate.js";
import { ensureLedgerPartitions } from "../src/retention/partitions.js";

export const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
export const ADMIN_TOKEN = "bench-admin-token-0123456789";

export function dbUrl(name: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function freshDatabase(name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  await migrate(dbUrl(name));
  await ensureLedgerPartitions(dbUrl(name));
  return dbUrl(name);
}

export async function startApi(
  databaseUrl: string,
  port: number,
  env: Record<string, string> = {},
): Promise<{ url: string; child: ChildProcess; stop(): Promise<void> }> {
  // BENCH_API_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the API under load.
  const nodeArgs = (process.env.BENCH_API_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", "src/bin/server.ts"], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), BATON_ADMIN_TOKEN: ADMIN_TOKEN, BATON_RUN_LEASE_SECONDS: "3600", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`API did not start:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Baton API")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`API exited (${code}):\n${output}`)));
  });
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/**
 * The load generator's GraphQL client: node:http with a keep-alive agent. It
 * shares the 2 cores with the API and PostgreSQL, and costs about a third of
 * the CPU per request of the built-in fetch (undici), so it distorts less.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

export function gql<T>(url: string, token: string, query: string, variables?: Record<string, unknown>): Promise<T> {
  const body = JSON.stringify({ query, variables });
  const target = new URL(url);
  return new Promise<T>((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: `Bearer ${token}` },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          try {
            const parsed = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { data?: T; errors?: unknown[] };
            if (parsed.errors) reject(new Error(JSON.stringify(parsed.errors)));
            else resolve(parsed.data as T);
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Runs `worker` on `concurrency` loops until `seconds` pass; returns ops/s and latency percentiles (ms). */
export async function load(concurrency: number, seconds: number, worker: (loop: number) => Promise<boolean>) {
  const latencies: number[] = [];
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  let ops = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (performance.now() < deadline) {
        const t = performance.now();
        const more = await worker(loop);
        latencies.push(performance.now() - t);
        ops++;
        if (!more) return;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { ops, perSecond: ops / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

export function defaultOptions(quick: boolean) {
  return { quick, adminUrl: ADMIN_URL, redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" };
}

/** utime + stime of a process in seconds (Linux /proc), or null. */
export function cpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/** A process's /proc stat fields after its name: [state, ppid, …]; null once it is gone. */
function statFields(pid: string): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.includes("(postgres)") ? stat.slice(stat.lastIndexOf(")") + 2).split(" ") : null;
  } catch {
    return null; // gone meanwhile
  }
}

/**
 * CPU seconds used so far by the PostgreSQL clusters on this machine, as a
 * counter that never goes down: each postmaster's own utime + stime, plus the
 * CPU of its children that have exited (cutime + cstime: a backend's CPU
 * moves there when it ends and is reaped), plus the live children's own. A
 * backend that ends between the two reads can be missed or counted twice
 * once, at most a few milliseconds; summing live processes only, as before,
 * lost every ended backend's CPU and could go negative.
 */
export function postgresCpuSeconds(): number {
  const processes = new Map<string, string[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (fields) processes.set(entry, fields);
  }
  let ticks = 0;
  for (const f of processes.values()) {
    const postmaster = !processes.has(f[1]!); // its parent is not a postgres process
    ticks += Number(f[11]) + Number(f[12]);
    if (postmaster) ticks += Number(f[13]) + Number(f[14]);
  }
  return ticks / 100; // USER_HZ is 100 on Linux
}

/** A CPU figure the bench prints: a negative one means the accounting is wrong, and the bench stops rather than print it. */
export function checkedCpu(what: string, seconds: number): number {
  if (seconds < 0) throw new Error(`bench accounting: ${what} CPU came out negative (${seconds} s): refusing to print it`);
  return seconds;
}
