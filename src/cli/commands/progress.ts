// What `baton work` says on stderr as it works: one line per issue (its
// outcome, how long its command ran, its title and id, and the reason when it
// was not DONE), the worker's other news, and a summary when it exits; with
// --json, each of them one JSON object.
import type { WorkIssue } from "../../client/index.js";
import type { Context } from "../kit.js";

type Outcome = "DONE" | "REQUEUE" | "FAILED" | "BLOCKED" | "LOST";

interface Started {
  title: string;
  at: number;
  /** Why its command did not end DONE: what it threw. */
  reason: string | null;
}

/** A reason of several lines (a command's stderr) as one: its first line, and its last after "…". */
function oneLine(reason: string): string {
  const lines = reason.split("\n").filter((l) => l.trim() !== "");
  return lines.length > 1 ? `${lines[0]} … ${lines.at(-1)}` : (lines[0] ?? "");
}

const seconds = (ms: number) => Math.round(ms / 100) / 10;

/** The news of the SDK's worker that need no line of their own: each issue's line and the summary tell them. */
const FOLDED = new Set(["released", "run started", "run finished"]);

export class Progress {
  private readonly began = performance.now();
  private readonly running = new Map<string, Started>();
  private readonly counts = { done: 0, requeued: 0, failed: 0, blocked: 0, lost: 0 };

  constructor(private readonly ctx: Context) {}

  /** A command starts for the issue. */
  start(issue: WorkIssue): void {
    this.running.set(issue.id, { title: issue.title, at: performance.now(), reason: null });
  }

  /** The issue's command did not end DONE: `reason` goes with its release. */
  failed(issueId: string, reason: string): void {
    const started = this.running.get(issueId);
    if (started) started.reason = reason;
  }

  /** The worker's news (WorkOptions.onLog): releases and lost holds become issue lines, the rest a line each. */
  log(message: string, fields: Record<string, unknown> = {}): void {
    const issueId = typeof fields.issueId === "string" ? fields.issueId : null;
    if (message === "released" && issueId) this.issue(issueId, fields.outcome as Outcome, null);
    else if (message === "release refused" && issueId) this.issue(issueId, "LOST", `the release was refused (${fields.answer}: ${fields.message})`);
    else if (message === "hold lost" && issueId && fields.reason === "the worker is stopping") {
      // The drain timed out: the run's end sends the issue back to OPEN.
      this.issue(issueId, "REQUEUE", "stopped: the drain timed out (--drain-timeout)");
    } else if (message === "hold lost" && issueId) {
      this.issue(issueId, "LOST", `the hold was lost (${fields.reason}); its command is stopped and the issue not released`);
    } else if (message === "result not kept" && issueId && !this.ctx.json) {
      this.ctx.err(`baton: result not kept [${issueId}]: ${fields.why}; the issue is released without it`);
    } else if (this.ctx.json) this.ctx.err(JSON.stringify({ event: message, ...fields }));
    else if (!FOLDED.has(message)) {
      const said = Object.entries(fields).map(([k, v]) => `${k} ${typeof v === "string" ? v : JSON.stringify(v)}`);
      this.ctx.err(`baton: ${message}${said.length ? ` (${said.join(", ")})` : ""}`);
    }
  }

  private issue(issueId: string, outcome: Outcome, why: string | null): void {
    const started = this.running.get(issueId);
    this.running.delete(issueId);
    const ms = started ? performance.now() - started.at : 0;
    const reason = outcome === "DONE" ? null : (why ?? started?.reason ?? null);
    const key = ({ DONE: "done", REQUEUE: "requeued", FAILED: "failed", BLOCKED: "blocked", LOST: "lost" } as const)[outcome];
    this.counts[key]++;
    if (this.ctx.json) {
      this.ctx.err(JSON.stringify({ event: "issue", outcome, issueId, title: started?.title ?? null, seconds: seconds(ms), reason }));
      return;
    }
    const title = started ? `${started.title.replace(/\s+/g, " ")} ` : "";
    this.ctx.err(`baton: ${outcome.padEnd(7)} ${`${seconds(ms).toFixed(1)} s`.padStart(8)}  ${title}[${issueId}]${reason ? `: ${oneLine(reason)}` : ""}`);
  }

  /** The line baton work ends with: how many issues ended which way, and how long it worked. */
  summary(): void {
    const { done, requeued, failed, blocked, lost } = this.counts;
    const s = seconds(performance.now() - this.began);
    if (this.ctx.json) {
      this.ctx.err(JSON.stringify({ event: "summary", done, requeued, failed, blocked, lost, seconds: s }));
      return;
    }
    const lostToo = lost ? `, ${lost} lost` : "";
    this.ctx.err(`baton: ${done} done, ${requeued} requeued, ${failed} failed, ${blocked} blocked${lostToo} in ${s.toFixed(1)} s`);
  }
}
