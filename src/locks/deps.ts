import type { Db, Queryable } from "../db/client.js";
import { queryOne, raw, sql } from "../db/sql.js";
import type { Sql } from "../db/sql.js";
import type { AgentActor, LockEvent, Run, RunNotActive, RunView } from "./types.js";
import { ForbiddenError, runNotActive } from "./types.js";

/** Where committed events go: the pub/sub fan-out. Never throws. */
export interface EventSink {
  publish(events: readonly LockEvent[]): void;
}

/** What every lock verb needs. No GraphQL in here. */
export interface LockDeps {
  readonly db: Db;
  readonly events: EventSink;
  readonly leaseSeconds: number;
  /**
   * Group commit (groupCommit.ts) for the single-issue agent statements; the
   * API sets it up (groups.ts). Without it every request is its own statement.
   */
  readonly groups?: LockGroups;
}

/**
 * What one grouped statement needs: something to run SQL on (the client, or a
 * transaction) and somewhere to publish what it committed.
 */
export interface StatementDeps {
  readonly db: Queryable;
  readonly events: EventSink;
}

/** A GroupCommit, as the verbs see it. */
export interface Grouped<Req, Ans> {
  submit(companyId: string, request: Req): Promise<Ans>;
}

/** Filled in by groups.ts; typed loosely here to keep deps.ts free of the verbs. */
export interface LockGroups {
  readonly claim: Grouped<import("./claimNext.js").ClaimRequest, import("./claimNext.js").ClaimAnswer>;
  readonly acquire: Grouped<import("./acquireExecution.js").AcquireRequest, import("./acquireExecution.js").AcquireAnswer>;
  readonly release: Grouped<import("./releaseIssues.js").ReleaseRequest, import("./releaseIssues.js").ReleaseAnswer>;
}

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

/** A run row with its liveness on the database clock (the one definition of "dead": baton_run_is_live). */
export const RUN_CTE_COLUMNS = `r.*, baton_run_is_live(r.status, r.lease_expires_at) AS live`;

/**
 * The `run` CTE of the agent mutations: the named run, if it is in the
 * caller's company, with its liveness. Statements that can take a new lock
 * read it FOR SHARE, so that finishRun and the recovery sweep (which update
 * the run row first) either wait for them or make them see a dead run.
 */
export const runCte = (runId: string, actor: AgentActor, forShare: boolean) => sql`
    run AS (
      SELECT ${raw(RUN_CTE_COLUMNS)} FROM heartbeat_runs r
       WHERE r.id = ${runId}::uuid AND r.company_id = ${actor.companyId}::uuid
       ${raw(forShare ? "FOR SHARE" : "")}
    )`;

/**
 * The `cur` CTE: the named issues of the caller's company, locked FOR UPDATE
 * (in id order, so that statements locking several never deadlock) and read
 * at their newest version, so a verdict made on them cannot go stale before
 * the change. Nothing is locked unless the run may act.
 */
export const lockedIssuesCte = (actor: AgentActor, issueIds: readonly string[]) => sql`
    cur AS (
      SELECT i.* FROM issues i
       WHERE i.id = ANY(${[...issueIds]}::uuid[]) AND i.company_id = ${actor.companyId}::uuid
         AND EXISTS (SELECT 1 FROM run WHERE run.live AND run.agent_id = ${actor.agentId}::uuid)
       ORDER BY i.id
         FOR UPDATE
    )`;

/**
 * Where an issue goes when its hold ends without DONE/BLOCKED: back to OPEN,
 * or ESCALATED when it has no attempt left (docs/lifecycle.md, Attempts: an exhausted issue
 * never returns to OPEN).
 */
export const reopenOrEscalate = (alias: string) =>
  `(CASE WHEN ${alias}.attempt_count >= ${alias}.max_attempts THEN 'ESCALATED' ELSE 'OPEN' END)::issue_status`;

/** Both locks and their details, cleared together (the issues_lock_pair CHECK insists). */
export const CLEAR_LOCKS = `checkout_run_id = NULL, execution_run_id = NULL, execution_agent_name_key = NULL, execution_locked_at = NULL`;

/** A run as the API shows it (without the statement's liveness flag). */
export function withoutLive(run: RunView): Run {
  const { live: _live, ...rest } = run;
  return rest;
}

/**
 * The `cur` CTE of the board's statements: one issue of the board's company,
 * locked FOR UPDATE and read at its newest version.
 */
export const boardLockedIssueCte = (companyId: string, issueId: string) => sql`
    cur AS (
      SELECT i.* FROM issues i
       WHERE i.id = ${issueId}::uuid AND i.company_id = ${companyId}::uuid
         FOR UPDATE
    )`;

/**
 * The `run` CTE of the grouped statements: the runs a `req` CTE names, in the
 * company, with their liveness; FOR SHARE in id order when the statement can
 * take a new lock (see runCte).
 */
export const requestedRunsCte = (companyId: string, forShare: boolean) => sql`
    run AS (
      SELECT ${raw(RUN_CTE_COLUMNS)} FROM heartbeat_runs r
       WHERE r.id IN (SELECT run_id FROM req) AND r.company_id = ${companyId}::uuid
       ${raw(forShare ? "ORDER BY r.id FOR SHARE" : "")}
    )`;

/**
 * The `cur` CTE of the grouped statements: the issues a `req` CTE names whose
 * request comes from a live run of its own agent, locked FOR UPDATE in id
 * order and read at their newest version.
 */
export const requestedIssuesCte = (companyId: string) => sql`
    cur AS (
      SELECT i.* FROM issues i
       WHERE i.id IN (SELECT q.issue_id FROM req q JOIN run r ON r.id = q.run_id AND r.agent_id = q.agent_id AND r.live)
         AND i.company_id = ${companyId}::uuid
       ORDER BY i.id
         FOR UPDATE
    )`;

/**
 * The one way a lock change is committed: runs a statement that appends its
 * events to the ledger (appendEvents) and returns them as `events`, and, once
 * it has committed, publishes them. No verb publishes by hand, so none can
 * forget to, and none can publish before its commit.
 */
export async function commitChange<T extends { events: LockEvent[] }>(deps: Pick<StatementDeps, "db" | "events">, statement: Sql): Promise<T> {
  const row = await queryOne<T>(deps.db, statement);
  deps.events.publish(row.events);
  return row;
}

/** The same for a change made in a transaction of several statements (finishRun): `work` returns the events, or null for no change. */
export async function commitTransaction<T extends { events: LockEvent[] }>(deps: Pick<StatementDeps, "events">, work: () => Promise<T | null>): Promise<T | null> {
  const done = await work();
  if (done) deps.events.publish(done.events);
  return done;
}

/**
 * Runs a grouped statement (one that returns `runs`, keyed by id, and one
 * answer per request naming its `runId`), commits and publishes its events
 * (commitChange), and returns the answers in request order, each with its run.
 */
export async function answerEach<A>(
  deps: StatementDeps,
  statement: Sql,
): Promise<(A & { run: RunView | null })[]> {
  const row = await commitChange<{ runs: Record<string, RunView> | null; answers: (A & { runId: string })[]; events: LockEvent[] }>(deps, statement);
  return row.answers.map(({ runId, ...answer }) => ({ ...(answer as A), run: row.runs?.[runId] ?? null }));
}
