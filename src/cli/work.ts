// `baton work [options] -- COMMAND [ARGS…]`: any program becomes a safe
// Baton worker. The SDK's work() keeps the run, the lease and the claims; this
// runs COMMAND once per issue:
//   - the issue as JSON on stdin, and BATON_ISSUE_ID, BATON_ISSUE_TITLE,
//     BATON_RUN_ID, BATON_LOCK_EPOCH (the fencing token), BATON_URL and, for
//     an issue with a concurrency key, BATON_ISSUE_CONCURRENCY_KEY in its
//     environment (never the token);
//   - its exit decides the release: 0 → DONE, 75 (EX_TEMPFAIL) → REQUEUE,
//     anything else or death by a signal → FAILED, with the last lines of its
//     stderr as the reason;
//   - if the hold is lost it gets SIGTERM at once and SIGKILL 10 s later, and
//     the issue is not released again;
//   - SIGINT/SIGTERM to baton: stop claiming, let commands finish for up to
//     --drain-timeout seconds, stop them, finish the run, exit 0; a second
//     signal stops them at once and exits 1;
//   - if the key is revoked (rotated, or the agent disabled) every hold is
//     lost at once: each command is stopped as above, nothing more is claimed
//     or released, and once the commands have exited baton exits 3 with one
//     line saying so.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { Requeue, UnauthenticatedError } from "../client/index.js";
import type { Job, WorkIssue } from "../client/index.js";
import { parse, Usage } from "./commands.js";
import type { Context } from "./commands.js";

const USAGE = "work [--concurrency N] [--once] [--include-unassigned] [--drain-timeout SECONDS] -- COMMAND [ARGS…]";
const KILL_AFTER_MS = 10_000;
const STDERR_LINES = 20;
const EX_TEMPFAIL = 75;

/** Runs COMMAND for one issue; resolves when it exits, throwing what the exit means for the release. */
function runCommand(command: string[], issue: WorkIssue, job: Job, ctx: Context, prefix: boolean, children: Set<ChildProcess>): Promise<void> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.BATON_TOKEN;
  delete env.BATON_ISSUE_CONCURRENCY_KEY; // set below only for a keyed issue: never one inherited from baton's own environment
  Object.assign(env, {
    BATON_ISSUE_ID: issue.id,
    BATON_ISSUE_TITLE: issue.title,
    BATON_RUN_ID: job.runId,
    BATON_LOCK_EPOCH: String(job.lockEpoch),
    BATON_URL: ctx.baton.url,
  });
  if (issue.concurrencyKey !== null) env.BATON_ISSUE_CONCURRENCY_KEY = issue.concurrencyKey;
  const child = spawn(command[0]!, command.slice(1), { env, stdio: ["pipe", "pipe", "pipe"] });
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
  const stop = () => {
    child.kill("SIGTERM");
    killer = setTimeout(() => child.kill("SIGKILL"), KILL_AFTER_MS);
    killer.unref();
  };
  if (job.signal.aborted) stop();
  else job.signal.addEventListener("abort", stop, { once: true });
  return new Promise((resolve, reject) => {
    child.once("error", (err) => {
      children.delete(child);
      reject(new Error(`could not run ${command[0]}: ${err.message}`));
    });
    child.once("close", (code, signal) => {
      children.delete(child);
      if (killer) clearTimeout(killer);
      job.signal.removeEventListener("abort", stop);
      const reason = tail.join("\n").trim();
      if (code === 0) return resolve();
      const how = signal ? `killed by ${signal}` : `exit ${code}`;
      if (code === EX_TEMPFAIL) return reject(new Requeue(reason ? `${how}: ${reason}` : how));
      reject(new Error(reason ? `${how}: ${reason}` : how));
    });
  });
}

export async function workCommand(ctx: Context, words: string[]): Promise<number> {
  const dash = words.indexOf("--");
  const command = dash === -1 ? [] : words.slice(dash + 1);
  const p = parse(
    ctx,
    dash === -1 ? words : words.slice(0, dash),
    USAGE,
    { concurrency: { type: "string" }, once: { type: "boolean" }, "include-unassigned": { type: "boolean" }, "drain-timeout": { type: "string" } },
  );
  if (!p) return 0;
  if (command.length === 0) throw new Usage(`no command to run: baton ${USAGE}`);
  const concurrency = p.values.concurrency === undefined ? 1 : Number(p.values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1000) throw new Usage("--concurrency must be between 1 and 1000");
  const drain = p.values["drain-timeout"] === undefined ? 30 : Number(p.values["drain-timeout"]);
  if (!Number.isFinite(drain) || drain < 0) throw new Usage("--drain-timeout must be a number of seconds");

  const children = new Set<ChildProcess>();
  const worker = ctx.baton.work((issue, job) => runCommand(command, issue, job, ctx, concurrency > 1, children), {
    concurrency,
    once: Boolean(p.values.once),
    includeUnassigned: Boolean(p.values["include-unassigned"]),
    drainTimeoutMs: drain * 1000,
    onLog: (message, fields) => ctx.err(`baton: ${message}${fields ? ` ${JSON.stringify(fields)}` : ""}`),
  });
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals === 1) {
      ctx.err(`baton: ${signal}: stopping (draining for up to ${drain} s)`);
      worker.stop().catch(() => {}); // how it ended (a revoked key, say) is worker.done's, below
      return;
    }
    ctx.err(`baton: second signal: stopping commands now`);
    for (const child of children) child.kill("SIGKILL");
    process.exit(1);
  };
  process.on("SIGINT", onSignal).on("SIGTERM", onSignal);
  try {
    await worker.done;
  } catch (err) {
    // The key was revoked: the worker has aborted every job, so each command has its SIGTERM (and SIGKILL
    // 10 s later). Exit once they are gone; main prints the error's one line and exits 3.
    if (err instanceof UnauthenticatedError) await Promise.all([...children].map((child) => new Promise((resolve) => child.once("close", resolve))));
    throw err;
  }
  return 0;
}
