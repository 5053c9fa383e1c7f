// The mutations, grouped by who may call them. Each resolver checks scope,
// validates ids and calls one verb from src/locks (or src/auth).
import { createAgent, createCompany } from "../auth/accounts.js";
import { rotateAgentKey, rotateBoardKey } from "../auth/rotateKeys.js";
import { disableAgent, enableAgent } from "../locks/operator/disableAgent.js";
import { acquireExecution } from "../locks/execution/acquireExecution.js";
import { claimIssue } from "../locks/claim/claimIssue.js";
import { claimIssues } from "../locks/claim/claimIssues.js";
import { releaseIssues } from "../locks/release/releaseIssues.js";
import { setConcurrencyLimit } from "../locks/operator/concurrencyLimits.js";
import { createIssues } from "../locks/operator/createIssues.js";
import { forceReleaseIssue } from "../locks/operator/forceReleaseIssue.js";
import { releaseIssue } from "../locks/release/releaseIssue.js";
import { tickScheduler } from "../locks/runs/schedulerTick.js";
import { finishRun, heartbeatRun, startRun } from "../locks/runs/runs.js";
import { updateIssue } from "../locks/operator/updateIssue.js";
import { addDependency, removeDependency } from "../locks/graph/dependencies.js";
import type { GraphEditor } from "../locks/graph/dependencies.js";
import { createSubIssues } from "../locks/graph/createSubIssues.js";
import type { UpdateIssueInput } from "../locks/operator/updateIssue.js";
import { traced } from "../tracing/spans.js";
import { builder } from "./builder.js";
import { requireAdmin, requireAgent, requireBoard, requireKeyManager, requirePrincipal } from "./context.js";
import type { Context } from "./context.js";
import { AgentRef } from "./types/company.js";
import { validateId } from "../domain/validate.js";
import { InvalidInputError, NotFoundError } from "../domain/errors.js";
import { IssueStatusEnum, ReleaseOutcomeEnum, RunStatusEnum } from "./types/enums.js";
import { ConcurrencyLimitRef } from "./types/concurrencyLimit.js";
import { ClaimNextInputRef, CreateIssueInputRef, IssueRef, UpdateIssueInputRef } from "./types/issue.js";
import {
  AcquireExecutionResultRef,
  ClaimIssueResultRef,
  ClaimIssuesResultRef,
  ReleaseIssuesResultRef,
  CreateAgentPayloadRef,
  CreateCompanyPayloadRef,
  ForceReleaseResultRef,
  HeartbeatTickRef,
  ReleaseIssueResultRef,
  RotateKeyPayloadRef,
  RunResultRef,
  UpdateIssueResultRef,
  AddDependencyResultRef,
  RemoveDependencyResultRef,
  CreateSubIssuesResultRef,
} from "./types/results.js";
import { HeartbeatRunRef } from "./types/run.js";

const optionalId = (name: string, value: string | null | undefined) => (value == null ? value : validateId(name, value));

/** What retryAfterSeconds and result say, on releaseIssue and releaseIssues alike. */
const RETRY_AFTER_DOC =
  "0..86400, with REQUEUE or FAILED only: not claimable again for this long (instead of the retry backoff). With REQUEUE from IN_PROGRESS " +
  'the attempt is given back: "not now" is not a failure.';
const RESULT_DOC = "What the work produced (at most 64 KB of JSON); kept on the issue whatever the outcome.";

/** A dependency change writes no ledger event: boards hear of the issue it changed here (issuesChanged). */
const announced = <R extends { __typename: string; issue?: { id: string } }>(ctx: Context, companyId: string, answer: Promise<R>): Promise<R> =>
  answer.then((r) => {
    if (r.issue) ctx.services.bus.announceIssues(companyId, [r.issue.id]);
    return r;
  });

/** Issues that waited on one released DONE became ready without an event of their own: boards hear of them here (issuesChanged). */
const freeing = <R extends { __typename: string; freed?: string[] }>(ctx: Context, answer: Promise<R>): Promise<R> =>
  answer.then((r) => {
    if (r.freed?.length) ctx.services.bus.announceIssues(requireAgent(ctx).companyId, r.freed);
    return r;
  });

/** The caller as a graph editor: the board, or an agent naming the run that must hold the issue. */
function graphEditor(ctx: Context, runId: string | null | undefined): GraphEditor {
  if (requirePrincipal(ctx).role === "AGENT") {
    const actor = requireAgent(ctx);
    if (runId == null) throw new InvalidInputError("runId is required for an agent: the run that holds the issue");
    return { companyId: actor.companyId, agentId: actor.agentId, runId: validateId("runId", runId) };
  }
  if (runId != null) throw new InvalidInputError("runId is for agents; the board leaves it out");
  return { companyId: requireBoard(ctx), agentId: null };
}

/**
 * The verb's answer as the caller gets it: counted under the mutation's name
 * (baton_mutation_outcomes_total) and written on the request's span with the ids it concerns.
 */
const answered = <R extends { __typename: string }>(
  ctx: Context,
  mutation: string,
  ids: { runId?: string | null; issueId?: string | null },
  answer: Promise<R>,
): Promise<R> => answer.then((r) => ctx.services.metrics.outcome(mutation, traced(r, ids)));

// ---- ADMIN ----
builder.mutationFields((t) => ({
  createCompany: t.field({
    type: CreateCompanyPayloadRef,
    args: { name: t.arg.string({ required: true }) },
    resolve: (_root, { name }, ctx) => {
      requireAdmin(ctx);
      return createCompany(ctx.services.db, name);
    },
  }),
}));

// ---- BOARD or ADMIN: keys and agents (docs/access.md, "Rotating and revoking keys") ----
// A board key acts on its own company; another company's agent is "not found".
// The admin token acts on any. Once one of these returns, the keys it revoked
// are refused on every instance within a second (src/auth/revocations.ts).
builder.mutationFields((t) => ({
  rotateAgentKey: t.field({
    type: RotateKeyPayloadRef,
    description: "A new key for the agent, shown once; every key it had stops working. A disabled agent must be enabled first.",
    args: { agentId: t.arg.id({ required: true }) },
    resolve: async (_root, { agentId }, ctx) => {
      const rotated = await rotateAgentKey(ctx.services.db, requireKeyManager(ctx), validateId("agentId", agentId));
      ctx.services.revocations.committed(rotated.revokedKeyIds);
      return { apiKey: rotated.apiKey };
    },
  }),

  rotateBoardKey: t.field({
    type: RotateKeyPayloadRef,
    description: "A new board key, shown once; the old one stops working. The admin token names the company.",
    args: { companyId: t.arg.id({ description: "The admin token's choice; a board key may leave it out or name its own company." }) },
    resolve: async (_root, { companyId }, ctx) => {
      const scope = requireKeyManager(ctx);
      const named = companyId == null ? null : validateId("companyId", companyId);
      if (scope === null && named === null) throw new InvalidInputError("the admin token must name the company (companyId)");
      if (scope !== null && named !== null && named !== scope) throw new NotFoundError(`company ${named} not found`);
      const rotated = await rotateBoardKey(ctx.services.db, scope ?? named!);
      ctx.services.revocations.committed(rotated.revokedKeyIds);
      return { apiKey: rotated.apiKey };
    },
  }),

  disableAgent: t.field({
    type: AgentRef,
    description:
      "Every key of the agent stops working; its running runs are finished (CANCELLED) and the locks they held freed, attempts charged as for any " +
      "dead run (events with reason AGENT_DISABLED), all before it returns.",
    args: { agentId: t.arg.id({ required: true }), reason: t.arg.string({ required: true }) },
    resolve: async (_root, { agentId, reason }, ctx) => {
      // the keys are refused everywhere from the first commit on, before the locks are taken back
      const disabled = await disableAgent(ctx.services.locks, requireKeyManager(ctx), validateId("agentId", agentId), reason, (keyIds) =>
        ctx.services.revocations.committed(keyIds),
      );
      return disabled.agent;
    },
  }),

  enableAgent: t.field({
    type: AgentRef,
    description: "The agent may be given a key again (rotateAgentKey); the keys it had stay revoked.",
    args: { agentId: t.arg.id({ required: true }) },
    resolve: (_root, { agentId }, ctx) => enableAgent(ctx.services.db, requireKeyManager(ctx), validateId("agentId", agentId)),
  }),
}));

// ---- BOARD (operator of one company) ----
builder.mutationFields((t) => ({
  createAgent: t.field({
    type: CreateAgentPayloadRef,
    args: { name: t.arg.string({ required: true }) },
    resolve: (_root, { name }, ctx) => createAgent(ctx.services.db, requireBoard(ctx), name),
  }),

  createIssue: t.field({
    type: IssueRef,
    args: { input: t.arg({ type: CreateIssueInputRef, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const companyId = requireBoard(ctx);
      const [issue] = await createIssues(ctx.services.locks, companyId, [{ ...input, assigneeAgentId: optionalId("assigneeAgentId", input.assigneeAgentId) }]);
      ctx.services.bus.announceIssues(companyId, [issue!.id]);
      return issue!;
    },
  }),

  createIssues: t.field({
    type: [IssueRef],
    description: "Up to 1000 at once, one transaction.",
    args: { inputs: t.arg({ type: [CreateIssueInputRef], required: true }) },
    resolve: async (_root, { inputs }, ctx) => {
      const companyId = requireBoard(ctx);
      const issues = await createIssues(
        ctx.services.locks,
        companyId,
        inputs.map((input, n) => ({ ...input, assigneeAgentId: optionalId(`inputs[${n}].assigneeAgentId`, input.assigneeAgentId) })),
      );
      ctx.services.bus.announceIssues(
        companyId,
        issues.map((i) => i.id),
      );
      return issues;
    },
  }),

  updateIssue: t.field({
    type: UpdateIssueResultRef,
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateIssueInputRef, required: true }) },
    resolve: (_root, { id, input }, ctx) => {
      const companyId = requireBoard(ctx);
      const changes: UpdateIssueInput = { ...input };
      if (input.assigneeAgentId != null) changes.assigneeAgentId = validateId("assigneeAgentId", input.assigneeAgentId);
      const updated = updateIssue(ctx.services.locks, companyId, validateId("id", id), changes).then((r) => {
        // Edits of other fields write no ledger event: boards hear of them here.
        if (r.__typename === "IssueUpdated") ctx.services.bus.announceIssues(companyId, [r.issue.id]);
        return r;
      });
      return answered(ctx, "updateIssue", { issueId: id }, updated);
    },
  }),

  forceReleaseIssue: t.field({
    type: ForceReleaseResultRef,
    args: { issueId: t.arg.id({ required: true }), reason: t.arg.string({ required: true }) },
    resolve: (_root, { issueId, reason }, ctx) =>
      answered(
        ctx,
        "forceReleaseIssue",
        { issueId },
        forceReleaseIssue(ctx.services.locks, requireBoard(ctx), {
          issueId: validateId("issueId", issueId),
          reason,
        }),
      ),
  }),

  setConcurrencyLimit: t.field({
    type: ConcurrencyLimitRef,
    nullable: true,
    description:
      "Caps how many issues of `key` may be CLAIMED or IN_PROGRESS at once (1..10000); null removes the cap (and answers null). A cap below the " +
      "current count takes nothing away: it stops new claims of the key until the count falls.",
    args: { key: t.arg.string({ required: true }), maxActive: t.arg.int() },
    resolve: (_root, { key, maxActive }, ctx) => setConcurrencyLimit(ctx.services.db, requireBoard(ctx), key, maxActive ?? null),
  }),

  runHeartbeat: t.field({
    type: HeartbeatTickRef,
    description: "The scheduler tick: for each agent of the caller's company with claimable work, start a run and claim that agent's next issue.",
    resolve: (_root, _args, ctx) =>
      tickScheduler(ctx.services.locks, requireBoard(ctx)).then((tick) => {
        ctx.services.metrics.firstClaims(tick.claims.map((c) => c.issue));
        return tick;
      }),
  }),
}));

// ---- AGENT (acts as itself only) ----
builder.mutationFields((t) => ({
  startRun: t.field({
    type: HeartbeatRunRef,
    resolve: (_root, _args, ctx) => startRun(ctx.services.locks, requireAgent(ctx)).then((run) => traced(run, { runId: run.id })),
  }),

  heartbeatRun: t.field({
    type: RunResultRef,
    args: { runId: t.arg.id({ required: true }) },
    resolve: (_root, { runId }, ctx) =>
      answered(ctx, "heartbeatRun", { runId }, heartbeatRun(ctx.services.locks, requireAgent(ctx), validateId("runId", runId))),
  }),

  finishRun: t.field({
    type: RunResultRef,
    args: { runId: t.arg.id({ required: true }), status: t.arg({ type: RunStatusEnum, required: true }) },
    resolve: (_root, { runId, status }, ctx) =>
      answered(ctx, "finishRun", { runId }, finishRun(ctx.services.locks, requireAgent(ctx), validateId("runId", runId), status)),
  }),

  claimIssue: t.field({
    type: ClaimIssueResultRef,
    description:
      "Without issueId: atomically claim the caller's next claimable issue\n" +
      "(priority CRITICAL..LOW, then oldest first; within a priority, concurrency\n" +
      "keys take turns and a key at its limit is passed over) with FOR UPDATE SKIP LOCKED.\n" +
      "With issueId: check out that issue if its status is in expectedStatuses.",
    args: {
      runId: t.arg.id({ required: true }),
      issueId: t.arg.id(),
      expectedStatuses: t.arg({ type: [IssueStatusEnum] }),
      includeUnassigned: t.arg.boolean({ defaultValue: false }),
      startExecution: t.arg.boolean({
        defaultValue: false,
        description: "Take the execution lock too: the issue comes back IN_PROGRESS, its attempt counted, as if acquireExecution had followed.",
      }),
    },
    resolve: (_root, args, ctx) =>
      answered(
        ctx,
        "claimIssue",
        args,
        claimIssue(ctx.services.locks, requireAgent(ctx), {
          runId: validateId("runId", args.runId),
          issueId: optionalId("issueId", args.issueId),
          expectedStatuses: args.expectedStatuses,
          includeUnassigned: args.includeUnassigned,
          startExecution: args.startExecution,
        }),
      ),
  }),

  acquireExecution: t.field({
    type: AcquireExecutionResultRef,
    args: { runId: t.arg.id({ required: true }), issueId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) =>
      answered(
        ctx,
        "acquireExecution",
        args,
        acquireExecution(ctx.services.locks, requireAgent(ctx), {
          runId: validateId("runId", args.runId),
          issueId: validateId("issueId", args.issueId),
        }),
      ),
  }),

  releaseIssue: t.field({
    type: ReleaseIssueResultRef,
    args: {
      runId: t.arg.id({ required: true }),
      issueId: t.arg.id({ required: true }),
      outcome: t.arg({ type: ReleaseOutcomeEnum, required: true }),
      reason: t.arg.string(),
      retryAfterSeconds: t.arg.int({ description: RETRY_AFTER_DOC }),
      result: t.arg({ type: "JSON", description: RESULT_DOC }),
      next: t.arg({
        type: ClaimNextInputRef,
        description: "Once released, claim the caller's next issue in the same request: IssueReleased.next (null when nothing is claimable).",
      }),
    },
    resolve: (_root, args, ctx) =>
      answered(
        ctx,
        "releaseIssue",
        args,
        freeing(
          ctx,
          releaseIssue(ctx.services.locks, requireAgent(ctx), {
            runId: validateId("runId", args.runId),
            issueId: validateId("issueId", args.issueId),
            outcome: args.outcome,
            reason: args.reason,
            retryAfterSeconds: args.retryAfterSeconds,
            result: args.result,
            next: args.next ?? null,
          }),
        ),
      ),
  }),

  claimIssues: t.field({
    type: ClaimIssuesResultRef,
    description:
      "Claim up to `limit` (1..1000) of the caller's next claimable issues in one statement: the same order,\n" +
      "guards and FOR UPDATE SKIP LOCKED as claimIssue without issueId, one CLAIMED event per issue.",
    args: {
      runId: t.arg.id({ required: true }),
      limit: t.arg.int({ required: true }),
      includeUnassigned: t.arg.boolean({ defaultValue: false }),
      acquireExecution: t.arg.boolean({
        defaultValue: false,
        description: "Also take the execution lock (IN_PROGRESS, attempt counted), as if acquireExecution followed each claim.",
      }),
    },
    resolve: (_root, args, ctx) =>
      answered(
        ctx,
        "claimIssues",
        args,
        claimIssues(ctx.services.locks, requireAgent(ctx), {
          runId: validateId("runId", args.runId),
          limit: args.limit,
          includeUnassigned: args.includeUnassigned,
          acquireExecution: args.acquireExecution,
        }),
      ),
  }),

  releaseIssues: t.field({
    type: ReleaseIssuesResultRef,
    description: "Release up to 1000 issues held by the run, with one outcome, in one statement.",
    args: {
      runId: t.arg.id({ required: true }),
      issueIds: t.arg.idList({ required: true }),
      outcome: t.arg({ type: ReleaseOutcomeEnum, required: true }),
      reason: t.arg.string(),
      retryAfterSeconds: t.arg.int({ description: RETRY_AFTER_DOC }),
      result: t.arg({ type: "JSON", description: RESULT_DOC }),
    },
    resolve: (_root, args, ctx) =>
      answered(
        ctx,
        "releaseIssues",
        { runId: args.runId },
        freeing(
          ctx,
          releaseIssues(ctx.services.locks, requireAgent(ctx), {
            runId: validateId("runId", args.runId),
            issueIds: args.issueIds.map((id, n) => validateId(`issueIds[${n}]`, id)),
            outcome: args.outcome,
            reason: args.reason,
            retryAfterSeconds: args.retryAfterSeconds,
            result: args.result,
          }),
        ),
      ),
  }),
}));

// ---- BOARD or AGENT: the work graph (docs/lifecycle.md, "The work graph") ----
// The board edits any issue of its company; an agent only one its run holds.
builder.mutationFields((t) => ({
  addDependency: t.field({
    type: AddDependencyResultRef,
    description:
      "issueId waits on blockedById: it is not claimed again until blockedById is DONE. Refused with DependencyCycle if blockedById already " +
      "waits on issueId. The board, or an agent whose run (runId) holds issueId; a held issue keeps its locks.",
    args: { issueId: t.arg.id({ required: true }), blockedById: t.arg.id({ required: true }), runId: t.arg.id() },
    resolve: (_root, args, ctx) => {
      const editor = graphEditor(ctx, args.runId);
      const added = addDependency(ctx.services.locks, editor, validateId("issueId", args.issueId), validateId("blockedById", args.blockedById));
      return answered(ctx, "addDependency", args, announced(ctx, editor.companyId, added));
    },
  }),

  removeDependency: t.field({
    type: RemoveDependencyResultRef,
    description: "issueId no longer waits on blockedById (nothing changes if it did not). Who may: as addDependency.",
    args: { issueId: t.arg.id({ required: true }), blockedById: t.arg.id({ required: true }), runId: t.arg.id() },
    resolve: (_root, args, ctx) => {
      const editor = graphEditor(ctx, args.runId);
      const removed = removeDependency(ctx.services.locks, editor, validateId("issueId", args.issueId), validateId("blockedById", args.blockedById));
      return answered(ctx, "removeDependency", args, announced(ctx, editor.companyId, removed));
    },
  }),
}));

// ---- AGENT: splitting its own issue ----
builder.mutationFields((t) => ({
  createSubIssues: t.field({
    type: CreateSubIssuesResultRef,
    description:
      "1..100 new issues with parentId set, in one transaction, by an agent whose run holds parentId. They may be assigned to any agent of the " +
      "company, or none. parentWaits: the parent also waits on every new one (released with REQUEUE, it comes back once they are all DONE).",
    args: {
      runId: t.arg.id({ required: true }),
      parentId: t.arg.id({ required: true }),
      inputs: t.arg({ type: [CreateIssueInputRef], required: true }),
      parentWaits: t.arg.boolean({ defaultValue: false }),
    },
    resolve: async (_root, args, ctx) => {
      const actor = requireAgent(ctx);
      const result = await answered(
        ctx,
        "createSubIssues",
        { runId: args.runId, issueId: args.parentId },
        createSubIssues(ctx.services.locks, actor, {
          runId: validateId("runId", args.runId),
          parentId: validateId("parentId", args.parentId),
          inputs: args.inputs.map((input, n) => ({ ...input, assigneeAgentId: optionalId(`inputs[${n}].assigneeAgentId`, input.assigneeAgentId) })),
          parentWaits: args.parentWaits,
        }),
      );
      if (result.__typename === "SubIssuesCreated") ctx.services.bus.announceIssues(actor.companyId, [result.parent.id, ...result.issues.map((i) => i.id)]);
      return result;
    },
  }),
}));
