// The real API as a child process (`src/bin/server.ts`) over a fresh test
// database: for tests of what a hostile client can do to the whole process
// (memory, the event loop, crashes), which an in-process server would share
// with the test runner.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createTestDatabase } from "./db.js";
import type { TestDatabase } from "./db.js";
import { eventually } from "./race.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

export interface ServerProcess {
  url: string;
  origin: string;
  adminToken: string;
  database: TestDatabase;
  /** Everything the process wrote to stdout and stderr. */
  output(): string;
  /** Resident memory of the process, in MB (from /proc). */
  rssMb(): number;
  /** Whether the process is still running. */
  alive(): boolean;
  /** SIGTERM, as a process manager sends it: resolves with the exit code (null: it did not exit within 30 s, and was killed). */
  terminate(): Promise<number | null>;
  stop(): Promise<void>;
}

/** `options.database`: share a database another process uses (it is not dropped at stop()); default: a fresh one. */
export async function startServerProcess(env: Record<string, string> = {}, options: { database?: TestDatabase } = {}): Promise<ServerProcess> {
  const owned = !options.database;
  const database = options.database ?? (await createTestDatabase());
  const adminToken = "server-process-admin-0123456789";
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "src/bin/server.ts"], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: database.url, PORT: "0", BATON_ADMIN_TOKEN: adminToken, REDIS_URL: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const url = await eventually(
    () => {
      if (child.exitCode !== null) throw new Error(`the server exited ${child.exitCode}: ${output}`);
      return /Baton API\s+(http:\S+)/.exec(output)?.[1];
    },
    "the server to start",
    30_000,
  );
  return {
    url,
    origin: new URL(url).origin,
    adminToken,
    database,
    output: () => output,
    rssMb: () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))![1]) / 1024,
    alive: () => child.exitCode === null && child.signalCode === null,
    async terminate() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      let timer: NodeJS.Timeout | undefined;
      const code = await Promise.race([exited, new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), 30_000)))]);
      clearTimeout(timer);
      if (code !== "late") return code;
      child.kill("SIGKILL");
      await exited;
      return null;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        await new Promise((resolve) => {
          child.once("exit", resolve);
          child.kill("SIGKILL");
        });
      }
      if (owned) await database.drop();
    },
  };
}
