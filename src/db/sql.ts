// Shared SQL pieces for the statements in src/locks/: how rows become JSON
// objects shaped like the GraphQL types, how the event ledger is appended in
// the same statement as the change, and how a statement is run.
import { Prisma } from "../generated/prisma/client.js";
import type { Db } from "./client.js";
import { statementSpan, tracing } from "../tracing/spans.js";

export const sql = Prisma.sql;
export const raw = Prisma.raw;

/**
 * The one place a statement gets its name: the builder that writes the SQL
 * returns it through here. Every statement built with it leads with a comment
 * holding its name, one upper-case name per statement, unique in src/; the
 * lock statements' names are the ones docs/invariants.md and docs/lifecycle.md
 * give (test/docs/statementNames.test.ts). Session commands (SET LOCAL,
 * SAVEPOINT), the migration runner and the health check's `SELECT 1` go unnamed. pg_stat_activity and
 * pg_stat_statements show it; it names the prepared statement
 * (src/db/client.ts) and the statement's span (src/tracing/spans.ts).
 */
export function statement(name: string, text: Sql): Sql {
  if (!/^[A-Z][A-Z_]*$/.test(name)) throw new Error(`a statement name is upper-case words joined by _, not ${name}`);
  return Prisma.sql`${Prisma.raw(`/* ${name} */`)} ${text}`;
}
export type Sql = Prisma.Sql;

type Columns = ReadonlyArray<readonly [field: string, column: string]>;

/** A column is a name, or an expression over the row written with `{row}`. */
function jsonObject(alias: string, columns: Columns): string {
  const value = (c: string) => (c.includes("{row}") ? c.replaceAll("{row}", alias) : `${alias}.${c}`);
  return `json_build_object(${columns.map(([f, c]) => `'${f}', ${value(c)}`).join(", ")})`;
}

/**
 * Issue.ready (docs/lifecycle.md, Ready) of issue `alias`, on the database
 * clock: OPEN, an attempt left, no blocker short of DONE, notBefore null or
 * past. Not the delayed flag, which WAKE_DUE_ISSUES clears a moment after
 * notBefore; claim-next's own predicate is `claimable` (locks/shared/fragments.ts).
 */
export const readyNow = (alias: string) =>
  `(${alias}.status = 'OPEN' AND ${alias}.attempt_count < ${alias}.max_attempts AND ${alias}.waiting_count = 0 AND (${alias}.not_before IS NULL OR ${alias}.not_before <= now()))`;

const ISSUE_COLUMNS: Columns = [
  ["id", "id"],
  ["companyId", "company_id"],
  ["title", "title"],
  ["description", "description"],
  ["status", "status"],
  ["priority", "priority"],
  // '' is the unkeyed pool (prisma/migrations/…_concurrency_keys)
  ["concurrencyKey", "NULLIF({row}.concurrency_key, '')"],
  ["assigneeAgentId", "assignee_agent_id"],
  ["checkoutRunId", "checkout_run_id"],
  ["executionRunId", "execution_run_id"],
  ["executionAgentNameKey", "execution_agent_name_key"],
  ["attemptCount", "attempt_count"],
  ["maxAttempts", "max_attempts"],
  ["lockEpoch", "lock_epoch"],
  ["claimedAt", "claimed_at"],
  ["executionLockedAt", "execution_locked_at"],
  ["createdAt", "created_at"],
  ["updatedAt", "updated_at"],
  ["parentId", "parent_id"],
  ["notBefore", "not_before"],
  ["ready", readyNow("{row}")],
  ["waitingCount", "waiting_count"],
  ["idempotencyKey", "idempotency_key"],
  ["retryDelaySeconds", "retry_delay_seconds"],
  ["maxExecutionSeconds", "max_execution_seconds"],
  ["payload", "payload"],
  ["result", "result"],
];

const RUN_COLUMNS: Columns = [
  ["id", "id"],
  ["companyId", "company_id"],
  ["agentId", "agent_id"],
  ["status", "status"],
  ["startedAt", "started_at"],
  ["lastHeartbeatAt", "last_heartbeat_at"],
  ["leaseExpiresAt", "lease_expires_at"],
  ["finishedAt", "finished_at"],
];

const AGENT_COLUMNS: Columns = [
  ["id", "id"],
  ["companyId", "company_id"],
  ["name", "name"],
  ["nameKey", "name_key"],
  ["createdAt", "created_at"],
  ["disabledAt", "disabled_at"],
  ["disabledReason", "disabled_reason"],
];

const COMPANY_COLUMNS: Columns = [
  ["id", "id"],
  ["name", "name"],
  ["createdAt", "created_at"],
];

const EVENT_COLUMNS: Columns = [
  ["seq", "seq::text"],
  ["companyId", "company_id"],
  ["issueId", "issue_id"],
  ["kind", "kind"],
  ["status", "status"],
  ["runId", "run_id"],
  ["agentId", "agent_id"],
  ["checkoutRunId", "checkout_run_id"],
  ["executionRunId", "execution_run_id"],
  ["reason", "reason"],
  ["at", "at"],
];

/** `json_build_object(...)` of an issues row under `alias`, keys as in GraphQL. */
export const issueJson = (alias: string): Sql => raw(jsonObject(alias, ISSUE_COLUMNS));
/** `json_build_object(...)` of a heartbeat_runs row under `alias`. */
export const runJson = (alias: string): Sql => raw(jsonObject(alias, RUN_COLUMNS));
/** `json_build_object(...)` of a companies row under `alias`. */
export const companyJson = (alias: string): Sql => raw(jsonObject(alias, COMPANY_COLUMNS));
/** `json_build_object(...)` of an agents row under `alias`. */
export const agentJson = (alias: string): Sql => raw(jsonObject(alias, AGENT_COLUMNS));
/** issueJson, or NULL when `alias` is the missing side of an outer join. */
export const issueJsonOrNull = (alias: string): Sql => raw(`CASE WHEN ${alias}.id IS NULL THEN NULL ELSE ${jsonObject(alias, ISSUE_COLUMNS)} END`);
/** runJson plus `live`, for the `run` CTE of the lock statements (RUN_CTE_COLUMNS). */
export const runViewJson = (alias: string): Sql => raw(jsonObject(alias, [...RUN_COLUMNS, ["live", "live"]]));
/** `json_build_object(...)` of a lock_events row under `alias`. */
export const eventJson = (alias: string): Sql => raw(jsonObject(alias, EVENT_COLUMNS));

/**
 * The stamp every issue UPDATE that writes an event must set (the source rows
 * of appendEvents carry it): `last_event_xid` becomes this transaction's xid,
 * and the statement fails as a serialization failure (retried with a newer
 * xid) if the issue's last event came from a younger transaction. That keeps
 * one issue's events in the order they happened (docs/events.md).
 */
export const stampEvent = (alias: string, onlyWhen?: string): string =>
  onlyWhen === undefined
    ? `last_event_xid = baton_event_xid(${alias}.last_event_xid)`
    : `last_event_xid = CASE WHEN ${onlyWhen} THEN baton_event_xid(${alias}.last_event_xid) ELSE ${alias}.last_event_xid END`;

/**
 * The ledger append, as CTEs to put after a CTE named `source` whose rows are
 * the changed issues (all issues columns, or at least id, company_id, status,
 * checkout_run_id, execution_run_id and last_event_xid) plus ev_kind,
 * ev_run_id, ev_agent_id and ev_reason. Defines `events`, the appended rows as
 * JSON in seq order. Several rows for one issue (a claim that also starts
 * execution) are numbered in the order of their kinds (CLAIMED before
 * EXECUTION_ACQUIRED).
 *
 * Invariant: an event's seq is its transaction's xid × 2^20 plus its position
 * in the statement (baton_event_seq), so every event of an older transaction
 * sorts first, and readers, who see only seqs below their snapshot's horizon
 * (baton_event_horizon), never see a seq appear below one they were given.
 * No lock is taken: commits of one company no longer wait for each other.
 * baton_event_seq refuses a source row whose issue was not stamped
 * (stampEvent) by this transaction, so the per-issue order cannot be
 * forgotten. A transaction appends in one statement only: a second would
 * reuse positions, and baton_event_seq refuses it (baton_first_append).
 */
export const appendEvents = (source: string): Sql =>
  raw(`
  appended AS (
    INSERT INTO lock_events (company_id, seq, issue_id, kind, status, run_id, agent_id, checkout_run_id, execution_run_id, reason, at)
    SELECT c.company_id,
           baton_event_seq(c.last_event_xid, row_number() OVER (ORDER BY c.company_id, c.id, c.ev_kind::lock_event_kind) - 1),
           c.id, c.ev_kind::lock_event_kind, c.status, c.ev_run_id, c.ev_agent_id,
           c.checkout_run_id, c.execution_run_id, c.ev_reason, clock_timestamp()
      FROM ${source} c
    RETURNING *
  ),
  events AS (
    SELECT coalesce(json_agg(${jsonObject("a", EVENT_COLUMNS)} ORDER BY a.company_id, a.seq), '[]'::json) AS list FROM appended a
  )`);

/** SQLSTATEs anywhere in an error as the driver adapter wraps it (code, originalCode, cause, meta). */
function sqlStates(err: unknown, depth = 0): string[] {
  if (typeof err !== "object" || err === null || depth > 4) return [];
  const e = err as Record<string, unknown>;
  const own = [e.code, e.originalCode].filter((c): c is string => typeof c === "string");
  return [...own, ...[e.cause, e.meta, e.driverAdapterError].flatMap((inner) => sqlStates(inner, depth + 1))];
}

/**
 * Whether a failed statement certainly changed nothing: PostgreSQL answered it
 * with an error, so it rolled back. Not when the connection failed (no
 * SQLSTATE, or class 08), the server was shut down or the backend terminated
 * (57P01–57P05), or an internal error (class XX): the statement may have
 * committed before the answer was lost. A statement timeout (57014) did not.
 */
export function changedNothing(err: unknown): boolean {
  // SQLSTATEs only: not the driver adapter's own codes (P1001, P2010, …), which say nothing of a commit.
  // Not Node's own codes either (EPIPE is five letters too).
  const states = sqlStates(err).filter((code) => /^[0-9A-Z]{5}$/.test(code) && !/^P[1-9]\d{3}$/.test(code) && !/^E[A-Z]+$/.test(code));
  if (states.length === 0) return false;
  // 40003: statement_completion_unknown.
  return states.every((code) => !code.startsWith("08") && !code.startsWith("XX") && !/^57P0/.test(code) && code !== "40003");
}

/**
 * Whether a statement failed because the database was away: "unreachable"
 * (no connection could be made: nothing ran) or "interrupted" (the connection
 * was lost or the server shut down under it: it may have committed). Null for
 * anything else.
 */
export function unavailability(err: unknown): "unreachable" | "interrupted" | null {
  const text = JSON.stringify((err as { meta?: unknown })?.meta ?? {}) + String((err as { message?: unknown })?.message ?? "");
  if (/DatabaseNotReachable|ECONNREFUSED|Can't reach database server|57P03/.test(text)) return "unreachable";
  const states = sqlStates(err);
  if (states.some((code) => /^(08|57P0[1-5])/.test(code))) return "interrupted";
  if (/Connection terminated|Server has closed the connection|ECONNRESET|EPIPE|socket hang up/i.test(text)) return "interrupted";
  return null;
}

/** A deadlock or serialization failure aborted the statement: it changed nothing and may run again. */
function isRetryable(err: unknown): boolean {
  if (sqlStates(err).some((code) => code === "40P01" || code === "40001")) return true;
  return /deadlock detected|could not serialize access/.test(String((err as { message?: unknown })?.message ?? ""));
}

/**
 * How long a statement PostgreSQL aborted as a conflict may be tried again:
 * at most `tries` in all, the whole within `totalMs`. Between tries it waits
 * a random time up to `baseMs` × 2^(tries so far − 1), capped at `capMs`
 * ("full jitter"): the writers that lost a race spread out instead of meeting
 * again at once.
 */
export interface RetryBudget {
  readonly tries: number;
  readonly baseMs: number;
  readonly capMs: number;
  readonly totalMs: number;
}

/**
 * Enough that 64 claimers cycling through one key's last slots all get answers
 * on a loaded machine (test/db/serializationRetries.test.ts): a try's time is
 * mostly its wait in the key row's lock queue, up to seconds under load, so the
 * time bound is generous and the tries' count is what stops a real livelock.
 */
export const DEFAULT_RETRY_BUDGET: RetryBudget = Object.freeze({ tries: 20, baseMs: 2, capMs: 250, totalMs: 20_000 });

let retryBudget: RetryBudget = DEFAULT_RETRY_BUDGET;

/** Sets the budget every retryingAborts uses from now on (tests, and embedders with their own deadline); returns a function that restores the one before. */
export function setRetryBudget(budget: RetryBudget): () => void {
  if (!(Number.isInteger(budget.tries) && budget.tries >= 1) || !(budget.baseMs >= 0 && budget.capMs >= 0 && budget.totalMs >= 0)) {
    throw new Error(`a retry budget is a whole number of tries of at least 1 and non-negative times, not ${JSON.stringify(budget)}`);
  }
  const before = retryBudget;
  retryBudget = Object.freeze({ ...budget });
  return () => {
    retryBudget = before;
  };
}

/**
 * A statement (or transaction) that PostgreSQL aborted as a conflict every
 * time it was tried within the retry budget. Each abort changed nothing, so
 * neither did this; `cause` is the last abort. The API answers it
 * CONFLICT_RETRY with outcome NOT_APPLIED (src/graphql/errors.ts).
 */
/** A statement's error after which it certainly changed nothing: its retries spent on aborts, or refused by PostgreSQL. */
export function certainlyNotApplied(err: unknown): boolean {
  return err instanceof RetriesExhaustedError || changedNothing(err);
}

export class RetriesExhaustedError extends Error {
  override name = "RetriesExhaustedError";
  constructor(
    readonly tries: number,
    readonly elapsedMs: number,
    cause: unknown,
  ) {
    super(`aborted as a conflict ${tries} times in ${Math.round(elapsedMs)} ms; nothing was changed`, { cause });
  }
}

/**
 * Runs `attempt` again when PostgreSQL aborted it as a deadlock victim or a
 * serialization failure (the keys' trigger at a key's last slot, the ledger
 * stamp behind a younger writer): an aborted statement or transaction changed
 * nothing. Within the retry budget, with jittered waits; past it, throws
 * RetriesExhaustedError. Any other error is thrown as it is.
 */
export async function retryingAborts<T>(attempt: () => Promise<T>): Promise<T> {
  const budget = retryBudget;
  const started = performance.now();
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (!isRetryable(err)) throw err;
      const wait = Math.random() * Math.min(budget.capMs, budget.baseMs * 2 ** (n - 1));
      const elapsed = performance.now() - started;
      if (n >= budget.tries || elapsed + wait > budget.totalMs) throw new RetriesExhaustedError(n, elapsed, err);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

// With tracing on, a statement (statement()) run by these three is a span of its own
// (src/tracing/spans.ts, statementSpan); off, the only cost is tracing().

/** Runs one statement and returns its single result row (retrying an aborted one). */
export async function queryOne<T>(db: Pick<Db, "$queryRaw">, query: Sql): Promise<T> {
  if (tracing()) return statementSpan(query.strings[0], () => retryingAborts(async () => (await db.$queryRaw<T[]>(query))[0] as T));
  return retryingAborts(async () => (await db.$queryRaw<T[]>(query))[0] as T);
}

/** The same inside a transaction: no retry here (the transaction is retried as a whole). */
export async function queryOneInTransaction<T>(tx: Pick<Db, "$queryRaw">, query: Sql): Promise<T> {
  if (tracing()) return statementSpan(query.strings[0], async () => (await tx.$queryRaw<T[]>(query))[0] as T);
  return (await tx.$queryRaw<T[]>(query))[0] as T;
}

export async function queryAll<T>(db: Pick<Db, "$queryRaw">, query: Sql): Promise<T[]> {
  return tracing() ? statementSpan(query.strings[0], () => db.$queryRaw<T[]>(query)) : db.$queryRaw<T[]>(query);
}
