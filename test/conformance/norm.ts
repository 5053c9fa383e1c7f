// The comparable shapes of the conformance run (adapter.ts, conformance.ts):
// model names ↔ database ids, and every answer and state, model or real,
// brought to one shape (`Norm*`) with ids by model name, durations in clock
// units and instants on the model's clock.
//
// Time: one clock unit is UNIT_SECONDS of database time, and `tick` backdates
// every instant of the company by that much (adapter.ts), so an instant T the
// database holds stands for the model's clock + round((T − now) / UNIT_SECONDS).
import { randomUUID } from "node:crypto";
import { isReady, waitingOn } from "../../src/model/index.js";
import type { Event, Issue as ModelIssue, State } from "../../src/model/index.js";

/** One model clock unit, in seconds of database time. A sequence takes far less than this. */
export const UNIT_SECONDS = 3600;

/** A name the model never gives a run: a run that does not exist. */
export const UNKNOWN_RUN = "r-unknown";
export const UNKNOWN_ISSUE = "i-unknown";

/** An issue as an answer shows it. */
export interface NormIssue {
  id: string;
  status: string;
  holder: string | null;
  executor: string | null;
  attemptCount: number;
  maxAttempts: number;
  lockEpoch: number;
  assignee: string | null;
  key: string | null;
  // the work graph (issue 29)
  parent: string | null;
  /** On the model's clock. */
  notBefore: number | null;
  idempotencyKey: string | null;
  /** Clock units. */
  retryDelay: number;
  maxExecution: number | null;
  /** On the model's clock. */
  executionLockedAt: number | null;
  /** Canonical JSON (keys sorted), or null. */
  payload: string | null;
  result: string | null;
}

/** An issue as the state shows it: also its edges, and what the database keeps for readiness (waiting_count, delayed, ready). */
export interface NormStateIssue extends NormIssue {
  blockedBy: string[];
  waitingCount: number;
  delayed: boolean;
  ready: boolean;
}

export type NormAnswer = Record<string, unknown> & { t: string };
export interface NormEvent {
  kind: string;
  status: string;
  reason: string | null;
  run: string | null;
  agent: string | null;
}
export interface NormState {
  issues: NormStateIssue[];
  runs: { id: string; agent: string; status: string }[];
  /** The disabled agents, by model name, sorted. */
  disabled: string[];
  /** Per issue, in order. */
  events: Record<string, NormEvent[]>;
  /** The keys that have been served, least recently first ("" the unkeyed pool): the model's `turns`. */
  turns: string[];
}

/** Model names ↔ database ids for one sequence. */
export class Names {
  readonly toReal = new Map<string, string>();
  readonly toModel = new Map<string, string>();
  bind(model: string, real: string): void {
    this.toReal.set(model, real);
    this.toModel.set(real, model);
  }
  clone(): Names {
    const n = new Names();
    for (const [m, r] of this.toReal) n.bind(m, r);
    return n;
  }
  real(model: string): string {
    let r = this.toReal.get(model);
    if (!r) {
      // a name the database has never seen (r-unknown, i-unknown): a fresh id, the same one each time
      r = randomUUID();
      this.bind(model, r);
    }
    return r;
  }
  /** A real id as the model names it; one never bound shows as `?<id>`, which matches nothing. */
  model(real: string | null | undefined): string | null {
    if (real === null || real === undefined) return null;
    return this.toModel.get(real) ?? `?${real}`;
  }
}

/** JSON with every object's keys sorted (jsonb keeps its own order), or null. */
export function canonicalJson(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const sort = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sort)
      : typeof v === "object" && v !== null
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
          )
        : v;
  return JSON.stringify(sort(value));
}

const byId = <T extends { id: string }>(xs: T[]): T[] => [...xs].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
const sortedNames = (xs: readonly string[]) => [...xs].sort();

/** A model issue in the comparable shape. */
export function normModelIssue(i: ModelIssue): NormIssue {
  return {
    id: i.id,
    status: i.status,
    holder: i.checkoutRunId,
    executor: i.executionRunId,
    attemptCount: i.attemptCount,
    maxAttempts: i.maxAttempts,
    lockEpoch: i.lockEpoch,
    assignee: i.assigneeAgentId,
    key: i.concurrencyKey,
    parent: i.parentId,
    notBefore: i.notBefore,
    idempotencyKey: i.idempotencyKey,
    retryDelay: i.retryDelaySeconds,
    maxExecution: i.maxExecutionSeconds,
    executionLockedAt: i.executionLockedAt,
    payload: canonicalJson(i.payload),
    result: canonicalJson(i.result),
  };
}

/** An issue as the database gives it (issueJson, or the state query's columns), instants as ISO strings or as clock units from now. */
export interface RealIssue {
  id: string;
  status: string;
  checkoutRunId: string | null;
  executionRunId: string | null;
  attemptCount: number;
  maxAttempts: number;
  lockEpoch: number;
  assigneeAgentId: string | null;
  concurrencyKey: string | null;
  parentId: string | null;
  notBefore: string | null;
  idempotencyKey: string | null;
  retryDelaySeconds: number;
  maxExecutionSeconds: number | null;
  executionLockedAt: string | null;
  payload: unknown;
  result: unknown;
}

/** How instants and ids of the database become the model's: ids by name, an instant by `clock` (the model's, now) and `nowMs` (the database's). */
export interface RealView {
  name: (id: string | null) => string | null;
  clock: number;
  nowMs: number;
}

/** An instant of the database on the model's clock. */
export const onClock = (view: RealView, instant: string | null): number | null =>
  instant === null ? null : view.clock + Math.round((Date.parse(instant) - view.nowMs) / (UNIT_SECONDS * 1000));

const units = (seconds: number) => seconds / UNIT_SECONDS;

export function normRealIssue(i: RealIssue, view: RealView): NormIssue {
  const name = view.name;
  return {
    id: name(i.id)!,
    status: i.status,
    holder: name(i.checkoutRunId),
    executor: name(i.executionRunId),
    attemptCount: i.attemptCount,
    maxAttempts: i.maxAttempts,
    lockEpoch: i.lockEpoch,
    assignee: name(i.assigneeAgentId),
    key: i.concurrencyKey,
    parent: name(i.parentId),
    notBefore: onClock(view, i.notBefore),
    idempotencyKey: i.idempotencyKey,
    retryDelay: units(i.retryDelaySeconds),
    maxExecution: i.maxExecutionSeconds === null ? null : units(i.maxExecutionSeconds),
    executionLockedAt: onClock(view, i.executionLockedAt),
    payload: canonicalJson(i.payload),
    result: canonicalJson(i.result),
  };
}

/**
 * An answer's fields as normAnswer reads them: the model's answers and the
 * GraphQL ones share no declared type, and each case reads what its
 * __typename has.
 */
// biome-ignore lint/suspicious/noExplicitAny: model and GraphQL answers have no common type; normAnswer reads each by its __typename
export type AnswerFields = Record<string, any>;

/** How one side names ids and shows an issue and an instant. */
export interface Side {
  name: (id: string | null) => string | null;
  // biome-ignore lint/suspicious/noExplicitAny: a model or a real issue, as `Side` says
  issue: (i: any) => NormIssue;
  instant: (t: number | string | null) => number | null;
}

/** The model's side: its names and its issues as they are. */
export const MODEL_SIDE: Side = { name: (id) => id, issue: normModelIssue, instant: (t) => (t === null ? null : Number(t)) };

/** The database's side, seen from the model's clock `clock` at the database's instant `nowMs`. */
export function realSide(names: { model(id: string | null | undefined): string | null }, clock: number, nowMs: number): Side {
  const view: RealView = { name: (id) => names.model(id), clock, nowMs };
  return { name: view.name, issue: (i: RealIssue) => normRealIssue(i, view), instant: (t) => onClock(view, t === null ? null : String(t)) };
}

/**
 * An answer, model or real, in the comparable shape: __typename and the fields
 * that say what happened (no messages, no timestamps but notBefore's), ids by
 * model name. A DependencyCycle shows its ends and length: among cycles of
 * one length the two sides may walk different ones (conformance checks the
 * real one is a cycle of the model's graph).
 */
export function normAnswer(a: AnswerFields, side: Side): NormAnswer {
  const { name } = side;
  const issue = side.issue;
  const run = (r: { id: string; agentId: string; status: string }) => ({ id: name(r.id), agent: name(r.agentId), status: r.status });
  switch (a.__typename as string) {
    case "IssueClaimed":
      return { t: a.__typename, issue: issue(a.issue), run: name(a.runId ?? a.run?.id), alreadyHeld: a.alreadyHeld, adopted: a.adopted };
    case "IssuesClaimed":
      return { t: a.__typename, issues: byId(a.issues.map(issue)), run: name(a.runId ?? a.run?.id) };
    case "NoIssueAvailable":
      return { t: a.__typename };
    case "CheckoutConflict":
      return {
        t: a.__typename,
        issueId: name(a.issueId),
        status: a.status,
        ownerAgentId: name(a.ownerAgentId),
        ownerRunId: name(a.ownerRunId),
        executionRunId: name(a.executionRunId),
        holderRunIsLive: a.holderRunIsLive,
      };
    case "ExecutionConflict":
      return { t: a.__typename, issueId: name(a.issueId), ownerAgentId: name(a.ownerAgentId), ownerRunId: name(a.ownerRunId) };
    case "UnexpectedStatus":
      return { t: a.__typename, issueId: name(a.issueId), status: a.status, expectedStatuses: [...a.expectedStatuses].sort() };
    case "AttemptsExhausted":
      return { t: a.__typename, issueId: name(a.issueId), attemptCount: a.attemptCount, maxAttempts: a.maxAttempts };
    case "ConcurrencyLimitReached":
      return { t: a.__typename, key: a.key, maxActive: a.maxActive };
    case "IssueWaiting":
      return {
        t: a.__typename,
        issueId: name(a.issueId),
        waitingOn: sortedNames(a.waitingOn.map((id: string) => name(id))),
        notBefore: side.instant(a.notBefore),
      };
    case "DependencyCycle":
      return { t: a.__typename, from: name(a.path[0]), to: name(a.path.at(-1)), length: a.path.length };
    case "DependencyAdded":
    case "DependencyRemoved":
      return { t: a.__typename, issue: issue(a.issue) };
    case "IssuesCreated":
      return { t: a.__typename, issues: a.issues.map(issue) };
    case "SubIssuesCreated":
      return { t: a.__typename, parent: issue(a.parent), issues: a.issues.map(issue) };
    case "NotCheckedOut":
    case "IssueNotFound":
      return { t: a.__typename, issueId: name(a.issueId) };
    case "NotLockOwner":
      return { t: a.__typename, issueId: name(a.issueId), ownerRunId: name(a.ownerRunId) };
    case "RunNotActive":
      return { t: a.__typename, runId: name(a.runId), status: a.status };
    case "InvalidTransition":
      return { t: a.__typename, issueId: name(a.issueId), from: a.from, to: a.to };
    case "ExecutionAcquired":
      return { t: a.__typename, issue: issue(a.issue), alreadyHeld: a.alreadyHeld };
    case "IssueReleased":
      // releaseIssue with next (issue 31): the claim that followed, or null; left out without next
      return {
        t: a.__typename,
        issue: issue(a.issue),
        ...(a.next === undefined ? {} : { next: a.next === null ? null : normAnswer({ ...a.next, __typename: "IssueClaimed" }, side) }),
      };
    case "IssueUpdated":
      return { t: a.__typename, issue: issue(a.issue) };
    case "IssuesReleased":
      return {
        t: a.__typename,
        issues: byId(a.issues.map(issue)),
        refused: a.refused.map((r: AnswerFields) => normAnswer(r, side)),
      };
    case "RunUpdated":
    case "HeartbeatRun":
      return { t: a.__typename, run: run(a.run) };
    case "Agent":
      // the model's AgentAnswer, or the real Agent row (disabledAt set while disabled)
      return {
        t: a.__typename,
        agent: name(a.agentId ?? a.id),
        disabled: "disabled" in a ? a.disabled : a.disabledAt !== null,
        disabledReason: a.disabledReason,
      };
    case "HeartbeatTick":
      return {
        t: a.__typename,
        runs: a.runs.map(run).sort((x: { agent: string }, y: { agent: string }) => (x.agent < y.agent ? -1 : 1)),
        claims: a.claims
          .map((c: AnswerFields) => normAnswer({ ...c, __typename: "IssueClaimed" }, side))
          .sort((x: { run: string }, y: { run: string }) => (x.run < y.run ? -1 : 1)),
      };
    case "SweepCounts":
      return { t: a.__typename, timedOutRuns: a.timedOutRuns, recoveredIssues: a.recoveredIssues, escalatedIssues: a.escalatedIssues };
    case "Ticked":
      return { t: a.__typename };
    case "Error":
      return { t: "Error", code: a.code };
    default:
      return { t: `unexpected ${String(a.__typename)}` };
  }
}

/** The model's state and its events so far, in the comparable shape. */
export function normModelState(s: State, events: readonly Event[]): NormState {
  const perIssue: Record<string, NormEvent[]> = {};
  for (const e of events) {
    perIssue[e.issueId] ??= [];
    perIssue[e.issueId]!.push({ kind: e.kind, status: e.status, reason: e.reason, run: e.runId, agent: e.agentId });
  }
  return {
    issues: s.issues.map((i) => ({
      ...normModelIssue(i),
      blockedBy: sortedNames(i.blockedBy),
      waitingCount: waitingOn(s, i).length,
      delayed: i.notBefore !== null && i.notBefore > s.clock,
      ready: isReady(s, i),
    })),
    runs: s.runs.map((r) => ({ id: r.id, agent: r.agentId, status: r.status })),
    disabled: [...s.disabled].sort(),
    events: perIssue,
    turns: [...s.turns],
  };
}
