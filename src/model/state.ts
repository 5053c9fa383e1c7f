// The executable model of the lock protocol (docs/lifecycle.md): the state of
// one company's issues and runs, and the events a change writes.
//
// The model is pure: no I/O, no database, no randomness, no Date. Time is an
// integer clock in the state; a run is live while it is RUNNING and its lease
// lies after the clock (baton_run_is_live). Every verb is a function
// (state, args) → { answer, state, events } that never mutates its input: an
// unchanged state is returned as the very same object, a changed one as a new
// object that shares what did not change.
//
// What the model leaves out, on purpose:
//  - titles, descriptions, timestamps other than the clock, seq numbers;
//  - several companies (one company; another company's ids are "unknown");
//  - setConcurrencyLimit: limits are fixed in the initial state;
//  - the numbers behind keys' turns: only their order is kept (`turns`);
//  - concurrency: every verb is one atomic step, so the races the SQL guards
//    against (SKIP LOCKED, FOR SHARE, a holder the snapshot cannot see) are
//    each one of the model's interleavings, not a state of their own;
//  - retention: runs are never deleted, so a holder is never missing
//    (RUN_MISSING is modelled but unreachable), nor are issues;
//  - seconds: every duration (retryDelaySeconds, retryAfterSeconds,
//    maxExecutionSeconds, notBefore's distance) is in clock units, and the
//    API's limits in seconds (a day of backoff, a week of execution) become
//    clock units through `tickSeconds`; payload and result are kept as given
//    (their size limit is not modelled);
//  - keys and authentication: an agent verb names its agent, and disableAgent
//    only disables it (its keys are not modelled), and a disabled agent's
//    reason is not kept in the state.
import type { IssuePriority, IssueStatus, LockEventKind, ReleaseOutcome, RunStatus } from "../domain/types.js";
import { ISSUE_PRIORITIES } from "../domain/types.js";

export type { IssuePriority, IssueStatus, LockEventKind, ReleaseOutcome, RunStatus };

/** A JSON value a client sent (payload, result): kept as given, never read by a verb. */
export type Json = unknown;

export interface Issue {
  readonly id: string;
  readonly status: IssueStatus;
  readonly priority: IssuePriority;
  readonly assigneeAgentId: string | null;
  /** null: the unkeyed pool (no limit). */
  readonly concurrencyKey: string | null;
  readonly checkoutRunId: string | null;
  readonly executionRunId: string | null;
  readonly attemptCount: number;
  readonly maxAttempts: number;
  readonly lockEpoch: number;
  /** Creation order: claim order's "oldest first". */
  readonly createdAt: number;
  /** The issue this one was split from (createSubIssues, or createIssues with parentId); null for a top-level issue. */
  readonly parentId: string | null;
  /** The issues this one depends on, by id, sorted; no cycle through them ever (docs/invariants.md, 19). */
  readonly blockedBy: readonly string[];
  /** Not claimable before this clock value; null: no delay. */
  readonly notBefore: number | null;
  /** Unique in the company; kept for the issue's life. */
  readonly idempotencyKey: string | null;
  /** The backoff base, in clock units: a failed attempt that reopens the issue delays it retryDelaySeconds × 2^(attemptCount − 1), capped. 0: none. */
  readonly retryDelaySeconds: number;
  /** In clock units; null: no limit. The sweep takes back an execution held this long. */
  readonly maxExecutionSeconds: number | null;
  /** The clock when the execution lock was taken (execution_locked_at); null unless IN_PROGRESS. */
  readonly executionLockedAt: number | null;
  readonly payload: Json;
  /** What the last release with a result said the work produced. */
  readonly result: Json;
}

export interface Run {
  readonly id: string;
  readonly agentId: string;
  readonly status: RunStatus;
  /** Clock value at which the lease runs out: live while leaseExpiresAt > clock. */
  readonly leaseExpiresAt: number;
  readonly finishedAt: number | null;
}

export interface State {
  /** The database clock: advanced only by `tick`. */
  readonly clock: number;
  /** BATON_RUN_LEASE_SECONDS, in clock units: startRun and heartbeatRun set the lease to clock + leaseLength. */
  readonly leaseLength: number;
  /** The company's agents, in creation order (the scheduler tick serves them in this order). */
  readonly agents: readonly string[];
  /**
   * The agents disableAgent disabled and enableAgent has not enabled again, in
   * creation order. (The reason is left out: no verb reads it.)
   */
  readonly disabled: readonly string[];
  /** The company's issues, in id order. */
  readonly issues: readonly Issue[];
  /** The company's runs, in creation order; ids are r1, r2, … */
  readonly runs: readonly Run[];
  /** maxActive of each concurrency key that has a limit. */
  readonly limits: Readonly<Record<string, number>>;
  /**
   * The keys that have been served (one of their issues checked out), least
   * recently served first; "" is the unkeyed pool (UNKEYED), which takes turns
   * only in a company that has named keys (`keyed`). A key never served is
   * not listed, and goes before every listed one.
   */
  readonly turns: readonly string[];
  /** Whether the company has ever had a named key (an issue's or a limit's): from then on the unkeyed pool takes turns too. */
  readonly keyed: boolean;
  /**
   * How many seconds of the database's clock one clock unit stands for (the
   * conformance run's UNIT_SECONDS): the API's limits in seconds (a day of
   * delay, a week of execution) are floor(limit / tickSeconds) clock units.
   */
  readonly tickSeconds: number;
}

/** The unkeyed pool's name among the keys' turns (the SQL's '' row). */
export const UNKEYED = "";

/** One LockEvent: the fields that say what changed (no seq, no time). */
export interface Event {
  readonly issueId: string;
  readonly kind: LockEventKind;
  /** The issue's status after the change. */
  readonly status: IssueStatus;
  readonly runId: string | null;
  readonly agentId: string | null;
  readonly checkoutRunId: string | null;
  readonly executionRunId: string | null;
  readonly reason: string | null;
}

/** What a verb returns: the answer it gives, the state after it, and the events it wrote (none when nothing changed). */
export interface Step<A> {
  readonly answer: A;
  readonly state: State;
  readonly events: readonly Event[];
}

/** CreateIssueInput as the model takes it (titles and descriptions left out; durations and notBefore in clock units). */
export interface CreateInput {
  /** BACKLOG or OPEN (default OPEN). */
  status?: "BACKLOG" | "OPEN";
  priority?: IssuePriority;
  assigneeAgentId?: string | null;
  concurrencyKey?: string | null;
  /** 1–100, default 3. */
  maxAttempts?: number;
  /** createIssues only (createSubIssues sets its own): an issue of the company (in an initial state, one listed before). */
  parentId?: string | null;
  /** At most 100 issues of the company (in an initial state, ones listed before). */
  blockedBy?: readonly string[];
  /** A clock value. */
  notBefore?: number | null;
  /** 1–200 characters. */
  idempotencyKey?: string | null;
  /** 0 to a day (default 0). */
  retryDelaySeconds?: number;
  /** 1 to a week; null or left out: no limit. */
  maxExecutionSeconds?: number | null;
  payload?: Json;
}

/** An issue of an initial state: created as createIssues would, under a name of its own. */
export interface IssueInput extends CreateInput {
  id: string;
}

export interface InitialStateInput {
  agents: readonly string[];
  /** Created in this order (createdAt 0, 1, …), as createIssues does. */
  issues: readonly IssueInput[];
  limits?: Readonly<Record<string, number>>;
  /** Default 2. */
  leaseLength?: number;
  /** Default 3600 (so a day is 24 clock units). */
  tickSeconds?: number;
}

/**
 * A company as createAgent and createIssues leave it: no runs, no events,
 * attempts and epochs 0. Parents and blockers must be issues listed earlier
 * (so the graph has no cycle), idempotency keys distinct.
 */
export function initialState(input: InitialStateInput): State {
  const issues = input.issues.map((i, n): Issue => {
    const maxAttempts = i.maxAttempts ?? 3;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 100) throw new Error(`issue ${i.id}: maxAttempts must be between 1 and 100`);
    if (i.assigneeAgentId != null && !input.agents.includes(i.assigneeAgentId)) throw new Error(`issue ${i.id}: unknown assignee ${i.assigneeAgentId}`);
    const earlier = input.issues.slice(0, n);
    for (const b of [...(i.blockedBy ?? []), ...(i.parentId != null ? [i.parentId] : [])]) {
      if (!earlier.some((e) => e.id === b)) throw new Error(`issue ${i.id}: ${b} must be an issue listed before it`);
    }
    if (i.idempotencyKey != null && earlier.some((e) => e.idempotencyKey === i.idempotencyKey)) throw new Error(`issue ${i.id}: idempotencyKey used twice`);
    return {
      id: i.id,
      status: i.status ?? "OPEN",
      priority: i.priority ?? "MEDIUM",
      assigneeAgentId: i.assigneeAgentId ?? null,
      concurrencyKey: i.concurrencyKey ?? null,
      checkoutRunId: null,
      executionRunId: null,
      attemptCount: 0,
      maxAttempts,
      lockEpoch: 0,
      createdAt: n,
      parentId: i.parentId ?? null,
      blockedBy: [...new Set(i.blockedBy ?? [])].sort(byId),
      notBefore: i.notBefore ?? null,
      idempotencyKey: i.idempotencyKey ?? null,
      retryDelaySeconds: i.retryDelaySeconds ?? 0,
      maxExecutionSeconds: i.maxExecutionSeconds ?? null,
      executionLockedAt: null,
      payload: i.payload ?? null,
      result: null,
    };
  });
  const leaseLength = input.leaseLength ?? 2;
  if (!Number.isInteger(leaseLength) || leaseLength < 1) throw new Error("leaseLength must be a positive integer");
  const tickSeconds = input.tickSeconds ?? 3600;
  if (!Number.isInteger(tickSeconds) || tickSeconds < 1) throw new Error("tickSeconds must be a positive integer");
  return {
    clock: 0,
    leaseLength,
    agents: [...input.agents],
    disabled: [],
    issues: [...issues].sort((a, b) => byId(a.id, b.id)),
    runs: [],
    limits: { ...(input.limits ?? {}) },
    turns: [],
    keyed: issues.some((i) => i.concurrencyKey !== null) || Object.keys(input.limits ?? {}).length > 0,
    tickSeconds,
  };
}

/** Ids compare by code point (as the issues list is kept). */
export const byId = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export const priorityRank = (p: IssuePriority): number => ISSUE_PRIORITIES.indexOf(p);

export const findIssue = (state: State, issueId: string): Issue | undefined => state.issues.find((i) => i.id === issueId);
export const findRun = (state: State, runId: string | null): Run | undefined => (runId === null ? undefined : state.runs.find((r) => r.id === runId));

/** The state with `issue` in place of the issue of the same id. */
export function withIssue(state: State, issue: Issue): State {
  return { ...state, issues: state.issues.map((i) => (i.id === issue.id ? issue : i)), keyed: state.keyed || issue.concurrencyKey !== null };
}

/** The state with `issue` added (a created issue), the list kept in id order. */
export function withNewIssue(state: State, issue: Issue): State {
  return { ...state, issues: [...state.issues, issue].sort((a, b) => byId(a.id, b.id)), keyed: state.keyed || issue.concurrencyKey !== null };
}

/** The state with `run` in place of the run of the same id, or appended when it is new. */
export function withRun(state: State, run: Run): State {
  const exists = state.runs.some((r) => r.id === run.id);
  return { ...state, runs: exists ? state.runs.map((r) => (r.id === run.id ? run : r)) : [...state.runs, run] };
}
