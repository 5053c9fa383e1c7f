// The built `baton` CLI as a test runs it: a process group of its own (so the
// commands it starts can be signalled and ended with it), its output kept.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect } from "vitest";
import { Ops, startHarness } from "./harness.js";
import type { Company, Harness } from "./harness.js";

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

/**
 * A test file's server and its `baton` runs: a harness started before the
 * file's tests, a scratch directory, and every CLI it ran (with the commands
 * they started) ended and removed after them. `h` exists while the tests run.
 */
export function useCliServer(prefix: string) {
  let harness: Harness | undefined;
  const scratch = mkdtempSync(path.join(tmpdir(), prefix));
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    harness = await startHarness();
  });
  afterAll(async () => {
    killGroups(children.map((c) => c.pid!));
    rmSync(scratch, { recursive: true, force: true });
    await harness?.close();
  });
  /** `baton ARGS`, ended with the file. */
  const baton = (args: string[], token: string | null): Ran => {
    const ran = spawnBaton(harness!.url, args, token);
    children.push(ran.child);
    return ran;
  };
  return {
    get h(): Harness {
      if (!harness) throw new Error("useCliServer: the server exists only while the file's tests run");
      return harness;
    },
    scratch,
    /** Processes the file started itself, to end with it. */
    children,
    baton,
    /** `baton ARGS` that must exit 0: its stdout. */
    async ok(args: string[], token: string | null): Promise<string> {
      const run = baton(args, token);
      const code = await run.exited;
      if (code !== 0) throw new Error(`baton ${args.join(" ")} exited ${code}: ${run.stderr()}`);
      return run.stdout();
    },
    /** One line on stderr, the documented exit code, nothing on stdout. */
    async refused(args: string[], token: string | null, code: number, line: RegExp): Promise<void> {
      const run = baton(args, token);
      expect(await run.exited, run.stderr()).toBe(code);
      expect(run.stderr().trim().split("\n")).toEqual([expect.stringMatching(line)]);
      expect(run.stdout()).toBe("");
    },
  };
}
