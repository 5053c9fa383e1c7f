// The real side of the conformance run (issue 17, part 3): the model's
// commands (src/model/commands.ts) run through the real lock verbs of
// src/locks, called as src/graphql/mutations.ts calls them, over a real
// PostgreSQL database. Ids are mapped between the model's names (agents A, B;
// issues i1, i2, …; runs r1, r2, …) and the database's UUIDs, and every answer
// and state is brought to one comparable shape (norm.ts) on both sides.
//
// Time: the model's clock moves by `tick`; here a tick backdates every lease,
// notBefore and execution start of the company by one clock unit
// (UNIT_SECONDS), then runs the wake-up (wakeDueIssues: WAKE_DUE_ISSUES), so
// a lease runs out, a delayed issue becomes ready and an execution passes its
// limit on the same tick on both sides. Durations (retryDelaySeconds,
// retryAfterSeconds, maxExecutionSeconds) are clock units × UNIT_SECONDS.
//
// Two connections ("instances"): every command runs on instance 0, except the
// second command of a concurrent pair, which runs on instance 1.
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
import type { CreateIssueInput } from "../../src/locks/operator/createIssues.js";
import { createSubIssues } from "../../src/locks/graph/createSubIssues.js";
import { addDependency, removeDependency } from "../../src/locks/graph/dependencies.js";
import type { GraphEditor } from "../../src/locks/graph/dependencies.js";
import type { LockDeps } from "../../src/locks/shared/deps.js";
import { disableAgent, enableAgent } from "../../src/locks/operator/disableAgent.js";
import { forceReleaseIssue } from "../../src/locks/operator/forceReleaseIssue.js";
import { releaseIssue } from "../../src/locks/release/releaseIssue.js";
import { releaseIssues } from "../../src/locks/release/releaseIssues.js";
import { finishRun, heartbeatRun, startRun } from "../../src/locks/runs/runs.js";
import { tickScheduler } from "../../src/locks/runs/schedulerTick.js";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { wakeDueIssues } from "../../src/locks/recovery/wakeDueIssues.js";
import { updateIssue } from "../../src/locks/operator/updateIssue.js";
import type { AgentActor } from "../../src/locks/shared/types.js";
import { describe } from "../../src/model/index.js";
import type { Answer, Command, CreateInput, InitialStateInput } from "../../src/model/index.js";
import { Names, UNIT_SECONDS, normRealIssue } from "./norm.js";
import type { AnswerFields, NormEvent, NormState, NormStateIssue, RealIssue } from "./norm.js";

export { Names, UNIT_SECONDS, UNKNOWN_ISSUE, UNKNOWN_RUN, normAnswer, normModelState } from "./norm.js";
export type { NormAnswer, NormIssue, NormState } from "./norm.js";

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
    /** The database's clock minus this process's, in ms (the same machine's, give or take a query). */
    readonly skewMs: number,
  ) {}

  static async connect(url: string, leaseUnits = 2): Promise<RealWorld> {
    const instance = (n: number): Instance => {
      const handle = connectDb(url, 2, `baton-conformance-${n}`);
      return { handle, deps: { db: handle.prisma, events: { publish: () => {} }, leaseSeconds: leaseUnits * UNIT_SECONDS } };
    };
    const admin = new pg.Client({ connectionString: url, application_name: "baton-conformance-admin" });
    admin.on("error", () => {});
    await admin.connect();
    const { rows } = await admin.query<{ ms: string }>("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms");
    return new RealWorld(url, [instance(0), instance(1)], admin, Number(rows[0]!.ms) - Date.now());
  }

  /** The database's clock now, in ms. */
  nowMs(): number {
    return Date.now() + this.skewMs;
  }

  async close(): Promise<void> {
    await Promise.all(this.instances.map((i) => i.handle.close()));
    await this.admin.end().catch(() => {});
  }

  /**
   * A fresh company for one sequence, as the model's initial state describes
   * it; the previous sequence's company is emptied first, so that a sweep
   * (which serves every company) sees this sequence's rows only. Issues with
   * blockers or a parent are created one call each (their blockers need ids);
   * the others in one createIssues, as before.
   */
  async setup(input: InitialStateInput): Promise<Sequence> {
    if ((input.tickSeconds ?? 3600) !== UNIT_SECONDS) throw new Error(`the conformance run's clock unit is ${UNIT_SECONDS} s`);
    await this.admin.query("DELETE FROM issue_dependencies; DELETE FROM issues; DELETE FROM heartbeat_runs");
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
    const seq = new Sequence(this, company.id, names, actors);
    const graphed = input.issues.some((i) => (i.blockedBy?.length ?? 0) > 0 || i.parentId != null);
    const batches = graphed ? input.issues.map((i) => [i]) : [input.issues];
    for (const batch of batches) {
      const created = await createIssues(
        { db },
        company.id,
        batch.map((i) => seq.realInput({ ...i, status: i.status ?? "OPEN", maxAttempts: i.maxAttempts ?? 3 }, names, `${i.id}`)),
      );
      for (const [n, issue] of created.entries()) names.bind(batch[n]!.id, issue.id);
    }
    for (const [key, max] of Object.entries(input.limits ?? {})) await setConcurrencyLimit(db, company.id, key, max);
    return seq;
  }
}

/** One sequence's company on the real side. */
export class Sequence {
  /** The model's clock before the command that runs (set by the conformance run): instants are given relative to it. */
  clock = 0;

  constructor(
    readonly world: RealWorld,
    readonly companyId: string,
    public names: Names,
    readonly actors: Map<string, AgentActor>,
  ) {}

  /** An instant on the model's clock as the database's: a second before, so that "now" is already due. */
  private instant(t: number): Date {
    return new Date(this.world.nowMs() + (t - this.clock) * UNIT_SECONDS * 1000 - 1000);
  }

  /** A model CreateInput as the API takes it (clock units in seconds, names as ids). */
  realInput(i: CreateInput, names: Names, title = "work"): CreateIssueInput {
    return {
      title,
      status: i.status,
      priority: i.priority,
      assigneeAgentId: i.assigneeAgentId == null ? i.assigneeAgentId : names.real(i.assigneeAgentId),
      concurrencyKey: i.concurrencyKey,
      maxAttempts: i.maxAttempts,
      parentId: i.parentId == null ? i.parentId : names.real(i.parentId),
      blockedBy: i.blockedBy?.map((b) => names.real(b)),
      notBefore: i.notBefore == null ? i.notBefore : this.instant(i.notBefore),
      idempotencyKey: i.idempotencyKey,
      retryDelaySeconds: i.retryDelaySeconds === undefined ? undefined : i.retryDelaySeconds * UNIT_SECONDS,
      maxExecutionSeconds: i.maxExecutionSeconds == null ? i.maxExecutionSeconds : i.maxExecutionSeconds * UNIT_SECONDS,
      payload: i.payload,
    };
  }

  /** Runs one model command through the real verb on instance `n`; thrown FORBIDDEN / BAD_USER_INPUT / NOT_FOUND come back as Error answers. */
  async exec(c: Command, n: 0 | 1 = 0, names: Names = this.names): Promise<RealAnswer> {
    const deps = this.world.instances[n].deps;
    const actor = (agentId: string) => this.actors.get(agentId)!;
    const seconds = (units: number | null | undefined) => (units == null ? units : units * UNIT_SECONDS);
    const editor = (e: { agentId?: string; runId?: string }): GraphEditor =>
      e.agentId === undefined
        ? { companyId: this.companyId, agentId: null }
        : { companyId: this.companyId, agentId: actor(e.agentId).agentId, runId: names.real(e.runId ?? "r-unknown") };
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
            startExecution: c.startExecution,
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
            retryAfterSeconds: seconds(c.retryAfterSeconds),
            result: c.result,
            next: c.next,
          });
        case "releaseIssues":
          return await releaseIssues(deps, actor(c.agentId), {
            runId: names.real(c.runId),
            issueIds: c.issueIds.map((i) => names.real(i)),
            outcome: c.outcome,
            reason: c.reason,
            retryAfterSeconds: seconds(c.retryAfterSeconds),
            result: c.result,
          });
        case "forceReleaseIssue":
          return await forceReleaseIssue(deps, this.companyId, { issueId: names.real(c.issueId), reason: c.reason });
        case "updateIssue": {
          const input: Record<string, unknown> = { ...c.input };
          if (c.input.assigneeAgentId != null) input.assigneeAgentId = names.real(c.input.assigneeAgentId);
          if (c.input.notBefore != null) input.notBefore = this.instant(c.input.notBefore);
          if (c.input.retryDelaySeconds !== undefined) input.retryDelaySeconds = seconds(c.input.retryDelaySeconds);
          if (c.input.maxExecutionSeconds !== undefined) input.maxExecutionSeconds = seconds(c.input.maxExecutionSeconds);
          return await updateIssue(deps, this.companyId, names.real(c.issueId), input);
        }
        case "createIssues":
          return {
            __typename: "IssuesCreated",
            issues: await createIssues(
              deps,
              this.companyId,
              c.inputs.map((i) => this.realInput(i, names)),
            ),
          };
        case "createSubIssues":
          return await createSubIssues(deps, actor(c.agentId), {
            runId: names.real(c.runId),
            parentId: names.real(c.parentId),
            inputs: c.inputs.map((i) => this.realInput(i, names)),
            parentWaits: c.parentWaits,
          });
        case "addDependency":
          return await addDependency(deps, editor(c), names.real(c.issueId), names.real(c.blockedById));
        case "removeDependency":
          return await removeDependency(deps, editor(c), names.real(c.issueId), names.real(c.blockedById));
        case "runHeartbeat":
          return { __typename: "HeartbeatTick", ...(await tickScheduler(deps, this.companyId)) };
        case "disableAgent":
          return { __typename: "Agent", ...(await disableAgent(deps, this.companyId, names.real(c.agentId), c.reason)).agent };
        case "enableAgent":
          return { __typename: "Agent", ...(await enableAgent(deps.db, this.companyId, names.real(c.agentId))) };
        case "tick": {
          const by = make_interval((c.by ?? 1) * UNIT_SECONDS);
          await this.world.admin.query(`UPDATE heartbeat_runs SET lease_expires_at = lease_expires_at - ${by} WHERE company_id = $1`, [this.companyId]);
          await this.world.admin.query(
            `UPDATE issues SET not_before = not_before - ${by}, execution_locked_at = execution_locked_at - ${by}
              WHERE company_id = $1 AND (not_before IS NOT NULL OR execution_locked_at IS NOT NULL)`,
            [this.companyId],
          );
          await wakeDueIssues(deps.db);
          return { __typename: "Ticked" };
        }
        case "sweep":
          return { __typename: "SweepCounts", ...(await sweep(deps.db, deps.events)) };
      }
    } catch (err) {
      if (err instanceof ForbiddenError) return { __typename: "Error", code: "FORBIDDEN" };
      if (err instanceof InvalidInputError) return { __typename: "Error", code: "BAD_USER_INPUT" };
      if (err instanceof NotFoundError) return { __typename: "Error", code: "NOT_FOUND" };
      // anything else is no answer of the contract: the run fails, naming the command
      throw new Error(`${describe(c)} threw: ${err instanceof Error ? err.message.trim().split("\n").at(-1) : String(err)}`);
    }
  }

  /** The company's issues (with their edges and readiness), runs and events, in the comparable shape, seen from the model's clock `clock`. */
  async state(names: Names = this.names, clock = this.clock): Promise<NormState> {
    const { rows } = await this.world.admin.query(
      `SELECT
         (SELECT coalesce(json_agg(json_build_object('id', i.id, 'status', i.status, 'checkoutRunId', i.checkout_run_id,
                  'executionRunId', i.execution_run_id, 'attemptCount', i.attempt_count, 'maxAttempts', i.max_attempts,
                  'lockEpoch', i.lock_epoch, 'assigneeAgentId', i.assignee_agent_id, 'concurrencyKey', nullif(i.concurrency_key, ''),
                  'parentId', i.parent_id, 'notBefore', i.not_before, 'idempotencyKey', i.idempotency_key,
                  'retryDelaySeconds', i.retry_delay_seconds, 'maxExecutionSeconds', i.max_execution_seconds,
                  'executionLockedAt', i.execution_locked_at, 'payload', i.payload, 'result', i.result,
                  'waitingCount', i.waiting_count, 'delayed', i.delayed,
                  'ready', i.status = 'OPEN' AND i.attempt_count < i.max_attempts AND i.waiting_count = 0
                           AND (i.not_before IS NULL OR i.not_before <= now()),
                  'blockedBy', (SELECT coalesce(json_agg(d.blocked_by_id), '[]') FROM issue_dependencies d WHERE d.issue_id = i.id))), '[]')
            FROM issues i WHERE i.company_id = $1) AS issues,
         (SELECT coalesce(json_agg(json_build_object('id', r.id, 'agentId', r.agent_id, 'status', r.status) ORDER BY r.started_at, r.id), '[]')
            FROM heartbeat_runs r WHERE r.company_id = $1) AS runs,
         (SELECT coalesce(json_agg(a.id), '[]') FROM agents a WHERE a.company_id = $1 AND a.disabled_at IS NOT NULL) AS disabled,
         (SELECT coalesce(json_agg(json_build_object('issueId', e.issue_id, 'kind', e.kind, 'status', e.status, 'reason', e.reason,
                  'runId', e.run_id, 'agentId', e.agent_id) ORDER BY e.seq), '[]')
            FROM lock_events e WHERE e.company_id = $1) AS events,
         (SELECT coalesce(json_agg(k.key ORDER BY k.last_served), '[]')
            FROM concurrency_keys k WHERE k.company_id = $1 AND k.last_served IS NOT NULL) AS turns,
         (extract(epoch FROM now()) * 1000)::bigint AS now_ms`,
      [this.companyId],
    );
    const row = rows[0] as {
      issues: (RealIssue & { waitingCount: number; delayed: boolean; ready: boolean; blockedBy: string[] })[];
      runs: { id: string; agentId: string; status: string }[];
      disabled: string[];
      events: Record<string, string | null>[];
      turns: string[];
      now_ms: string;
    };
    const name = (id: string | null) => names.model(id);
    const view = { name, clock, nowMs: Number(row.now_ms) };
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
    const issues = row.issues
      .map(
        (i): NormStateIssue => ({
          ...normRealIssue(i, view),
          blockedBy: i.blockedBy.map((b) => name(b)!).sort(),
          waitingCount: i.waitingCount,
          delayed: i.delayed,
          ready: i.ready,
        }),
      )
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const runs = row.runs.map((r) => ({ id: name(r.id)!, agent: name(r.agentId)!, status: r.status }));
    // the model lists runs in creation order r1, r2, …; two started at once may have either order here
    runs.sort((a, b) => runNumber(a.id) - runNumber(b.id));
    const disabled = row.disabled.map((id) => name(id)!).sort();
    return { issues, runs, disabled, events, turns: row.turns };
  }
}

/** An interval literal of `seconds` for a backdating UPDATE. */
const make_interval = (seconds: number) => `make_interval(secs => ${Math.trunc(seconds)})`;

const runNumber = (id: string) => (/^r(\d+)$/.exec(id) ? Number(id.slice(1)) : Number.MAX_SAFE_INTEGER);

/**
 * Binds what a command created on the real side to the model's names for it:
 * runs (startRun, runHeartbeat: by agent) and issues (createIssues,
 * createSubIssues: by input order).
 */
export function bindNewRuns(names: Names, model: Answer, real: RealAnswer): void {
  if (model.__typename === "HeartbeatRun" && real.__typename === "HeartbeatRun") names.bind(model.run.id, real.run.id);
  if (model.__typename === "HeartbeatTick" && real.__typename === "HeartbeatTick") {
    for (const run of model.runs) {
      const twin = (real.runs as { id: string; agentId: string }[]).find((r) => names.model(r.agentId) === run.agentId);
      if (twin) names.bind(run.id, twin.id);
    }
  }
  if (
    (model.__typename === "IssuesCreated" && real.__typename === "IssuesCreated") ||
    (model.__typename === "SubIssuesCreated" && real.__typename === "SubIssuesCreated")
  ) {
    for (const [n, issue] of model.issues.entries()) {
      const twin = (real.issues as { id: string }[])[n];
      if (twin && !names.toReal.has(issue.id) && !names.toModel.has(twin.id)) names.bind(issue.id, twin.id);
    }
  }
}
