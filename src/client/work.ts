// baton.work(handler, options): an agent's whole life cycle, in process.
//
//   start a run → keep its lease (a heartbeat every lease/3) → claim with
//   the execution lock (one request: claimIssue with startExecution) → run
//   the handler → release with the outcome the handler gave (return → DONE,
//   Requeue → REQUEUE, Blocked → BLOCKED, Failed or any other throw →
//   FAILED), claiming the next issue in the same request (releaseIssue with
//   next) → … → finish the run. One request per job while work lasts.
//
// What the handler returns is the issue's `result` (a JSON value; undefined
// or null: none), and Requeue, Blocked and Failed may carry one too
// (outcomes.ts). A result that cannot be kept (not JSON, over 64 KB, or
// refused by the server) is left out of the release, which still happens,
// and said in the log.
//
// The hold can be lost while a handler runs: the run's heartbeat answers
// RunNotActive (the lease lapsed and the run was timed out, or it was finished
// elsewhere), or the ledger shows the issue's checkout moved away from this
// run (force-released, recovered, adopted). The job's AbortSignal is then
// aborted with the reason, and the worker does not release that issue: it is
// no longer this run's to release. The handler should stop, and must not
// write anything it fences with `job.lockEpoch` after that.
//
// The key can be revoked while it works (rotated, or the agent disabled): any
// request answers UNAUTHENTICATED, or the ledger watch ends with it. That is a
// lost hold for every job at once: each signal is aborted, nothing more is
// claimed, released or finished (the key could do none of it), and `done`
// rejects with an UnauthenticatedError.
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { setTimeout as delay } from "node:timers/promises";
import { context } from "@opentelemetry/api";
import { BatonError, EventsPrunedError, ProblemError, UnauthenticatedError } from "./errors.js";
import {
  MeDocument,
  WorkClaimDocument,
  WorkClaimManyDocument,
  WorkCreateSubIssuesDocument,
  WorkIssueHolderDocument,
  WorkNewestSeqDocument,
} from "./generated/graphql.js";
import { WorkFinishRunDocument, WorkHeartbeatDocument, WorkReleaseDocument, WorkStartRunDocument } from "./generated/graphql.js";
import type { CreateIssueInput, WorkIssueFragment, WorkRunFragment } from "./generated/graphql.js";
import type { LockChange, LockChangesFilter } from "./lockChanges.js";
import { outcomeOf, resultOf } from "./outcomes.js";
import type { Release } from "./outcomes.js";
import type { RequestOptions } from "./request.js";
import { TraceLife } from "./tracing.js";

/** What the worker asks of its Baton (baton.ts passes itself): requests, and the ledger's live changes. */
interface WorkerBaton {
  request<R, V extends Record<string, unknown>>(document: TypedDocumentNode<R, V>, variables: V, options: RequestOptions): Promise<R>;
  lockChanges(filter: LockChangesFilter): AsyncIterableIterator<LockChange>;
}

export type WorkIssue = WorkIssueFragment;
export type { CreateIssueInput };

export interface Job {
  readonly runId: string;
  /** The fencing token: pass it to anything the handler writes, which refuses writes with an older one. */
  readonly lockEpoch: number;
  /** Which attempt of the issue this is (1 for the first). */
  readonly attempt: number;
  /**
   * Aborted, with a reason, the moment the hold is lost (the key revoked included: the reason is then an UnauthenticatedError),
   * or the worker stops after its drain timeout.
   */
  readonly signal: AbortSignal;
  /**
   * Splits the issue: creates 1..100 issues with this one as their parent, in one transaction, while this run
   * holds it, and resolves to them in input order (an input whose idempotencyKey exists answers that issue).
   * With `parentWaits`, this issue also waits on every one: throw `new Requeue()` and it comes back (still
   * assigned to this agent) once they are all DONE. A problem is thrown as a ProblemError: NotLockOwner or
   * RunNotActive (the hold is gone, and the signal is aborted), IssueNotFound.
   */
  createSubIssues(inputs: CreateIssueInput[], options?: { parentWaits?: boolean }): Promise<WorkIssue[]>;
}

/** Runs one issue: what it returns (a JSON value) is the issue's result; what it throws, the outcome (Requeue, Blocked, Failed, else FAILED). */
export type Handler = (issue: WorkIssue, job: Job) => unknown;

export interface WorkOptions {
  /** Issues handled at once (default 1). Above 1, claims are batched (claimIssues). */
  concurrency?: number;
  /** Also claim issues assigned to no agent (default false). */
  includeUnassigned?: boolean;
  /** Stop when no issue is available and none is running (default false: wait for new work). */
  once?: boolean;
  /** The longest wait for new work while idle; live events wake the worker sooner (default 5000 ms). */
  idleWaitMs?: number;
  /** stop(): how long running handlers may go on before their signals are aborted (default 30000 ms). */
  drainTimeoutMs?: number;
  /** What the worker does, as it happens (default: nothing). */
  onLog?: (message: string, fields?: Record<string, unknown>) => void;
  /**
   * Called before each claim: a throw means the worker cannot work (what it runs is gone, say). It then claims
   * nothing more, lets running handlers finish as stop() does, and `done` rejects with what was thrown.
   */
  beforeClaim?: () => void;
}

export interface Worker {
  /**
   * Settles when the worker has stopped: after stop(), or with `once` when the queue is empty. Rejects if it could not work
   * at all, and with an UnauthenticatedError if its key stopped working (revoked) while it worked.
   */
  readonly done: Promise<void>;
  /** Stops claiming, lets running handlers finish (drainTimeoutMs), finishes the run. */
  stop(): Promise<void>;
}

interface Running {
  /** The run that holds the issue for this job, and the epoch it holds it at. */
  runId: string;
  lockEpoch: number;
  controller: AbortController;
  finished: Promise<void>;
  /** The handler is done and its release is on its way: the checkout leaving this run is that release. */
  releasing: boolean;
  /** The issue's trace: its claim, acquisition, heartbeats and release (src/client/tracing.ts). */
  life: TraceLife;
}

/** Errors of a moment (the API or its database away, a conflict): the same request may succeed after a wait. */
const PASSING = new Set(["UNREACHABLE", "UNAVAILABLE", "INTERNAL_SERVER_ERROR", "CONFLICT_RETRY"]);

/** A request that failed without a definite answer: it may have been carried out (docs/access.md, Retrying). */
function mayHaveTakenEffect(err: unknown): boolean {
  if (!(err instanceof BatonError)) return true;
  if (err.code === "UNAVAILABLE") return err.errors[0]?.extensions?.outcome !== "NOT_APPLIED";
  return err.code === "UNREACHABLE" || err.code === "INTERNAL_SERVER_ERROR";
}

export function work(baton: WorkerBaton, handler: Handler, options: WorkOptions = {}): Worker {
  const concurrency = Math.max(1, Math.trunc(options.concurrency ?? 1));
  const log = options.onLog ?? (() => {});
  /** The caller's OpenTelemetry context: each issue's trace starts under it (docs/client.md, Tracing). */
  const ambient = context.active();
  /** A heartbeat joins the trace of the oldest issue held, or goes alone. */
  const heartbeatTrace = () => {
    for (const job of running.values()) return job.life.context;
    return ambient;
  };
  const running = new Map<string, Running>();
  /**
   * Jobs whose issue this run claimed again while they still ran (their hold
   * had ended): aborted, but counted against `concurrency` and waited for by
   * the drain until their handlers return.
   */
  const replaced = new Set<Running>();
  /** Handlers running now, replaced ones included. */
  const busy = () => running.size + replaced.size;
  let run: WorkRunFragment | null = null;
  let stopping = false;
  let wake: () => void = () => {};
  let heartbeat: ReturnType<typeof setInterval> | null = null;
  let events: AsyncIterableIterator<LockChange> | null = null;
  /** A run whose claim (or the acquisition after it) got no answer: it may hold an issue this worker does not know of. */
  let unsure: string | null = null;
  /**
   * The most issues one claimIssues asks for: all the room there is, halved each time the API refuses the
   * answer's possible size (LIMIT_EXCEEDED: an issue's fields, a long description among them, times the
   * batch, over its maxResponseChars), which it does before claiming anything.
   */
  let claimBatch = concurrency;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (stopping) return resolve(); // a stop() or a refused key while the loop was busy: no wait
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  /** The hold on one issue is gone: tell its handler (the signal's reason: an Error with `reason`, or `reason` itself), and never release it. */
  const lose = (issueId: string, reason: string | Error, only?: Running) => {
    const job = running.get(issueId);
    if (job && (!only || job === only) && !job.releasing && !job.controller.signal.aborted) {
      log("hold lost", { issueId, reason: typeof reason === "string" ? reason : reason.message });
      job.controller.abort(typeof reason === "string" ? new Error(reason) : reason);
    }
  };

  /** The run is gone (RunNotActive): every hold with it. A new run is started by the claim loop. */
  const loseRun = (reason: string | Error) => {
    for (const issueId of running.keys()) lose(issueId, reason);
    run = null;
    wake();
  };

  /** Set once the key is refused (UNAUTHENTICATED) mid-work: what `done` rejects with. */
  let refusedWith: UnauthenticatedError | null = null;
  /** What beforeClaim threw: `done` rejects with it, once the running handlers are done. */
  let cannotWork: { error: unknown } | null = null;

  /**
   * A request (or the ledger watch) failed: if the key was refused, the worker
   * has lost every hold, as if its run were gone (loseRun, with no new run:
   * the key could start none), and stops without another request. True when
   * it was that.
   */
  const refused = (err: unknown): boolean => {
    if (!(err instanceof UnauthenticatedError)) return false;
    if (refusedWith) return true;
    // The server's own words are in `errors` (and the log line): a revoked key often reads as "unknown" to it.
    refusedWith = new UnauthenticatedError("the agent key is no longer accepted (revoked: rotated, or its agent disabled); the worker stopped", err.errors);
    log("key refused: stopping without releasing anything", { error: err.message });
    stopping = true;
    if (heartbeat) clearInterval(heartbeat);
    loseRun(refusedWith);
    return true;
  };

  async function startRun(): Promise<WorkRunFragment> {
    const { startRun: started } = await baton.request(WorkStartRunDocument, {}, { traceContext: ambient });
    const leaseMs = Math.max(1000, Date.parse(started.leaseExpiresAt) - Date.parse(started.lastHeartbeatAt));
    if (heartbeat) clearInterval(heartbeat);
    heartbeat = setInterval(
      () => {
        const current = run;
        if (!current) return;
        baton.request(WorkHeartbeatDocument, { runId: current.id }, { traceContext: heartbeatTrace() }).then(
          ({ heartbeatRun }) => {
            if (heartbeatRun.__typename !== "RunUpdated" && run?.id === current.id) loseRun(`run ${current.id} is no longer active: ${heartbeatRun.message}`);
          },
          (err: unknown) => {
            if (!refused(err)) log("heartbeat failed", { runId: current.id, error: (err as Error).message });
          },
        );
      },
      Math.floor(leaseMs / 3),
    );
    heartbeat.unref?.();
    log("run started", { runId: started.id, leaseMs });
    return started;
  }

  /** Watches the ledger: a checkout that moved away from this run loses its hold; any change may mean new work. */
  /** Checks every running job's hold directly (confirmLoss), for when the ledger cannot say what happened. */
  const checkHolds = (reason: string) => {
    for (const [issueId, job] of running) if (!job.releasing) void confirmLoss(issueId, job, reason);
  };

  /** Ends the waits between the ledger watch's attempts once the worker stops. */
  const halted = new AbortController();

  /**
   * The ledger watch, again after any failure but a refused key: a stream the
   * server refused (too many streams for the key, say) or that broke is
   * opened again after a wait (0.5 s, doubling to 30 s; back to 0.5 s once
   * an event arrives), after the last event it saw, so the ledger replays
   * what happened while it was down; where the ledger cannot (pruned, or no
   * event seen yet) the running jobs' holds are checked directly.
   */
  async function watch(companyId: string, afterSeq: string | undefined, failures = 0): Promise<void> {
    events = baton.lockChanges({ companyId, ...(afterSeq === undefined ? {} : { afterSeq }) });
    let seen = afterSeq;
    try {
      for await (const event of events) {
        failures = 0;
        seen = event.seq;
        const job = running.get(event.issueId);
        if (job && !job.releasing && event.checkoutRunId !== job.runId)
          void confirmLoss(event.issueId, job, `${event.kind}${event.reason ? `: ${event.reason}` : ""}`);
        if (event.status === "OPEN") wake();
      }
    } catch (err) {
      if (refused(err)) return; // the key was revoked: the server ended the stream
      // Retention dropped the events after its place (a connection lost for that long): watch again from now.
      // The events it missed are gone, so the running jobs' holds are checked directly.
      if (err instanceof EventsPrunedError && !stopping) {
        log("live events resume from now: the ledger was pruned past this worker's place", { resumeAfterSeq: err.resumeAfterSeq });
        checkHolds("the hold ended while the ledger was pruned past this worker's place");
        wake();
        return watch(companyId, undefined);
      }
      if (stopping) return;
      const waitMs = Math.min(30_000, 500 * 2 ** failures);
      log("live events stopped; watching again after a wait, polling for work meanwhile", { error: (err as Error).message, waitMs });
      await delay(waitMs, undefined, { signal: halted.signal }).catch(() => {});
      if (stopping) return;
      wake();
      // Resumed after the last event it saw: what happened meanwhile is replayed (only a stream that never saw one starts from now).
      if (seen === undefined) checkHolds("the hold ended while live events were down");
      return watch(companyId, seen, failures + 1);
    }
  }

  /**
   * Whether a release by `runId` should claim the next issue too: the worker
   * goes on, with that run, and is allowed to claim (beforeClaim; a throw
   * stops the worker as a throw before a claim does).
   */
  function claimsNext(runId: string): boolean {
    if (stopping || refusedWith || run?.id !== runId || unsure === runId) return false;
    try {
      options.beforeClaim?.();
      return true;
    } catch (error) {
      cannotWork = { error };
      stopping = true;
      wake();
      return false;
    }
  }

  /**
   * A ledger event says the checkout of a job's issue left its run, but the
   * event may be older than the job: the end of an earlier hold of the same
   * issue by this run (a release whose next claim took it straight back, or a
   * force-release before a claim again). The hold is lost only if the issue is
   * no longer this run's at the job's epoch; a check that cannot be made
   * counts as lost.
   */
  async function confirmLoss(issueId: string, job: Running, reason: string): Promise<void> {
    const held = await baton
      .request(WorkIssueHolderDocument, { id: issueId }, { traceContext: job.life.context })
      .then(({ issue }) => issue?.checkoutRunId === job.runId && issue.lockEpoch === job.lockEpoch)
      .catch(() => false);
    if (!held) lose(issueId, reason, job);
  }

  function launch(issue: WorkIssue, runId: string, life: TraceLife): void {
    life.note({ "baton.issue.id": issue.id, "baton.run.id": runId, "baton.lock_epoch": issue.lockEpoch });
    // This run claimed the issue again while a job of it still runs: that job's hold ended before this claim.
    const earlier = running.get(issue.id);
    if (earlier) {
      lose(issue.id, `claimed again by run ${runId} at epoch ${issue.lockEpoch}: the earlier hold had ended`, earlier);
      replaced.add(earlier);
    }
    const controller = new AbortController();
    const entry: Running = { runId, lockEpoch: issue.lockEpoch, controller, finished: Promise.resolve(), releasing: false, life };
    running.set(issue.id, entry);
    const job: Job = {
      runId,
      lockEpoch: issue.lockEpoch,
      attempt: issue.attemptCount,
      signal: controller.signal,
      createSubIssues: (inputs, options = {}) => createSubIssues(issue.id, runId, life, inputs, options.parentWaits ?? false),
    };
    let claimsNextAsked = false;
    const finished = (async () => {
      let release: Release;
      try {
        // The handler's own spans, if any, nest under the issue; what it returns is the result.
        const result = await context.with(life.context, () => handler(issue, job));
        release = { outcome: "DONE", reason: null, retryAfterSeconds: null, result };
      } catch (err) {
        release = outcomeOf(err);
      }
      if (controller.signal.aborted) return; // not this run's to release any more
      entry.releasing = true;
      const { outcome, reason, retryAfterSeconds } = release;
      const checked = resultOf(release.result);
      if (checked && "why" in checked) log("result not kept", { issueId: issue.id, why: checked.why });
      const result = checked && "result" in checked ? checked.result : null;
      // The slot this job frees is filled in the same request, while the worker goes on with this run.
      claimsNextAsked = claimsNext(runId);
      const next = claimsNextAsked ? { includeUnassigned: options.includeUnassigned ?? false, startExecution: true } : null;
      const send = (withResult: unknown) =>
        baton.request(
          WorkReleaseDocument,
          { runId, issueId: issue.id, outcome, reason, retryAfterSeconds, result: withResult, next },
          { traceContext: life.context },
        );
      const { releaseIssue } = await send(result).catch((err: unknown) => {
        // The server refused the result (its own checks: nesting, NUL…): the release goes without it, nothing having changed.
        if (result === null || !(err instanceof BatonError) || err.code !== "BAD_USER_INPUT") throw err;
        log("result not kept", { issueId: issue.id, why: `the API refused it: ${err.message}` });
        return send(null);
      });
      if (releaseIssue.__typename !== "IssueReleased") {
        log("release refused", { issueId: issue.id, outcome, answer: releaseIssue.__typename, message: releaseIssue.message });
        return;
      }
      log("released", { issueId: issue.id, outcome });
      const claimed = releaseIssue.next?.issue;
      if (!claimed) return;
      if (stopping) {
        // Claimed (and started) as the worker stopped: given back unworked, its attempt with it (REQUEUE with
        // retryAfterSeconds 0 from IN_PROGRESS). A refused key could not: the lease gives it back.
        if (refusedWith) return;
        log("giving back an issue claimed as the worker stopped", { issueId: claimed.id });
        await baton.request(
          WorkReleaseDocument,
          { runId, issueId: claimed.id, outcome: "REQUEUE", reason: "the worker is stopping: not started", retryAfterSeconds: 0 },
          { traceContext: life.context },
        );
        return;
      }
      launch(claimed, runId, TraceLife.start("baton issue", ambient));
    })()
      .catch((err: unknown) => {
        if (refused(err)) return;
        log("release failed", { issueId: issue.id, error: (err as Error).message });
        // A release with next that got no answer may have claimed an issue this worker does not know of.
        if (claimsNextAsked && mayHaveTakenEffect(err)) unsure = runId;
      })
      .finally(() => {
        // A requeued issue may come straight back as its own next: that is a new entry, not this one.
        if (running.get(issue.id) === entry) running.delete(issue.id);
        replaced.delete(entry);
        life.end();
        wake();
      });
    entry.finished = finished;
  }

  /** job.createSubIssues(): the sub-issues, or the problem thrown; a problem that says the hold is gone loses it first. */
  async function createSubIssues(parentId: string, runId: string, life: TraceLife, inputs: CreateIssueInput[], parentWaits: boolean): Promise<WorkIssue[]> {
    const { createSubIssues: answer } = await baton
      .request(WorkCreateSubIssuesDocument, { runId, parentId, inputs, parentWaits }, { traceContext: life.context })
      .catch((err: unknown) => {
        refused(err); // a revoked key: every hold is lost at once
        throw err;
      });
    if (answer.__typename === "SubIssuesCreated") return answer.issues;
    if (answer.__typename === "RunNotActive" && run?.id === runId) loseRun(`run ${runId} is no longer active: ${answer.message}`);
    if (answer.__typename === "NotLockOwner") lose(parentId, answer.message);
    throw new ProblemError(answer);
  }

  /** Claims what there is room for; returns how many issues it started. */
  async function claim(current: WorkRunFragment): Promise<number> {
    const free = concurrency - busy();
    const includeUnassigned = options.includeUnassigned ?? false;
    if (concurrency > 1) {
      // One trace for the batch claim; each claimed issue's life is a part of it.
      const batch = TraceLife.start("baton claim", ambient);
      const limit = Math.min(free, claimBatch);
      try {
        const answer = await baton
          .request(WorkClaimManyDocument, { runId: current.id, limit, includeUnassigned }, { traceContext: batch.context })
          .catch((err: unknown) => {
            if (!(err instanceof BatonError) || err.code !== "LIMIT_EXCEEDED" || limit === 1) throw err;
            return null; // refused before anything was claimed: ask for fewer, below
          });
        if (answer === null) {
          claimBatch = Math.max(1, Math.floor(limit / 2));
          log("claiming fewer issues at once: the API refused an answer that large (maxResponseChars)", { limit: claimBatch });
          return claim(current);
        }
        const { claimIssues } = answer;
        if (claimIssues.__typename === "RunNotActive") {
          loseRun(claimIssues.message);
          return 0;
        }
        if (claimIssues.__typename !== "IssuesClaimed" || refusedWith) return 0; // refused meanwhile: nothing more starts
        for (const issue of claimIssues.issues) launch(issue, current.id, TraceLife.start("baton issue", batch.context));
        return claimIssues.issues.length;
      } finally {
        batch.end();
      }
    }
    // One trace for the issue's life, from the claim that finds it to its release (launch ends it).
    const life = TraceLife.start("baton issue", ambient);
    const traceContext = life.context;
    let launched = false;
    try {
      // Both locks in one request: the issue comes back IN_PROGRESS.
      const { claimIssue } = await baton.request(WorkClaimDocument, { runId: current.id, includeUnassigned }, { traceContext });
      if (claimIssue.__typename === "RunNotActive") {
        loseRun(claimIssue.message);
        return 0;
      }
      if (claimIssue.__typename !== "IssueClaimed") return 0;
      if (refusedWith) return 0; // refused meanwhile: nothing more starts
      launch(claimIssue.issue, current.id, life);
      launched = true;
      return 1;
    } finally {
      if (!launched) life.end();
    }
  }

  async function loop(): Promise<void> {
    const { me } = await baton.request(MeDocument, {}, { traceContext: ambient });
    if (me.role !== "AGENT" || !me.companyId) throw new BatonError("work() needs an agent key", "FORBIDDEN");
    // From the newest event on: a stream that cannot connect at first (refused, cut) still replays what happened
    // meanwhile. Read before the run starts, so that its failure leaves no run behind; unread, the watch starts from now.
    const startSeq = await baton.request(WorkNewestSeqDocument, { companyId: me.companyId }, { traceContext: ambient }).then(
      ({ lockEvents }) => lockEvents[0]?.seq ?? "0",
      (err: unknown) => {
        if (err instanceof UnauthenticatedError) throw err;
        return undefined;
      },
    );
    run = await startRun();
    const watching = watch(me.companyId, startSeq);
    try {
      await claimUntilStopped();
    } catch (err) {
      if (!refused(err)) throw err; // startRun (after a lost run) refused: stop as below
    }
    stopping = true;
    if (!refusedWith) {
      // Drain: running handlers may finish, up to the timeout; then they are told to stop.
      const drained = Promise.all([...running.values(), ...replaced].map((r) => r.finished));
      const timeout = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), options.drainTimeoutMs ?? 30_000).unref?.());
      if ((await Promise.race([drained, timeout])) === "timeout") {
        for (const issueId of running.keys()) lose(issueId, "the worker is stopping");
      }
    }
    if (heartbeat) clearInterval(heartbeat);
    // finishRun releases whatever the run still holds, in the same statement. A refused key could not (and
    // disableAgent has finished its runs): what the run holds comes back with its lease, as a dead run's.
    if (run && !refusedWith) await baton.request(WorkFinishRunDocument, { runId: run.id, status: "SUCCEEDED" }, { traceContext: ambient }).catch(() => {});
    if (!refusedWith) log("run finished", { runId: run?.id });
    halted.abort();
    await events?.return?.();
    await watching;
    if (refusedWith) throw refusedWith;
    if (cannotWork) throw cannotWork.error;
  }

  /** Claims and waits for work until stopping (stop(), `once` with an empty queue, or a refused key). */
  async function claimUntilStopped(): Promise<void> {
    while (!stopping) {
      if (run && unsure === run.id) {
        // It claims nothing more: once its jobs are done, finishRun releases whatever it holds, the unknown
        // issue included, in one statement, and a new run takes over.
        if (busy() > 0) {
          await sleep(options.idleWaitMs ?? 5000);
          continue;
        }
        log("finishing a run whose claim went unanswered (it may hold an issue)", { runId: run.id });
        await baton.request(WorkFinishRunDocument, { runId: run.id, status: "SUCCEEDED" }, { traceContext: ambient }).catch(() => {});
        run = null;
        unsure = null;
      }
      if (!run) {
        // The API away (a cut, a restart): try again after the wait, as a failed claim does. A refused key ends the work.
        run = await startRun().catch((err: unknown) => {
          if (!(err instanceof BatonError) || !PASSING.has(err.code)) throw err;
          log("could not start a run; trying again", { error: err.message });
          return null;
        });
        if (!run) {
          await sleep(options.idleWaitMs ?? 5000);
          continue;
        }
        if (stopping) break; // stopped (or refused) while it started: claim nothing with it
      }
      if (busy() >= concurrency) {
        await sleep(options.idleWaitMs ?? 5000);
        continue;
      }
      try {
        options.beforeClaim?.();
      } catch (error) {
        cannotWork = { error };
        break;
      }
      const current = run;
      let failed = false;
      const started = await claim(current).catch((err: unknown) => {
        failed = true;
        if (refused(err)) return 0;
        log("claim failed", { error: (err as Error).message });
        if (mayHaveTakenEffect(err)) unsure = current.id;
        return 0;
      });
      if (started > 0) continue;
      // With `once`, an empty queue ends the work; a failed claim says nothing of the queue: try again after the wait.
      if (options.once && busy() === 0 && !failed) break;
      await sleep(options.idleWaitMs ?? 5000);
    }
  }

  const done = loop();
  done.catch(() => {});
  return {
    done,
    async stop() {
      stopping = true;
      wake();
      await done;
    },
  };
}
