// Heartbeat runs: an agent's unit of liveness. A run holds locks only while it
// is RUNNING and its lease (on the database clock) lies in the future. Here
// too the checks every agent mutation makes on the run it names (refuseRun).
import type { Db } from "../../db/client.js";
import { appendEvents, queryOne, queryOneInTransaction, raw, retryingAborts, runJson, sql, stampEvent, statement } from "../../db/sql.js";
import { commitTransaction } from "../shared/commit.js";
import type { LockDeps } from "../shared/deps.js";
import { CLEAR_LOCKS, reopenOrEscalate, runLeaseExpired, runLeaseLive } from "../shared/fragments.js";
import type { AgentActor, RunNotActive, RunResult, RunView } from "../shared/types.js";
import type { LockEvent, Run, RunStatus } from "../../domain/types.js";
import { AgentDisabledError, ForbiddenError, InvalidInputError } from "../../domain/errors.js";
import { runNotActive } from "../shared/types.js";

/**
 * The checks every agent mutation makes on the run it names, in order: a run
 * that does not exist in the caller's company is RunNotActive (status null);
 * another agent's run is FORBIDDEN; a dead run is RunNotActive. Returns null
 * when the run may act. The statements evaluate the same conditions in SQL and
 * change nothing unless all pass, so this only explains a refusal.
 */
export function refuseRun(run: RunView | null, runId: string, actor: AgentActor): RunNotActive | null {
  if (run === null) return runNotActive(runId, null);
  if (run.agentId !== actor.agentId) throw new ForbiddenError(`run ${runId} belongs to another agent`);
  if (!run.live) return runNotActive(runId, run.status);
  return null;
}

/** A run as the API shows it (without the statement's liveness flag). */
export function withoutLive(run: RunView): Run {
  const { live: _live, ...rest } = run;
  return rest;
}

const lease = (seconds: number) => sql`now() + make_interval(secs => ${seconds}::int)`;

/**
 * A RUNNING run for the calling agent, its lease from the database
 * clock. Invariant: a disabled agent gets no run. The agent row is read FOR
 * SHARE: disableAgent locks it FOR UPDATE before it ends the agent's runs, so
 * a run is either started before (and ended by it) or refused after.
 */
export async function startRun(deps: Pick<LockDeps, "db" | "leaseSeconds">, actor: AgentActor): Promise<Run> {
  const row = await queryOne<{ run: Run | null }>(
    deps.db,
    statement(
      "START_RUN",
      sql`
      WITH agent AS (
        SELECT a.id, a.company_id FROM agents a
         WHERE a.id = ${actor.agentId}::uuid AND a.company_id = ${actor.companyId}::uuid AND a.disabled_at IS NULL
           FOR SHARE
      ), started AS (
        INSERT INTO heartbeat_runs (company_id, agent_id, status, lease_expires_at)
        SELECT a.company_id, a.id, 'RUNNING', ${lease(deps.leaseSeconds)} FROM agent a
        RETURNING *
      )
      SELECT (SELECT ${runJson("s")} FROM started s) AS run`,
    ),
  );
  if (!row.run) throw new AgentDisabledError("this agent is disabled: it may not start runs");
  return row.run;
}

/**
 * Explains why a run could not act, after the guarded statement changed
 * nothing. With `record` (heartbeatRun only; docs/lifecycle.md, decision 10) an expired
 * RUNNING run is written down as TIMED_OUT, which only records what the clock
 * already says; its locks stay where they are until adoption or recovery.
 * Otherwise nothing is written, and such a run is reported TIMED_OUT all the same.
 */
async function diagnose(db: Db, actor: AgentActor, runId: string, record: boolean): Promise<RunResult> {
  const row = await queryOne<{ run: Run | null }>(
    db,
    statement(
      "DIAGNOSE_RUN",
      sql`
      WITH timed_out AS (
        UPDATE heartbeat_runs r SET status = 'TIMED_OUT', finished_at = now()
         WHERE ${record}::boolean
           AND r.id = ${runId}::uuid AND r.company_id = ${actor.companyId}::uuid AND r.agent_id = ${actor.agentId}::uuid
           AND ${raw(runLeaseExpired("r"))}
        RETURNING *
      ),
      -- read at its newest version (a locking read): a statement that changed
      -- the run after this one's snapshot (disableAgent cancelling it) made the
      -- update above skip it, and the snapshot would still say RUNNING
      newest AS (
        SELECT r.* FROM heartbeat_runs r WHERE r.id = ${runId}::uuid AND r.company_id = ${actor.companyId}::uuid
           FOR SHARE
      )
      SELECT coalesce((SELECT ${runJson("t")} FROM timed_out t), (SELECT ${runJson("n")} FROM newest n)) AS run`,
    ),
  );
  if (!row.run) return runNotActive(runId, null);
  if (row.run.agentId !== actor.agentId) throw new ForbiddenError(`run ${runId} belongs to another agent`);
  const expired = row.run.status === "RUNNING"; // the guarded statement found it RUNNING but not live: its lease has run out
  return runNotActive(runId, expired ? "TIMED_OUT" : row.run.status);
}

/**
 * Invariant: a lease is extended only while it has not expired (runLeaseLive).
 * The recovery sweep times runs out with the opposite guard on the same row,
 * so of a heartbeat and a sweep racing at the expiry instant exactly one wins:
 * the lease is extended (lock kept) or the run is TIMED_OUT (RunNotActive),
 * never both (test/locks/sweep.test.ts, "a heartbeat racing a sweep at the
 * expiry instant: the lease is extended or the lock recovered, never both").
 */
export async function heartbeatRun(deps: Pick<LockDeps, "db" | "leaseSeconds">, actor: AgentActor, runId: string): Promise<RunResult> {
  const row = await queryOne<{ run: Run | null }>(
    deps.db,
    statement(
      "EXTEND_LEASE_IF_LIVE",
      sql`
      WITH beat AS (
        UPDATE heartbeat_runs r SET last_heartbeat_at = now(), lease_expires_at = ${lease(deps.leaseSeconds)}
         WHERE r.id = ${runId}::uuid AND r.company_id = ${actor.companyId}::uuid AND r.agent_id = ${actor.agentId}::uuid
           AND ${raw(runLeaseLive("r"))}
        RETURNING *
      )
      SELECT (SELECT ${runJson("b")} FROM beat b) AS run`,
    ),
  );
  if (row.run) return { __typename: "RunUpdated", run: row.run };
  return diagnose(deps.db, actor, runId, true);
}

/** Room for a busy pool: a finishRun that cannot start would leave its locks to the lease. */
const TRANSACTION_LIMITS = { maxWait: 10_000, timeout: 30_000 };

const FINAL_RUN_STATUSES: readonly RunStatus[] = ["SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"];

/**
 * FINISH_IF_LIVE then RELEASE_ALL_HELD_BY_RUN, in one transaction. The run row
 * is updated first: claims read the run FOR SHARE, so once this update has its
 * row lock no new lock can be taken by the run, and the second statement (a
 * fresh snapshot) sees every issue the run managed to claim before. Each
 * released issue gets one RELEASED event with reason RUN_FINISHED.
 */
export async function finishRun(deps: LockDeps, actor: AgentActor, runId: string, status: RunStatus): Promise<RunResult> {
  if (!FINAL_RUN_STATUSES.includes(status)) {
    throw new InvalidInputError(`status must be one of ${FINAL_RUN_STATUSES.join(", ")}`);
  }
  const finished = await commitTransaction(deps, () =>
    retryingAborts(() =>
      deps.db.$transaction(async (tx) => {
        const run = await queryOneInTransaction<{ run: Run | null }>(
          tx,
          statement(
            "FINISH_IF_LIVE",
            sql`
        WITH finished AS (
          UPDATE heartbeat_runs r SET status = ${status}::run_status, finished_at = now()
           WHERE r.id = ${runId}::uuid AND r.company_id = ${actor.companyId}::uuid AND r.agent_id = ${actor.agentId}::uuid
             AND ${raw(runLeaseLive("r"))}
          RETURNING *
        )
        SELECT (SELECT ${runJson("f")} FROM finished f) AS run`,
          ),
        );
        if (!run.run) return null;
        const released = await releaseAllHeldBy(tx, actor.companyId, runId, actor.agentId, "RUN_FINISHED");
        return { run: run.run, events: released };
      }, TRANSACTION_LIMITS),
    ),
  );
  if (!finished) return diagnose(deps.db, actor, runId, false);
  return { __typename: "RunUpdated", run: finished.run };
}

/**
 * Every issue whose checkout the run holds goes back
 * to OPEN (or ESCALATED when exhausted), both locks cleared; a voluntary end
 * costs no attempt. Used by finishRun, whose run row is already terminal.
 */
async function releaseAllHeldBy(db: Pick<Db, "$queryRaw">, companyId: string, runId: string, agentId: string, reason: string): Promise<LockEvent[]> {
  const row = await queryOneInTransaction<{ events: LockEvent[] }>(
    db,
    statement(
      "RELEASE_ALL_HELD_BY_RUN",
      sql`
      WITH held AS (
        -- locked in id order, like every statement that locks several issues
        SELECT i.id FROM issues i
         WHERE i.checkout_run_id = ${runId}::uuid AND i.company_id = ${companyId}::uuid
         ORDER BY i.id
           FOR UPDATE
      ),
      changed AS (
        UPDATE issues i
           SET status = ${raw(reopenOrEscalate("i"))}, ${raw(CLEAR_LOCKS)}, ${raw(stampEvent("i"))}, updated_at = now()
          FROM held h
         WHERE i.id = h.id AND i.checkout_run_id = ${runId}::uuid
        RETURNING i.*, 'RELEASED' AS ev_kind, ${runId}::uuid AS ev_run_id, ${agentId}::uuid AS ev_agent_id, ${reason}::text AS ev_reason
      ),
      ${appendEvents("changed")}
      SELECT (SELECT list FROM events) AS events`,
    ),
  );
  return row.events;
}
