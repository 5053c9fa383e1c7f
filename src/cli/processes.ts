// What `baton work` needs of the operating system: whether COMMAND can run at
// all (checked before anything is claimed), signals to a command's whole
// process group, and the watchdog that ends the commands of a worker that
// died (watchdog.ts).
import { spawn } from "node:child_process";
import { accessSync, closeSync, constants, openSync, readSync, statSync } from "node:fs";
import type { Stats } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** COMMAND cannot be run: the worker's fault, not an issue's. Exit 2, one line. */
export class CannotRun extends Error {
  override name = "CannotRun";
}

/** Why `file` cannot be executed, or null if it can: what execve would refuse, found without running it. */
function refusal(file: string): string | null {
  let stat: Stats;
  try {
    stat = statSync(file);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message;
  }
  if (stat.isDirectory()) return "a directory";
  if (!stat.isFile()) return "not a regular file";
  try {
    accessSync(file, constants.X_OK);
  } catch {
    return "not executable (chmod +x)";
  }
  return null;
}

/** Where `name` runs from: itself if it has a slash, else the first executable of that name on PATH (as execvp looks). */
function locate(name: string, env: NodeJS.ProcessEnv): { file: string } | { refused: string } {
  if (name.includes("/")) {
    const refused = refusal(name);
    return refused ? { refused } : { file: name };
  }
  for (const dir of (env.PATH ?? "/usr/local/bin:/usr/bin:/bin").split(":")) {
    const file = path.join(dir || ".", name);
    if (refusal(file) === null) return { file };
  }
  return { refused: "not found on PATH" };
}

/** The interpreter a script names on its `#!` line, and for `#!/usr/bin/env NAME` that NAME too; null for a binary. */
function interpreter(file: string): { path: string; viaEnv: string | null } | null {
  const head = Buffer.alloc(256);
  let fd: number | null = null;
  try {
    fd = openSync(file, "r");
    const n = readSync(fd, head, 0, head.length, 0);
    const text = head.subarray(0, n).toString("latin1");
    if (!text.startsWith("#!")) return null;
    const words = text.slice(2).split("\n")[0]!.trim().split(/\s+/);
    const interp = words[0] ?? "";
    const named = path.basename(interp) === "env" ? (words.slice(1).find((w) => !w.startsWith("-") && !w.includes("=")) ?? null) : null;
    return { path: interp, viaEnv: named };
  } catch {
    return null; // unreadable: execve reports it, at spawn
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/**
 * Why `command` cannot be started (missing, not on PATH, not executable, a
 * directory, or a script whose `#!` interpreter is), or null if it can.
 */
export function whyNotRunnable(command: string, env: NodeJS.ProcessEnv = process.env): string | null {
  const found = locate(command, env);
  if ("refused" in found) return found.refused;
  const script = interpreter(found.file);
  if (!script) return null;
  const interp = locate(script.path, env);
  if ("refused" in interp) return `its interpreter ${script.path} (#!) cannot run: ${interp.refused}`;
  if (script.viaEnv === null) return null;
  const named = locate(script.viaEnv, env);
  return "refused" in named ? `its interpreter ${script.viaEnv} (#!${script.path}) cannot run: ${named.refused}` : null;
}

/** Sends `signal` to every process of the group `pgid` leads; quiet if none is left. */
export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // the group is gone
  }
}

export interface Watchdog {
  /** A command's process group to end if this process dies. */
  watch(pgid: number): void;
  /** That command has exited. */
  forget(pgid: number): void;
}

/**
 * Starts the watchdog (watchdog.ts), in a session of its own. The pipe to it
 * ends when this process does, however it ends (SIGKILL included), and the
 * watchdog then stops every command still listed.
 */
export function startWatchdog(): Watchdog {
  const self = fileURLToPath(import.meta.url);
  const program = path.join(path.dirname(self), `watchdog${path.extname(self)}`);
  const child = spawn(process.execPath, [...process.execArgv, program], { detached: true, stdio: ["pipe", "ignore", "ignore"] });
  child.on("error", () => {}); // no watchdog: the commands still run, unguarded
  child.stdin!.on("error", () => {});
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  const send = (line: string) => {
    if (child.stdin!.writable) child.stdin!.write(`${line}\n`);
  };
  return { watch: (pgid) => send(`+${pgid}`), forget: (pgid) => send(`-${pgid}`) };
}
