// Asks a server's /healthz, one request after another, each with a deadline,
// from a process of its own: the test process is busy sending the attack, and
// its own event loop must not be what delays the answers.
import { spawn } from "node:child_process";
import { eventually } from "./race.js";

const WATCHER = String.raw`
const [url, deadline] = [process.argv[1], Number(process.argv[2])];
let stopped = false;
const failures = [];
let answered = 0;
process.stdin.on("data", () => (stopped = true));
(async () => {
  while (!stopped) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(deadline) });
      await res.arrayBuffer();
      if (res.status !== 200) failures.push("status " + res.status);
      if (answered++ === 0) process.stdout.write("ready\n");
    } catch (err) {
      failures.push(err.message);
    }
  }
  process.stdout.write(JSON.stringify({ answered, failures }) + "\n");
  process.exit(0);
})();
`;

/** Starts watching; the returned function stops and tells how many answered and which failed their deadline. */
export async function watchHealth(origin: string, deadlineMs: number): Promise<() => Promise<{ answered: number; failures: string[] }>> {
  const child = spawn(process.execPath, ["-e", WATCHER, `${origin}/healthz`, String(deadlineMs)], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // The attack starts once the watcher has had its first answer.
  await eventually(() => (out.startsWith("ready\n") ? true : child.exitCode !== null ? Promise.reject(new Error(out)) : undefined), "the health watcher", 20_000);
  return async () => {
    child.stdin.end("stop\n");
    await exited;
    return JSON.parse(out.split("\n")[1]!) as { answered: number; failures: string[] };
  };
}
