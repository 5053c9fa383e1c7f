// Asks a server's /healthz, one request after another, each with a deadline,
// from a process of its own: the test process is busy sending the attack, and
// its own event loop must not be what delays the answers. Shared by
// test/http/limits.test.ts and bench/hostile.ts, so it imports nothing of either.
import { spawn } from "node:child_process";

const WATCHER = String.raw`
const [url, deadline] = [process.argv[1], Number(process.argv[2])];
let stopped = false;
const failures = [];
const latencies = [];
let answered = 0;
// Stops when told, when the test process goes away (stdin ends), or after two minutes in any case.
process.stdin.on("data", () => (stopped = true)).on("end", () => (stopped = true));
setTimeout(() => (stopped = true), 120000).unref();
(async () => {
  while (!stopped) {
    const started = performance.now();
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(deadline) });
      await res.arrayBuffer();
      latencies.push(performance.now() - started);
      if (res.status !== 200) failures.push("status " + res.status);
      if (answered++ === 0) process.stdout.write("ready\n");
    } catch (err) {
      failures.push(err.message);
      if (failures.length > 1000) stopped = true; // the server is gone: no point asking on
    }
  }
  process.stdout.write(JSON.stringify({ answered, failures, latencies }) + "\n");
  process.exit(0);
})();
`;

export interface HealthReport {
  answered: number;
  /** Why each request that did not answer 200 within the deadline failed. */
  failures: string[];
  /** Milliseconds each answered request took. */
  latencies: number[];
}

/** Starts watching; the returned function stops and reports. */
export async function watchHealth(origin: string, deadlineMs: number): Promise<() => Promise<HealthReport>> {
  const child = spawn(process.execPath, ["-e", WATCHER, `${origin}/healthz`, String(deadlineMs)], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // The attack starts once the watcher has had its first answer; a watcher that exits first, or has none within 20 s, fails the start.
  await new Promise<void>((resolve, reject) => {
    const settle = (err?: Error) => {
      clearTimeout(timer);
      child.stdout.off("data", onData);
      child.off("exit", onExit);
      if (err) reject(err);
      else resolve();
    };
    const onData = () => {
      if (out.startsWith("ready\n")) settle();
    };
    const onExit = () => settle(new Error(out));
    const timer = setTimeout(() => {
      child.kill();
      settle(new Error("timed out after 20000 ms waiting for the health watcher"));
    }, 20_000);
    child.stdout.on("data", onData);
    child.once("exit", onExit);
  });
  return async () => {
    child.stdin.end("stop\n");
    await exited;
    return JSON.parse(out.split("\n")[1]!) as HealthReport;
  };
}

/** Runs `attack` while watching /healthz; the watcher is stopped however the attack ends. */
export async function whileWatching<T>(origin: string, deadlineMs: number, attack: () => Promise<T>): Promise<{ result: T; health: HealthReport }> {
  const stop = await watchHealth(origin, deadlineMs);
  let result: T;
  try {
    result = await attack();
  } catch (err) {
    await stop();
    throw err;
  }
  return { result, health: await stop() };
}
