// The built `baton` CLI as a test runs it: a process group of its own (so the
// commands it starts can be signalled and ended with it), its output kept.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import path from "node:path";
import { Ops } from "./harness.js";
import type { Company } from "./harness.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

export interface Ran {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** `baton ARGS` against `url` as the leader of its own process group; with `npx`, as a user types `npx baton …`. */
export function spawnBaton(url: string, args: string[], token: string | null, options: { env?: Record<string, string>; npx?: boolean } = {}): Ran {
  const [file, argv] = options.npx ? ["npx", ["baton", ...args]] : [process.execPath, ["dist/cli/main.js", ...args]];
  const child = spawn(file, argv, {
    cwd: ROOT,
    detached: true,
    env: { ...process.env, BATON_URL: url, BATON_TOKEN: token ?? "", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  return { child, stdout: () => stdout, stderr: () => stderr, exited: new Promise((resolve) => child.once("exit", (code) => resolve(code))) };
}

/** SIGKILL to every process of each group (a CLI and the commands it started); quiet for groups already gone. */
export function killGroups(pgids: Iterable<number>): void {
  for (const pgid of pgids) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** `n` OPEN issues assigned to the company's first agent, titled "job 0", "job 1", …; their ids. */
export async function assignedIssues(co: Company, n: number, input: Record<string, unknown> = {}): Promise<string[]> {
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: Array.from({ length: n }, (_, i) => ({ title: `job ${i}`, assigneeAgentId: co.agents[0]!.id, ...input })),
  });
  return createIssues.map((i) => i.id);
}
