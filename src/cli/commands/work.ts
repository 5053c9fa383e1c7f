// `baton work [options] -- COMMAND [ARGS…]`: any program becomes a safe
// Baton worker. The SDK's work() keeps the run, the lease and the claims; this
// runs COMMAND once per issue:
//   - the issue as JSON on stdin (its payload in it), and BATON_ISSUE_ID,
//     BATON_ISSUE_TITLE, BATON_ISSUE_PARENT_ID, BATON_RUN_ID, BATON_LOCK_EPOCH
//     (the fencing token), BATON_URL, BATON_RESULT_FILE and, for an issue
//     with a concurrency key, BATON_ISSUE_CONCURRENCY_KEY in its environment
//     (never the token);
//   - it leads a process group of its own: a terminal's Ctrl-C reaches baton,
//     not the command; whatever baton stops, it stops as a whole group;
//   - its exit decides the release: 0 → DONE, 75 (EX_TEMPFAIL) → REQUEUE
//     (with retryAfterSeconds when its last stderr line is `retry-after: N`),
//     death by a signal baton sent → REQUEUE, anything else (another signal
//     included) → FAILED, with the last lines of its stderr as the reason;
//   - the JSON it wrote to BATON_RESULT_FILE, if any, goes with the release
//     as the issue's result (a file that is not JSON, or over 64 KB: one line
//     says so, and the release goes without it);
//   - a COMMAND that cannot be started is the worker's fault, not an issue's:
//     it is checked before anything is claimed (exit 2, one line); one that
//     passes the check and still fails to spawn sends its issue back to the
//     queue, stops the worker and exits 2;
//   - if the hold is lost it gets SIGTERM at once and SIGKILL 10 s later, and
//     the issue is not released again;
//   - SIGINT/SIGTERM to baton: stop claiming, let commands finish for up to
//     --drain-timeout seconds, stop them, finish the run, exit 0 once they
//     have exited; a second signal (not the same one sent again within a
//     second: one Ctrl-C under npm arrives twice) stops them at once and
//     exits 1;
//   - if baton dies (SIGKILL, say), its watchdog stops every command it ran
//     (../watchdog.ts);
//   - if the key is revoked (rotated, or the agent disabled) every hold is
//     lost at once: each command is stopped as above, nothing more is claimed
//     or released, and once the commands have exited baton exits 3 with one
//     line saying so.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { onStopSignals } from "../../bin/shutdown.js";
import { Failed, MAX_JSON_BYTES, MAX_RETRY_AFTER_SECONDS, Requeue } from "../../client/index.js";
import * as Documents from "../generated/graphql.js";
import type { Job, WorkIssue } from "../../client/index.js";
import { parse, Usage, wholeNumber, WrongKey } from "../kit.js";
import type { Context } from "../kit.js";
import { Progress } from "./progress.js";
import { CannotRun, signalGroup, startWatchdog, whyNotRunnable } from "../processes.js";
import type { Watchdog } from "../processes.js";

/** `baton work --help`, after the options. */
export const WORK_HELP = `Each issue claimed runs COMMAND once, in a process group of its own. COMMAND gets:
  stdin                         the issue as JSON, its payload (what the work needs) among its fields
  BATON_ISSUE_ID                the issue's id
  BATON_ISSUE_TITLE             its title
  BATON_ISSUE_PARENT_ID         the issue it was split from (empty for a top-level issue)
  BATON_ISSUE_CONCURRENCY_KEY   its concurrency key (set only for a keyed issue)
  BATON_RUN_ID                  the worker's run
  BATON_LOCK_EPOCH              the fencing token: pass it to what COMMAND writes to
  BATON_RESULT_FILE             a path, in a new directory of its own: JSON written there is the issue's result
  BATON_URL                     the API
and the rest of baton's environment, never BATON_TOKEN.

COMMAND's exit code releases the issue:
  0        DONE
  75       REQUEUE (EX_TEMPFAIL): "not now". If the last line that is not blank on COMMAND's stderr reads
           retry-after: N   (N whole seconds, any case; more than 86400 counts as 86400)
           the issue is not claimable for N seconds and the attempt is given back;
           without it, the issue is OPEN again at once and the attempt stays counted
  other    FAILED, with the last lines of COMMAND's stderr as the reason
  (stopped by baton, on a lost hold or a drain that timed out: REQUEUE)
If the issue is taken back (force-release, lease lost, an execution past its
maxExecutionSeconds), COMMAND gets SIGTERM, then SIGKILL 10 s later.

The result: whatever the exit code, if COMMAND wrote JSON to BATON_RESULT_FILE (at most 64 KB),
the release carries it as the issue's result. A file that is not JSON, or larger, is left out,
with one line saying so; the issue is released all the same.

Progress goes to stderr, one line per issue (outcome, time, title, id, the reason when not DONE),
and a summary when baton work exits (done, requeued, failed, blocked, the time); --json makes each
of them one JSON object. COMMAND's own stdout and stderr pass through.

--once drains the queue: it claims until nothing is claimable, lets what runs finish, and exits 0.
Without it, baton work waits for new work until stopped.

To stop: Ctrl-C (or SIGTERM) stops claiming and lets running commands finish, for up to
--drain-timeout seconds, then stops them; exit 0. A second Ctrl-C stops the commands at once; exit 1.

baton work exits 2 when COMMAND cannot be started (checked before anything is claimed) and 3 when
the key is not an agent key, or is revoked while it works.`;
const KILL_AFTER_MS = 10_000;
const STDERR_LINES = 20;
const EX_TEMPFAIL = 75;
/** COMMAND's "not now, come back in N seconds": its last stderr line. */
const RETRY_AFTER = /^\s*retry-after:\s*(\d+)\s*$/i;

/** retryAfterSeconds from COMMAND's last stderr line that is not blank (`retry-after: N`, at most a day), or null when it gave none. */
function retryAfterHint(lines: string[]): number | null {
  const last = lines.findLast((line) => line.trim() !== "");
  const n = RETRY_AFTER.exec(last ?? "")?.[1];
  return n === undefined ? null : Math.min(Number(n), MAX_RETRY_AFTER_SECONDS);
}

/** What COMMAND left in BATON_RESULT_FILE: a JSON value, nothing (no file, or an empty one), or why it cannot be the result. */
function resultFile(file: string): { value: unknown } | { why: string } | null {
  let text: string;
  try {
    const stat = statSync(file);
    if (!stat.isFile()) return { why: "is not a regular file" };
    if (stat.size > MAX_JSON_BYTES) return { why: `is ${stat.size} bytes, over the ${MAX_JSON_BYTES} a result may be` };
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" ? null : { why: `cannot be read (${code ?? (err as Error).message})` }; // ENOENT: not written
  }
  if (text.trim() === "") return null;
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (err) {
    return { why: `is not JSON (${(err as Error).message.replace(/\s+/g, " ")})` };
  }
}

interface Commands {
  running: Set<ChildProcess>;
  watchdog: Watchdog;
  /** A command failed to spawn: called once per such issue, with the error to end baton with. */
  cannotStart: (err: CannotRun) => void;
  /** What a command left in BATON_RESULT_FILE cannot be the result: one line. */
  resultRefused: (issueId: string, why: string) => void;
}

/** Runs COMMAND for one issue; resolves when it exits, throwing what the exit means for the release. */
function runCommand(command: string[], issue: WorkIssue, job: Job, ctx: Context, prefix: boolean, commands: Commands): Promise<unknown> {
  const children = commands.running;
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.BATON_TOKEN;
  delete env.BATON_ISSUE_CONCURRENCY_KEY; // set below only for a keyed issue: never one inherited from baton's own environment
  // A directory of its own (mode 0700) per command: the result file is this issue's alone, and removed with it.
  const scratch = mkdtempSync(path.join(tmpdir(), "baton-result-"));
  const resultPath = path.join(scratch, "result.json");
  Object.assign(env, {
    BATON_ISSUE_ID: issue.id,
    BATON_ISSUE_TITLE: issue.title,
    BATON_ISSUE_PARENT_ID: issue.parentId ?? "",
    BATON_RUN_ID: job.runId,
    BATON_LOCK_EPOCH: String(job.lockEpoch),
    BATON_RESULT_FILE: resultPath,
    BATON_URL: ctx.baton.url,
  });
  if (issue.concurrencyKey !== null) env.BATON_ISSUE_CONCURRENCY_KEY = issue.concurrencyKey;
  // It passed whyNotRunnable and still could not be spawned (a limit, a file held open for writing): no issue's fault.
  const notStarted = (err: Error) => {
    const why = `could not start ${command[0]}: ${err.message}`;
    commands.cannotStart(new CannotRun(`${why}; its issue ${issue.id} went back to the queue and the worker stopped`));
    return new Requeue(why);
  };
  const cleanUp = () => {
    try {
      rmSync(scratch, { recursive: true, force: true });
    } catch {
      // COMMAND made it unremovable: the system's temp cleaning has it
    }
  };
  let child: ChildProcess;
  try {
    // detached: a process group (and session) of its own, out of reach of the terminal's signals.
    child = spawn(command[0]!, command.slice(1), { env, stdio: ["pipe", "pipe", "pipe"], detached: true });
  } catch (err) {
    cleanUp();
    throw notStarted(err as Error); // E2BIG and the like are thrown, ENOENT and EACCES emitted
  }
  if (child.pid !== undefined) commands.watchdog.watch(child.pid);
  children.add(child);
  const tail: string[] = [];
  const pass = (stream: NodeJS.ReadableStream, to: NodeJS.WriteStream, keep: boolean) => {
    let partial = "";
    stream.on("data", (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split("\n");
      partial = lines.pop()!;
      for (const line of lines) {
        to.write(prefix ? `[${issue.id}] ${line}\n` : `${line}\n`);
        if (keep) tail.push(line) > STDERR_LINES && tail.shift();
      }
    });
    stream.on("end", () => {
      if (!partial) return;
      to.write(prefix ? `[${issue.id}] ${partial}\n` : `${partial}\n`);
      if (keep) tail.push(partial) > STDERR_LINES && tail.shift();
    });
  };
  pass(child.stdout!, process.stdout, false);
  pass(child.stderr!, process.stderr, true);
  child.stdin!.on("error", () => {}); // a command that does not read its stdin
  child.stdin!.end(JSON.stringify(issue));
  let killer: NodeJS.Timeout | null = null;
  let stopped = false;
  const stop = () => {
    stopped = true;
    signalGroup(child.pid, "SIGTERM");
    killer = setTimeout(() => signalGroup(child.pid, "SIGKILL"), KILL_AFTER_MS);
    killer.unref();
  };
  if (job.signal.aborted) stop();
  else job.signal.addEventListener("abort", stop, { once: true });
  return new Promise((resolve, reject) => {
    child.once("error", (err) => {
      children.delete(child);
      job.signal.removeEventListener("abort", stop);
      if (child.pid === undefined) {
        cleanUp();
        reject(notStarted(err)); // else it started: its exit, below, is what counts
      }
    });
    child.once("exit", () => {
      children.delete(child);
      commands.watchdog.forget(child.pid!);
    });
    child.once("close", (code, signal) => {
      if (child.pid === undefined) return; // never started: settled by "error"
      if (killer) clearTimeout(killer);
      job.signal.removeEventListener("abort", stop);
      const left = resultFile(resultPath);
      cleanUp();
      if (left && "why" in left) commands.resultRefused(issue.id, `BATON_RESULT_FILE ${left.why}`);
      const result = left && "value" in left ? left.value : undefined;
      const reason = tail.join("\n").trim();
      if (code === 0) return resolve(result);
      const how = signal ? `killed by ${signal}` : `exit ${code}`;
      const said = reason ? `${how}: ${reason}` : how;
      if (code === EX_TEMPFAIL) {
        const later = retryAfterHint(tail);
        return reject(new Requeue({ reason: said, result, ...(later === null ? {} : { retryAfterSeconds: later }) }));
      }
      if (signal && stopped) return reject(new Requeue({ reason: said, result }));
      reject(new Failed({ reason: said, result }));
    });
  });
}

export async function workCommand(ctx: Context, words: string[], usage: string): Promise<number> {
  const dash = words.indexOf("--");
  const command = dash === -1 ? [] : words.slice(dash + 1);
  const p = parse(ctx, dash === -1 ? words : words.slice(0, dash), usage, {
    concurrency: { type: "string" },
    once: { type: "boolean" },
    "include-unassigned": { type: "boolean" },
    "drain-timeout": { type: "string" },
  });
  if (command.length === 0) throw new Usage(`no command to run: baton ${usage}`);
  const concurrency = wholeNumber("--concurrency", p.values.concurrency, 1, 1000, 1);
  const drain = p.values["drain-timeout"] === undefined ? 30 : Number(p.values["drain-timeout"]);
  if (!Number.isFinite(drain) || drain < 0) throw new Usage(`--drain-timeout must be a number of seconds, not ${JSON.stringify(p.values["drain-timeout"])}`);

  const why = whyNotRunnable(command[0]!);
  if (why) throw new CannotRun(`cannot run ${command[0]}: ${why}; nothing was claimed`);
  const { me } = await ctx.baton.request(Documents.MeDocument, {});
  if (me.role !== "AGENT") {
    throw new WrongKey(
      `baton work needs an agent key, and this is ${me.role === "BOARD" ? "a board key" : "the admin token"}: ` +
        "`baton agent create NAME` with the board key makes an agent and prints its key",
    );
  }

  const progress = new Progress(ctx);
  const fatal: { error: CannotRun | null } = { error: null };
  const commands: Commands = {
    running: new Set<ChildProcess>(),
    watchdog: startWatchdog(),
    cannotStart: (err) => {
      if (fatal.error) return;
      fatal.error = err;
      worker.stop().catch(() => {}); // claim nothing more; the error is thrown below, once the worker is done
    },
    resultRefused: (issueId, why) => progress.log("result not kept", { issueId, why }),
  };
  const children = commands.running;
  /** Every command started has exited (each was let finish, or stopped: SIGTERM, SIGKILL 10 s later). */
  const exited = () => Promise.all([...children].map((child) => new Promise((resolve) => child.once("exit", resolve))));
  const handler = async (issue: WorkIssue, job: Job) => {
    progress.start(issue);
    try {
      return await runCommand(command, issue, job, ctx, concurrency > 1, commands);
    } catch (err) {
      progress.failed(issue.id, (err as Error).message);
      throw err;
    }
  };
  const worker = ctx.baton.work(handler, {
    concurrency,
    once: Boolean(p.values.once),
    includeUnassigned: Boolean(p.values["include-unassigned"]),
    drainTimeoutMs: drain * 1000,
    onLog: (message, fields) => progress.log(message, fields),
    // Checked again before each claim: a command deleted or broken while baton ran costs no issue an attempt.
    beforeClaim: () => {
      const why = whyNotRunnable(command[0]!);
      if (why) throw new CannotRun(`cannot run ${command[0]}: ${why}; the worker stopped before claiming more`);
    },
  });
  // The guard the server uses: one Ctrl-C that arrives twice (the terminal's, then npm's) is one request.
  onStopSignals(
    (signal) => {
      ctx.err(`baton: ${signal}: stopping (draining for up to ${drain} s)`);
      worker.stop().catch(() => {}); // how it ended (a revoked key, say) is worker.done's, below
    },
    () => {
      ctx.err(`baton: second signal: stopping commands now`);
      for (const child of children) signalGroup(child.pid, "SIGKILL");
      progress.summary();
    },
  );
  try {
    await worker.done;
  } catch (err) {
    // The key was revoked: the worker has aborted every job, so each command has its SIGTERM (and SIGKILL
    // 10 s later); or the command could not run any more, and the drain has stopped what was left. Exit once
    // they are gone; main prints the error's one line (and exits 3 for the key, 2 for the command).
    await exited();
    progress.summary();
    throw err;
  }
  // A drain that timed out stopped what still ran: baton exits once it has.
  await exited();
  progress.summary();
  if (fatal.error) throw fatal.error;
  return 0;
}
