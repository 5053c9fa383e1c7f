// The recovery sweep (docs/operations.md, The recovery loop): dead runs never strand work.
// Set-based steps, each repeated in bounded batches until nothing is left, so
// a backlog never holds long row locks or blocks live claims: issue rows are
// taken SKIP LOCKED (a row busy with a live claim is left for the next sweep,
// and never counts against a batch), and the one pass that waits for run rows
// (and their agents' rows) waits for each behind a savepoint of its own, all
// of them within a statement's time (TIME_OUT_BUSY_EXPIRED_RUNS). Several
// sweepers may run at once against one database.
import type { Db } from "../../db/client.js";
import { appendEvents, queryOne, queryOneInTransaction, raw, retryingAborts, sql, stampEvent, statement } from "../../db/sql.js";
import type { Sql } from "../../db/sql.js";
import { commitChange } from "../shared/commit.js";
import { wakeDueIssues } from "./wakeDueIssues.js";
import type { EventSink } from "../../domain/types.js";
import { attemptsAfterDeath, exhaustedOpen, recoveredKind, recoverLock, reopenOrEscalate, runIsLive, runLeaseExpired } from "../shared/fragments.js";
import type { LockEvent } from "../../domain/types.js";
import { ATTR, inSpan } from "../../tracing/spans.js";

/** Sweepers take turns per batch on this key, so two recovery processes never race for the same dead locks. */
const SWEEP_LOCK_KEY = 0x6261746f; // "bato"

export interface SweepCounts {
  timedOutRuns: number;
  recoveredIssues: number;
  escalatedIssues: number;
}

export interface SweepOptions {
  batchSize?: number;
  dryRun?: boolean;
  /** Checked between batches: a stop request finishes the current statement, then returns. */
  shouldStop?: () => boolean;
}

/**
 * Invariant: a run is TIMED_OUT only if its lease has expired on the database
 * clock. Its guard (runLeaseExpired) is the exact opposite of the heartbeat's
 * (runLeaseLive), on the same row, so a racing heartbeat either extends the
 * lease first (the run is skipped, or fails the re-check) or finds the run
 * TIMED_OUT and answers RunNotActive. Replayed by test/locks/sweep.test.ts ("a
 * heartbeat racing a sweep at the expiry instant: the lease is extended or the
 * lock recovered, never both"). The agent's row is taken FOR SHARE with its
 * runs, so an agent that disableAgent (or a key rotation) holds is passed over
 * whole, never split between the two: test/locks/disableBesideSweep.test.ts.
 */
const timeOutExpiredRuns = (batch: number) =>
  statement(
    "TIME_OUT_EXPIRED_RUNS",
    timeOutExpired(sql`SELECT r.id FROM heartbeat_runs r JOIN agents a ON a.id = r.agent_id
     WHERE ${raw(runLeaseExpired("r"))}
     ORDER BY r.lease_expires_at LIMIT ${batch}::int
       FOR UPDATE OF r SKIP LOCKED FOR SHARE OF a SKIP LOCKED`),
  );

/** Both time-out statements: `expired` locks the runs to time out; the update re-checks each on its newest version. */
const timeOutExpired = (expired: Sql) => sql`
  WITH expired AS (${expired}), timed_out AS (
    UPDATE heartbeat_runs r SET status = 'TIMED_OUT', finished_at = now()
      FROM expired e WHERE r.id = e.id AND ${raw(runLeaseExpired("r"))}
    RETURNING r.id
  )
  SELECT count(*)::int AS n FROM timed_out`;

/**
 * The expired RUNNING runs left after TIME_OUT_EXPIRED_RUNS (their row, or
 * their agent's, was held by another transaction), read without locking, in
 * id order, for TIME_OUT_BUSY_EXPIRED_RUNS to wait for.
 */
const busyExpiredRuns = (batch: number) =>
  statement(
    "BUSY_EXPIRED_RUNS",
    sql`
  SELECT coalesce(array_agg(x.id::text), '{}') AS ids FROM (
    SELECT r.id FROM heartbeat_runs r
     WHERE ${raw(runLeaseExpired("r"))}
     ORDER BY r.id LIMIT ${batch}::int
  ) x`,
  );

/**
 * Invariant: the busy run's agent row is held FOR SHARE before the run's own
 * row is waited for, in the order disableAgent takes them (agent, then runs):
 * a sweep that meets an agent being disabled waits for it and then finds its
 * runs CANCELLED, and a disable that meets the sweep waits for the sweep's
 * transaction. test/locks/disableBesideSweep.test.ts.
 */
const lockBusyRunAgent = (runId: string) =>
  statement("LOCK_BUSY_RUN_AGENT", sql`SELECT a.id FROM agents a JOIN heartbeat_runs r ON r.agent_id = a.id WHERE r.id = ${runId}::uuid FOR SHARE OF a`);

/**
 * Invariant: TIME_OUT_EXPIRED_RUNS's, for one expired run it skipped because
 * another transaction held its row (most often the dead agent's own claim,
 * which reads its run FOR SHARE): the row is waited for, within a share of
 * BUSY_WAIT_MS behind a savepoint of its own, so such a run is never skipped
 * for ever and a row held longer holds up no other. In id order, each run
 * after its agent (LOCK_BUSY_RUN_AGENT): no deadlock with another sweeper or
 * disableAgent (a cycle with an adoption is aborted and retried). The agents'
 * rows stay FOR SHARE until the busy transaction commits (at most
 * BUSY_WAIT_MS of waits), so a disableAgent or key rotation of those agents
 * waits as long. The lease is re-checked on the newest row version.
 * Replayed by test/locks/sweep.test.ts ("is timed out and its locks freed in
 * one sweep, which waits for its agent's statement (FOR SHARE) instead of
 * skipping it") and test/locks/sweepPastHeldRows.test.ts.
 */
const timeOutBusyExpiredRun = (runId: string) =>
  statement(
    "TIME_OUT_BUSY_EXPIRED_RUNS",
    timeOutExpired(sql`SELECT r.id FROM heartbeat_runs r
     WHERE r.id = ${runId}::uuid AND ${raw(runLeaseExpired("r"))}
       FOR UPDATE`),
  );

/**
 * Invariant: a lock whose run is alive is never
 * touched, and each recovered issue gets exactly one event. Candidates come
 * from the snapshot (held by a terminal or missing run; a dead run stays dead,
 * so a stale candidate is only ever one whose lock moved on), and `locked`
 * re-checks on the newest row version that the lock still points at that same
 * dead run, skipping rows a live transaction holds. The batch's LIMIT counts
 * only the rows `locked` took, so however many rows other sessions hold, a
 * batch takes every other dead lock up to its size. A CLAIMED holder that died
 * spent an attempt; an issue left without one is ESCALATED instead of OPEN.
 * `locked` probes the primary key once per candidate (LATERAL), so a batch
 * never scans the issues table. Replayed by test/locks/sweepPastHeldRows.test.ts.
 */
const recoverDeadLocks = (batch: number) =>
  statement(
    "RECOVER_LOCKS_OF_DEAD_RUNS",
    sql`
  WITH gate AS (SELECT pg_advisory_xact_lock(${SWEEP_LOCK_KEY}::bigint)),
  locked AS (
    SELECT l.id, c.checkout_run_id AS dead_run, h.agent_id, h.status AS run_status
      FROM gate, issues c LEFT JOIN heartbeat_runs h ON h.id = c.checkout_run_id
      CROSS JOIN LATERAL (
        SELECT i.id FROM issues i
         WHERE i.id = c.id AND i.checkout_run_id = c.checkout_run_id
           FOR UPDATE SKIP LOCKED
      ) l
     WHERE c.checkout_run_id IS NOT NULL AND (h.id IS NULL OR h.status <> 'RUNNING')
     LIMIT ${batch}::int
  ),
  changed AS (
    UPDATE issues i
       SET ${raw(recoverLock("i"))}, ${raw(stampEvent("i"))}, updated_at = now()
      FROM locked l WHERE i.id = l.id
    RETURNING i.*, ${raw(recoveredKind("i"))} AS ev_kind,
              l.dead_run AS ev_run_id, l.agent_id AS ev_agent_id,
              CASE WHEN l.run_status IS NULL THEN 'RUN_MISSING'
                   WHEN l.run_status = 'TIMED_OUT' THEN 'LEASE_EXPIRED'
                   ELSE 'RUN_FINISHED' END AS ev_reason
  ),
  ${appendEvents("changed")}
  SELECT (SELECT count(*)::int FROM changed) AS n, (SELECT list FROM events) AS events`,
  );

/**
 * Invariant: an execution held longer than its issue's maxExecutionSeconds
 * ends even while its run heartbeats (docs/lifecycle.md, Runaway executions):
 * the lock is taken back as a dead holder's is (recoverLock: the attempt
 * acquireExecution charged stays spent, backoff applies, ESCALATED without an
 * attempt left), one RECOVERED or ESCALATED event with reason
 * EXECUTION_TIMED_OUT each. Rows another transaction holds are passed over
 * (SKIP LOCKED) and the limit is re-checked on each row's newest version, so
 * a release that landed first wins. The holder learns it as any lost hold.
 */
const recoverRunawayExecutions = (batch: number) =>
  statement(
    "RECOVER_TIMED_OUT_EXECUTIONS",
    sql`
  WITH gate AS (SELECT pg_advisory_xact_lock(${SWEEP_LOCK_KEY}::bigint)),
  locked AS (
    SELECT i.id, i.checkout_run_id AS run_id, h.agent_id FROM gate, issues i
      LEFT JOIN heartbeat_runs h ON h.id = i.checkout_run_id
     WHERE ${raw(executionTimedOut("i"))}
     ORDER BY i.execution_locked_at LIMIT ${batch}::int
       FOR UPDATE OF i SKIP LOCKED
  ),
  changed AS (
    UPDATE issues i SET ${raw(recoverLock("i"))}, ${raw(stampEvent("i"))}, updated_at = now()
      FROM locked l WHERE i.id = l.id AND ${raw(executionTimedOut("i"))}
    RETURNING i.*, ${raw(recoveredKind("i"))} AS ev_kind, l.run_id AS ev_run_id, l.agent_id AS ev_agent_id,
              'EXECUTION_TIMED_OUT' AS ev_reason
  ),
  ${appendEvents("changed")}
  SELECT (SELECT count(*)::int FROM changed) AS n, (SELECT list FROM events) AS events`,
  );

/** Issue `alias` is IN_PROGRESS under an execution lock older than its maxExecutionSeconds (issues_execution_limited_idx). */
const executionTimedOut = (alias: string) =>
  `${alias}.status = 'IN_PROGRESS' AND ${alias}.max_execution_seconds IS NOT NULL
   AND ${alias}.execution_locked_at <= now() - make_interval(secs => ${alias}.max_execution_seconds)`;

/**
 * Invariant: an OPEN issue with no attempt left
 * becomes ESCALATED (e.g. after the board lowered maxAttempts), one event each.
 * Rows another transaction holds are passed over (SKIP LOCKED) before the
 * LIMIT counts, and the guard is re-checked on each row's newest version.
 */
const escalateExhausted = (batch: number) =>
  statement(
    "ESCALATE_EXHAUSTED_OPEN",
    sql`
  WITH gate AS (SELECT pg_advisory_xact_lock(${SWEEP_LOCK_KEY}::bigint)),
  locked AS (
    SELECT i.id FROM gate, issues i
     WHERE ${raw(exhaustedOpen("i"))}
     LIMIT ${batch}::int
       FOR UPDATE OF i SKIP LOCKED
  ),
  changed AS (
    UPDATE issues i SET status = 'ESCALATED', ${raw(stampEvent("i"))}, updated_at = now()
      FROM locked l WHERE i.id = l.id
    RETURNING i.*, 'ESCALATED' AS ev_kind, NULL::uuid AS ev_run_id, NULL::uuid AS ev_agent_id, 'ATTEMPTS_EXHAUSTED' AS ev_reason
  ),
  ${appendEvents("changed")}
  SELECT (SELECT count(*)::int FROM changed) AS n, (SELECT list FROM events) AS events`,
  );

/** A run the sweep would time out. */
export interface RunToTimeOut {
  runId: string;
  companyId: string;
  agentId: string;
  /** Seconds since its lease expired. */
  expiredFor: number;
}

/** An issue whose locks the sweep would free (becomes OPEN) or that it would escalate (becomes ESCALATED). */
export interface IssueToRecover {
  issueId: string;
  companyId: string;
  status: string;
  /** The dead holder: null for an OPEN issue with no attempt left. */
  runId: string | null;
  agentId: string | null;
  /** RUNNING (its lease expired), TIMED_OUT, SUCCEEDED, FAILED, CANCELLED, or MISSING; EXECUTION_TIMED_OUT for a live run's execution past maxExecutionSeconds. */
  runStatus: string | null;
  /** Seconds since the holder's lease expired or it finished (or its execution passed its limit). */
  deadFor: number | null;
  attemptCount: number;
  maxAttempts: number;
  becomes: "OPEN" | "ESCALATED";
}

export interface SweepPreview extends SweepCounts {
  runs: RunToTimeOut[];
  issues: IssueToRecover[];
}

/**
 * What a sweep would do now, changing nothing (for --dry-run): the counts, and
 * the first `limit` runs and issues it would change, with their holders. The
 * issues are those of steps 2 and 3, with the outcome step 2 would give them.
 */
const preview = (limit: number) =>
  statement(
    "PREVIEW_SWEEP",
    sql`
  WITH runs AS (
    SELECT r.id AS "runId", r.company_id AS "companyId", r.agent_id AS "agentId",
           floor(extract(epoch FROM now() - r.lease_expires_at))::int AS "expiredFor"
      FROM heartbeat_runs r WHERE ${raw(runLeaseExpired("r"))}
     ORDER BY r.lease_expires_at LIMIT ${limit}::int
  ), held AS (
    SELECT i.id AS "issueId", i.company_id AS "companyId", i.status::text AS status, i.checkout_run_id AS "runId",
           h.agent_id AS "agentId", coalesce(h.status::text, 'MISSING') AS "runStatus",
           floor(extract(epoch FROM now() - CASE WHEN h.status = 'RUNNING' THEN h.lease_expires_at ELSE h.finished_at END))::int AS "deadFor",
           ${raw(attemptsAfterDeath("i"))} AS "attemptCount", i.max_attempts AS "maxAttempts",
           ${raw(reopenOrEscalate("i", { attempts: attemptsAfterDeath("i") }))}::text AS becomes
      FROM issues i LEFT JOIN heartbeat_runs h ON h.id = i.checkout_run_id
     WHERE i.checkout_run_id IS NOT NULL AND NOT ${raw(runIsLive("h"))}
     ORDER BY i.id LIMIT ${limit}::int
  ), runaway AS (
    SELECT i.id AS "issueId", i.company_id AS "companyId", i.status::text AS status, i.checkout_run_id AS "runId",
           h.agent_id AS "agentId", 'EXECUTION_TIMED_OUT' AS "runStatus",
           floor(extract(epoch FROM now() - i.execution_locked_at) - i.max_execution_seconds)::int AS "deadFor",
           i.attempt_count AS "attemptCount", i.max_attempts AS "maxAttempts", ${raw(reopenOrEscalate("i"))}::text AS becomes
      FROM issues i LEFT JOIN heartbeat_runs h ON h.id = i.checkout_run_id
     WHERE ${raw(executionTimedOut("i"))} AND ${raw(runIsLive("h"))}
     ORDER BY i.id LIMIT ${limit}::int
  ), exhausted AS (
    SELECT i.id AS "issueId", i.company_id AS "companyId", i.status::text AS status, NULL::uuid AS "runId", NULL::uuid AS "agentId",
           NULL::text AS "runStatus", NULL::int AS "deadFor", i.attempt_count AS "attemptCount", i.max_attempts AS "maxAttempts",
           'ESCALATED' AS becomes
      FROM issues i WHERE ${raw(exhaustedOpen("i"))}
     ORDER BY i.id LIMIT ${limit}::int
  )
  SELECT
    (SELECT count(*)::int FROM heartbeat_runs r WHERE ${raw(runLeaseExpired("r"))}) AS "timedOutRuns",
    (SELECT count(*)::int FROM issues i LEFT JOIN heartbeat_runs h ON h.id = i.checkout_run_id
      WHERE i.checkout_run_id IS NOT NULL AND (NOT ${raw(runIsLive("h"))} OR ${raw(executionTimedOut("i"))})) AS "recoveredIssues",
    (SELECT count(*)::int FROM issues i WHERE ${raw(exhaustedOpen("i"))}) AS "escalatedIssues",
    coalesce((SELECT json_agg(runs) FROM runs), '[]') AS runs,
    coalesce((SELECT json_agg(x) FROM (SELECT * FROM held UNION ALL SELECT * FROM runaway UNION ALL SELECT * FROM exhausted) x), '[]') AS issues`,
  );

/** What a sweep would do now, changing nothing: counts, and the first `limit` runs and issues in detail. */
export function previewSweep(db: Db, limit = 100): Promise<SweepPreview> {
  return queryOne<SweepPreview>(db, preview(limit));
}

/** How long TIME_OUT_BUSY_EXPIRED_RUNS waits for run rows in one sweep, all of them together: a statement's time, not an idle session's. */
const BUSY_WAIT_MS = 5_000;

/**
 * The busy expired runs, each waited for behind a savepoint with an even share
 * of what is left of BUSY_WAIT_MS (lock_timeout): a row held longer (an
 * operator's idle transaction, say) is left for the next sweep, and neither
 * the runs after it nor the rest of the sweep wait for it. Returns how many
 * runs it timed out.
 */
async function timeOutBusy(db: Db, batch: number): Promise<number> {
  const { ids } = await queryOne<{ ids: string[] }>(db, busyExpiredRuns(batch));
  if (ids.length === 0) return 0;
  const deadline = Date.now() + BUSY_WAIT_MS;
  return retryingAborts(() =>
    db.$transaction(
      async (tx) => {
        let rows = 0;
        for (const [i, runId] of ids.entries()) {
          // lock_timeout 0 would wait for ever: a spent budget still waits 1 ms.
          const waitMs = Math.max(1, Math.floor((deadline - Date.now()) / (ids.length - i)));
          await tx.$executeRawUnsafe(`SET LOCAL lock_timeout = '${waitMs}ms'`);
          await tx.$executeRawUnsafe("SAVEPOINT busy_run");
          try {
            await queryOneInTransaction(tx, lockBusyRunAgent(runId));
            rows += (await queryOneInTransaction<{ n: number }>(tx, timeOutBusyExpiredRun(runId))).n;
            await tx.$executeRawUnsafe("RELEASE SAVEPOINT busy_run");
          } catch (err) {
            if (!/55P03|lock timeout/.test(JSON.stringify((err as { meta?: unknown })?.meta ?? {}) + String((err as Error)?.message))) throw err;
            await tx.$executeRawUnsafe("ROLLBACK TO SAVEPOINT busy_run");
          }
        }
        return rows;
      },
      { maxWait: 10_000, timeout: 30_000 },
    ),
  );
}

/**
 * One sweep. With tracing on, it is a span ("recovery sweep", a trace of its
 * own) with a child span per step (each step's batches are that step's
 * statement spans) and the counts as attributes.
 */
export function sweep(db: Db, events: EventSink, options: SweepOptions = {}): Promise<SweepCounts> {
  return inSpan("recovery sweep", async (span) => {
    const counts = await sweepSteps(db, events, options);
    span?.setAttributes({
      "baton.timed_out_runs": counts.timedOutRuns,
      "baton.recovered_issues": counts.recoveredIssues,
      "baton.escalated_issues": counts.escalatedIssues,
    });
    return counts;
  });
}

/** A sweep step's batches under one span ("recovery <step>"), with the rows they changed; returns them. */
const step = (name: string, batches: () => Promise<number>) =>
  inSpan(`recovery ${name}`, async (span) => {
    const rows = await batches();
    span?.setAttribute(ATTR.rows, rows);
    return rows;
  });

async function sweepSteps(db: Db, events: EventSink, options: SweepOptions): Promise<SweepCounts> {
  const batch = options.batchSize ?? 1000;
  if (options.dryRun) {
    const { timedOutRuns, recoveredIssues, escalatedIssues } = await previewSweep(db, 0);
    return { timedOutRuns, recoveredIssues, escalatedIssues };
  }
  const stop = options.shouldStop ?? (() => false);
  const counts: SweepCounts = { timedOutRuns: 0, recoveredIssues: 0, escalatedIssues: 0 };
  await step("wake due issues", () => wakeDueIssues(db));
  counts.timedOutRuns += await step("time out expired runs", async () => {
    let rows = 0;
    for (;;) {
      const { n } = await queryOne<{ n: number }>(db, timeOutExpiredRuns(batch));
      rows += n;
      if (n < batch || stop()) return rows;
    }
  });
  counts.timedOutRuns += await step("time out busy expired runs", () => timeOutBusy(db, batch));
  for (const [label, change] of [
    ["recover locks of dead runs", recoverDeadLocks],
    ["end executions past their limit", recoverRunawayExecutions],
    ["escalate exhausted open issues", escalateExhausted],
  ] as const) {
    if (stop()) return counts;
    await step(label, async () => {
      let rows = 0;
      for (;;) {
        const { n, events: appended } = await commitChange<{ n: number; events: LockEvent[] }>({ db, events }, change(batch));
        rows += n;
        for (const e of appended) {
          if (e.kind === "ESCALATED") counts.escalatedIssues++;
          else counts.recoveredIssues++;
        }
        if (n < batch || stop()) return rows;
      }
    });
  }
  return counts;
}
