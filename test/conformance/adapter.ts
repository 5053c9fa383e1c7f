// The real side of the conformance run (issue 17, part 3): the model's
// commands (src/model/commands.ts) run through the real lock verbs of
// src/locks, called as src/graphql/mutations.ts calls them, over a real
// PostgreSQL database. Ids are mapped between the model's names (agents A, B;
// issues i1, i2, …; runs r1, r2, …) and the database's UUIDs, and every answer
// and state is brought to one comparable shape (`Norm*`) on both sides.
//
// Time: the model's clock moves by `tick`; here a tick backdates every lease of
// the company by one clock unit (UNIT_SECONDS), and a run's lease is
// leaseLength units, so a lease runs out on the same tick on both sides.
//
// Two connections ("instances"): every command runs on instance 0, except the
// second command of a concurrent pair, which runs on instance 1.
import { randomUUID } from "node:crypto";
import pg from "pg";
import { createAgent, createCompany } from "../../src/auth/accounts.js";
import { connectDb } from "../../src/db/client.js";
import type { DbHandle } from "../../src/db/client.js";
import { ForbiddenError, InvalidInputError, NotFoundError } from "../../src/domain/errors.js";
import { acquireExecution } from "../../src/locks/execution/acquireExecution.js";
import { claimIssue } from "../../src/locks/claim/claimIssue.js";
import { claimIssues } from "../../src/locks/claim/claimIssues.js";
import { setConcurrencyLimit } from "../../src/locks/operator/concurrencyLimits.js";
import { createIssues } from "../../src/locks/operator/createIssues.js";
import type { LockDeps } from "../../src/locks/shared/deps.js";
import { disableAgent, enableAgent } from "../../src/locks/operator/disableAgent.js";
import { forceReleaseIssue } from "../../src/locks/operator/forceReleaseIssue.js";
import { releaseIssue } from "../../src/locks/release/releaseIssue.js";
import { releaseIssues } from "../../src/locks/release/releaseIssues.js";
import { finishRun, heartbeatRun, startRun } from "../../src/locks/runs/runs.js";
import { tickScheduler } from "../../src/locks/runs/schedulerTick.js";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { updateIssue } from "../../src/locks/operator/updateIssue.js";
import type { AgentActor } from "../../src/locks/shared/types.js";
import { describe } from "../../src/model/index.js";
import type { Answer, Command, Event, InitialStateInput, Issue as ModelIssue, State } from "../../src/model/index.js";

/** One model clock unit, in seconds of database time. A sequence takes far less than this. */
export const UNIT_SECONDS = 3600;

/** A name the model never gives a run: a run that does not exist. */
export const UNKNOWN_RUN = "r-unknown";
export const UNKNOWN_ISSUE = "i-unknown";

// ---- the comparable shapes ----

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
  issues: NormIssue[];
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

type AnyIssue = {
  id: string;
  status: string;
  checkoutRunId: string | null;
  executionRunId: string | null;
  attemptCount: number;
  maxAttempts: number;
  lockEpoch: number;
  assigneeAgentId: string | null;
  concurrencyKey: string | null;
};

const normIssue = (i: AnyIssue, name: (id: string | null) => string | null): NormIssue => ({
  id: name(i.id)!,
  status: i.status,
  holder: name(i.checkoutRunId),
  executor: name(i.executionRunId),
  attemptCount: i.attemptCount,
  maxAttempts: i.maxAttempts,
  lockEpoch: i.lockEpoch,
  assignee: name(i.assigneeAgentId),
  key: i.concurrencyKey,
});

const byId = <T extends { id: string }>(xs: T[]): T[] => [...xs].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

/**
 * An answer's fields as normAnswer reads them: the model's answers and the
 * GraphQL ones share no declared type, and each case reads what its
 * __typename has.
 */
// biome-ignore lint/suspicious/noExplicitAny: model and GraphQL answers have no common type; normAnswer reads each by its __typename
type AnswerFields = Record<string, any>;

/**
 * An answer, model or real, in the comparable shape: __typename and the fields
 * that say what happened (no messages, no timestamps), ids by model name.
 * `name` maps an id to its model name (identity on the model side).
 */
export function normAnswer(a: AnswerFields, name: (id: string | null) => string | null): NormAnswer {
  const issue = (i: AnyIssue) => normIssue(i, name);
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
    case "IssueUpdated":
      return { t: a.__typename, issue: issue(a.issue) };
    case "IssuesReleased":
      return {
        t: a.__typename,
        issues: byId(a.issues.map(issue)),
        refused: a.refused.map((r: AnswerFields) => normAnswer(r, name)),
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
          .map((c: AnswerFields) => normAnswer({ ...c, __typename: "IssueClaimed" }, name))
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

const ident = (id: string | null) => id;

/** The model's state and its events so far, in the comparable shape. */
export function normModelState(s: State, events: readonly Event[]): NormState {
  const perIssue: Record<string, NormEvent[]> = {};
  for (const e of events) {
    perIssue[e.issueId] ??= [];
    perIssue[e.issueId]!.push({ kind: e.kind, status: e.status, reason: e.reason, run: e.runId, agent: e.agentId });
  }
  return {
    issues: s.issues.map((i: ModelIssue) => normIssue(i, ident)),
    runs: s.runs.map((r) => ({ id: r.id, agent: r.agentId, status: r.status })),
    disabled: [...s.disabled].sort(),
    events: perIssue,
    turns: [...s.turns],
  };
}

/** What the real verbs answered, before normalisation. */
export type RealAnswer = AnswerFields & { __typename: string };

export interface Instance {
  handle: DbHandle;
  /** Rebuilt for each sequence: its lease is the sequence's leaseLength clock units. */
  deps: LockDeps;
}

/** One database, two instances (connections) and a plain client for arranging and reading rows. */
export class RealWorld {
  private constructor(
    readonly url: string,
    readonly instances: [Instance, Instance],
    readonly admin: pg.Client,
  ) {}

  static async connect(url: string, leaseUnits = 2): Promise<RealWorld> {
    const instance = (n: number): Instance => {
      const handle = connectDb(url, 2, `baton-conformance-${n}`);
      return { handle, deps: { db: handle.prisma, events: { publish: () => {} }, leaseSeconds: leaseUnits * UNIT_SECONDS } };
    };
    const admin = new pg.Client({ connectionString: url, application_name: "baton-conformance-admin" });
    admin.on("error", () => {});
    await admin.connect();
    return new RealWorld(url, [instance(0), instance(1)], admin);
  }

  async close(): Promise<void> {
    await Promise.all(this.instances.map((i) => i.handle.close()));
    await this.admin.end().catch(() => {});
  }

  /**
   * A fresh company for one sequence, as the model's initial state describes
   * it; the previous sequence's company is emptied first, so that a sweep
   * (which serves every company) sees this sequence's rows only.
   */
  async setup(input: InitialStateInput): Promise<Sequence> {
    await this.admin.query("DELETE FROM issues; DELETE FROM heartbeat_runs");
    for (const instance of this.instances) {
      instance.deps = { ...instance.deps, leaseSeconds: (input.leaseLength ?? 2) * UNIT_SECONDS };
    }
    const db = this.instances[0].handle.prisma;
    const { company } = await createCompany(db, "Conformance");
    const names = new Names();
    const actors = new Map<string, AgentActor>();
    for (const agent of input.agents) {
      const { agent: made } = await createAgent(db, company.id, `Agent ${agent}`);
      names.bind(agent, made.id);
      actors.set(agent, { companyId: company.id, agentId: made.id, agentNameKey: made.nameKey });
    }
    const created = await createIssues(
      { db },
      company.id,
      input.issues.map((i) => ({
        title: i.id,
        status: i.status ?? "OPEN",
        priority: i.priority ?? "MEDIUM",
        assigneeAgentId: i.assigneeAgentId ? names.toReal.get(i.assigneeAgentId)! : null,
        concurrencyKey: i.concurrencyKey ?? null,
        maxAttempts: i.maxAttempts ?? 3,
      })),
    );
    for (const [n, issue] of created.entries()) names.bind(input.issues[n]!.id, issue.id);
    for (const [key, max] of Object.entries(input.limits ?? {})) await setConcurrencyLimit(db, company.id, key, max);
    return new Sequence(this, company.id, names, actors);
  }
}

/** One sequence's company on the real side. */
export class Sequence {
  constructor(
    readonly world: RealWorld,
    readonly companyId: string,
    public names: Names,
    readonly actors: Map<string, AgentActor>,
  ) {}

  /** Runs one model command through the real verb on instance `n`; thrown FORBIDDEN / BAD_USER_INPUT / NOT_FOUND come back as Error answers. */
  async exec(c: Command, n: 0 | 1 = 0, names: Names = this.names): Promise<RealAnswer> {
    const deps = this.world.instances[n].deps;
    const actor = (agentId: string) => this.actors.get(agentId)!;
    try {
      switch (c.verb) {
        case "startRun":
          return { __typename: "HeartbeatRun", run: await startRun(deps, actor(c.agentId)) };
        case "heartbeatRun":
          return await heartbeatRun(deps, actor(c.agentId), names.real(c.runId));
        case "finishRun":
          return await finishRun(deps, actor(c.agentId), names.real(c.runId), c.status);
        case "claimIssue":
          return await claimIssue(deps, actor(c.agentId), {
            runId: names.real(c.runId),
            issueId: c.issueId === undefined ? undefined : names.real(c.issueId),
            expectedStatuses: c.expectedStatuses,
            includeUnassigned: c.includeUnassigned,
          });
        case "claimIssues":
          return await claimIssues(deps, actor(c.agentId), {
            runId: names.real(c.runId),
            limit: c.limit,
            includeUnassigned: c.includeUnassigned,
            acquireExecution: c.acquireExecution,
          });
        case "acquireExecution":
          return await acquireExecution(deps, actor(c.agentId), { runId: names.real(c.runId), issueId: names.real(c.issueId) });
        case "releaseIssue":
          return await releaseIssue(deps, actor(c.agentId), {
            runId: names.real(c.runId),
            issueId: names.real(c.issueId),
            outcome: c.outcome,
            reason: c.reason,
          });
        case "releaseIssues":
          return await releaseIssues(deps, actor(c.agentId), {
            runId: names.real(c.runId),
            issueIds: c.issueIds.map((i) => names.real(i)),
            outcome: c.outcome,
            reason: c.reason,
          });
        case "forceReleaseIssue":
          return await forceReleaseIssue(deps, this.companyId, { issueId: names.real(c.issueId), reason: c.reason });
        case "updateIssue": {
          const input: Record<string, unknown> = { ...c.input };
          if (c.input.assigneeAgentId != null) input.assigneeAgentId = names.real(c.input.assigneeAgentId);
          return await updateIssue(deps, this.companyId, names.real(c.issueId), input);
        }
        case "runHeartbeat":
          return { __typename: "HeartbeatTick", ...(await tickScheduler(deps, this.companyId)) };
        case "disableAgent":
          return { __typename: "Agent", ...(await disableAgent(deps, this.companyId, names.real(c.agentId), c.reason)).agent };
        case "enableAgent":
          return { __typename: "Agent", ...(await enableAgent(deps.db, this.companyId, names.real(c.agentId))) };
        case "tick":
          await this.world.admin.query("UPDATE heartbeat_runs SET lease_expires_at = lease_expires_at - make_interval(secs => $2::int) WHERE company_id = $1", [
            this.companyId,
            (c.by ?? 1) * UNIT_SECONDS,
          ]);
          return { __typename: "Ticked" };
        case "sweep":
          return { __typename: "SweepCounts", ...(await sweep(deps.db, deps.events)) };
        case "createIssues":
        case "createSubIssues":
        case "addDependency":
        case "removeDependency":
          // the work graph's verbs (issue 29) join the conformance run once the API has them
          throw new Error(`${c.verb} is not driven against the API yet`);
      }
    } catch (err) {
      if (err instanceof ForbiddenError) return { __typename: "Error", code: "FORBIDDEN" };
      if (err instanceof InvalidInputError) return { __typename: "Error", code: "BAD_USER_INPUT" };
      if (err instanceof NotFoundError) return { __typename: "Error", code: "NOT_FOUND" };
      // anything else is no answer of the contract: the run fails, naming the command
      throw new Error(`${describe(c)} threw: ${err instanceof Error ? err.message.trim().split("\n").at(-1) : String(err)}`);
    }
  }

  /** The company's issues, runs and events, in the comparable shape. */
  async state(names: Names = this.names): Promise<NormState> {
    const { rows } = await this.world.admin.query(
      `SELECT
         (SELECT coalesce(json_agg(json_build_object('id', i.id, 'status', i.status, 'checkoutRunId', i.checkout_run_id,
                  'executionRunId', i.execution_run_id, 'attemptCount', i.attempt_count, 'maxAttempts', i.max_attempts,
                  'lockEpoch', i.lock_epoch, 'assigneeAgentId', i.assignee_agent_id, 'concurrencyKey', nullif(i.concurrency_key, ''))), '[]')
            FROM issues i WHERE i.company_id = $1) AS issues,
         (SELECT coalesce(json_agg(json_build_object('id', r.id, 'agentId', r.agent_id, 'status', r.status) ORDER BY r.started_at, r.id), '[]')
            FROM heartbeat_runs r WHERE r.company_id = $1) AS runs,
         (SELECT coalesce(json_agg(a.id), '[]') FROM agents a WHERE a.company_id = $1 AND a.disabled_at IS NOT NULL) AS disabled,
         (SELECT coalesce(json_agg(json_build_object('issueId', e.issue_id, 'kind', e.kind, 'status', e.status, 'reason', e.reason,
                  'runId', e.run_id, 'agentId', e.agent_id) ORDER BY e.seq), '[]')
            FROM lock_events e WHERE e.company_id = $1) AS events,
         (SELECT coalesce(json_agg(k.key ORDER BY k.last_served), '[]')
            FROM concurrency_keys k WHERE k.company_id = $1 AND k.last_served IS NOT NULL) AS turns`,
      [this.companyId],
    );
    const row = rows[0] as {
      issues: AnyIssue[];
      runs: { id: string; agentId: string; status: string }[];
      disabled: string[];
      events: Record<string, string | null>[];
      turns: string[];
    };
    const name = (id: string | null) => names.model(id);
    const events: Record<string, NormEvent[]> = {};
    for (const e of row.events) {
      const issue = name(e.issueId!)!;
      events[issue] ??= [];
      events[issue].push({
        kind: e.kind!,
        status: e.status!,
        reason: e.reason ?? null,
        run: name(e.runId ?? null),
        agent: name(e.agentId ?? null),
      });
    }
    const issues = row.issues.map((i) => normIssue(i, name)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const runs = row.runs.map((r) => ({ id: name(r.id)!, agent: name(r.agentId)!, status: r.status }));
    // the model lists runs in creation order r1, r2, …; two started at once may have either order here
    runs.sort((a, b) => runNumber(a.id) - runNumber(b.id));
    const disabled = row.disabled.map((id) => name(id)!).sort();
    return { issues, runs, disabled, events, turns: row.turns };
  }
}

const runNumber = (id: string) => (/^r(\d+)$/.exec(id) ? Number(id.slice(1)) : Number.MAX_SAFE_INTEGER);

/** Binds the runs a command created on the real side to the model's names for them (startRun, runHeartbeat: by agent). */
export function bindNewRuns(names: Names, model: Answer, real: RealAnswer): void {
  if (model.__typename === "HeartbeatRun" && real.__typename === "HeartbeatRun") names.bind(model.run.id, real.run.id);
  if (model.__typename === "HeartbeatTick" && real.__typename === "HeartbeatTick") {
    for (const run of model.runs) {
      const twin = (real.runs as { id: string; agentId: string }[]).find((r) => names.model(r.agentId) === run.agentId);
      if (twin) names.bind(run.id, twin.id);
    }
  }
}
