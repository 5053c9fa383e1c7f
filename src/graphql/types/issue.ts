import type { Issue } from "../../domain/types.js";
import { builder } from "../builder.js";
import { IssuePriorityEnum, IssueStatusEnum } from "./enums.js";
import { issuePage } from "../issuePages.js";
import type { IssueConnection, IssueEdge } from "../issuePages.js";
import type { Context } from "../context.js";

/** A page of the issue's sub-issues, in its company. */
const subIssuePage = (ctx: Context, issue: Issue, first: number | null | undefined, after: string | null) =>
  issuePage(ctx, issue.companyId, { parentId: issue.id }, first, after);

export const IssueRef = builder.objectRef<Issue>("Issue");

IssueRef.implement({
  fields: (t) => ({
    id: t.exposeID("id"),
    companyId: t.exposeID("companyId"),
    title: t.exposeString("title"),
    description: t.exposeString("description", { nullable: true }),
    status: t.expose("status", { type: IssueStatusEnum }),
    priority: t.expose("priority", { type: IssuePriorityEnum }),
    concurrencyKey: t.exposeString("concurrencyKey", {
      nullable: true,
      description:
        "Issues that share a key take turns with other keys, and a key may limit how many of its issues are active at once (setConcurrencyLimit). " +
        "null: the company's unkeyed pool, which is one key.",
    }),
    assigneeAgentId: t.exposeID("assigneeAgentId", { nullable: true }),
    checkoutRunId: t.exposeID("checkoutRunId", { nullable: true }),
    executionRunId: t.exposeID("executionRunId", { nullable: true }),
    executionAgentNameKey: t.exposeString("executionAgentNameKey", { nullable: true }),
    attemptCount: t.exposeInt("attemptCount"),
    maxAttempts: t.exposeInt("maxAttempts"),
    lockEpoch: t.exposeInt("lockEpoch", {
      description:
        "Fencing token: increases by one each time the checkout changes hands (claim\n" +
        "or adoption) and never decreases. A holder passes it to downstream systems,\n" +
        "which refuse writes that carry an older epoch than one they have seen.",
    }),
    claimedAt: t.expose("claimedAt", { type: "DateTime", nullable: true }),
    executionLockedAt: t.expose("executionLockedAt", { type: "DateTime", nullable: true }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    updatedAt: t.expose("updatedAt", { type: "DateTime" }),
    parentId: t.exposeID("parentId", { nullable: true, description: "The issue this one was split from (same company); null for a top-level issue." }),
    blockedBy: t.idList({
      description: "Every issue this one depends on (waits on until it is DONE), oldest edge first.",
      resolve: async (issue, _args, ctx) => (await ctx.services.dependencies.load(issue.id)).map((d) => d.blockedById),
    }),
    waitingOn: t.idList({
      description: "The part of blockedBy that is not DONE yet. A CANCELLED blocker stays here until the dependency is removed.",
      resolve: async (issue, _args, ctx) =>
        issue.waitingCount === 0 ? [] : (await ctx.services.dependencies.load(issue.id)).filter((d) => !d.done).map((d) => d.blockedById),
    }),
    notBefore: t.expose("notBefore", { type: "DateTime", nullable: true, description: "Not claimable before this instant (database clock); null: no delay." }),
    ready: t.exposeBoolean("ready", {
      description: "OPEN, an attempt left, waitingOn empty, notBefore null or past: claim-next may take it (a concurrency key's room is not counted).",
    }),
    idempotencyKey: t.exposeString("idempotencyKey", { nullable: true }),
    retryDelaySeconds: t.exposeInt("retryDelaySeconds", {
      description: "Backoff base: after a failed attempt the issue waits retryDelaySeconds × 2^(attemptCount − 1) seconds, at most a day; 0: none.",
    }),
    maxExecutionSeconds: t.exposeInt("maxExecutionSeconds", {
      nullable: true,
      description: "An execution held longer is taken back by the recovery sweep (EXECUTION_TIMED_OUT); null: no limit.",
    }),
    payload: t.expose("payload", { type: "JSON", nullable: true, description: "What the work needs, as given at creation." }),
    result: t.expose("result", { type: "JSON", nullable: true, description: "What the work produced, as the last release that gave one said." }),
    subIssues: t.field({
      type: IssueConnectionRef,
      description: "The issues created with this one as parent, oldest first.",
      args: { first: t.arg.int({ defaultValue: 50 }), after: t.arg.string() },
      resolve: (issue, args, ctx) => subIssuePage(ctx, issue, args.first, args.after ?? null),
    }),
  }),
});

const IssueEdgeRef = builder.objectRef<IssueEdge>("IssueEdge");

IssueEdgeRef.implement({
  fields: (t) => ({
    cursor: t.exposeString("cursor"),
    node: t.field({ type: IssueRef, resolve: (e) => e.node }),
  }),
});

const PageInfoRef = builder.objectRef<IssueConnection["pageInfo"]>("PageInfo").implement({
  fields: (t) => ({
    hasNextPage: t.exposeBoolean("hasNextPage"),
    endCursor: t.exposeString("endCursor", { nullable: true }),
  }),
});

export const IssueConnectionRef = builder.objectRef<IssueConnection>("IssueConnection");

IssueConnectionRef.implement({
  fields: (t) => ({
    edges: t.field({ type: [IssueEdgeRef], resolve: (c) => c.edges }),
    pageInfo: t.field({ type: PageInfoRef, resolve: (c) => c.pageInfo }),
  }),
});

export const CreateIssueInputRef = builder.inputType("CreateIssueInput", {
  fields: (t) => ({
    title: t.string({ required: true }),
    description: t.string(),
    priority: t.field({ type: IssuePriorityEnum, defaultValue: "MEDIUM" }),
    assigneeAgentId: t.id(),
    concurrencyKey: t.string({ description: "1..200 characters, compared exactly; leave out for the unkeyed pool." }),
    maxAttempts: t.int({ defaultValue: 3 }),
    status: t.field({ type: IssueStatusEnum, defaultValue: "OPEN", description: "BACKLOG or OPEN only." }),
    parentId: t.id({ description: "The issue this one is split from (same company)." }),
    blockedBy: t.idList({ description: "At most 100 issues of the same company this one waits on until they are DONE." }),
    notBefore: t.field({ type: "DateTime", description: "Not claimable before this instant (database clock)." }),
    idempotencyKey: t.string({
      description: "1..200 characters. A create whose key the company already has creates nothing and answers that issue.",
    }),
    retryDelaySeconds: t.int({ defaultValue: 0, description: "0..86400: backoff base after a failed attempt." }),
    maxExecutionSeconds: t.int({ description: "1..604800: an execution held longer is taken back." }),
    payload: t.field({ type: "JSON", description: "At most 64 KB serialised." }),
  }),
});

export const ClaimNextInputRef = builder.inputType("ClaimNextInput", {
  description: "releaseIssue's next: claim the caller's next issue right after the release, as claimIssue without issueId would.",
  fields: (t) => ({
    includeUnassigned: t.boolean({ defaultValue: false }),
    startExecution: t.boolean({ defaultValue: true, description: "Take the execution lock too (IN_PROGRESS, attempt counted)." }),
  }),
});

export const UpdateIssueInputRef = builder.inputType("UpdateIssueInput", {
  description: "Fields left out are kept; assigneeAgentId: null unassigns.",
  fields: (t) => ({
    title: t.string(),
    description: t.string(),
    priority: t.field({ type: IssuePriorityEnum }),
    assigneeAgentId: t.id(),
    concurrencyKey: t.string({ description: "null: the unkeyed pool. Only while the issue is not CLAIMED or IN_PROGRESS." }),
    maxAttempts: t.int(),
    status: t.field({ type: IssueStatusEnum }),
    notBefore: t.field({ type: "DateTime", description: "null clears the delay." }),
    retryDelaySeconds: t.int({ description: "0..86400; null is 0." }),
    maxExecutionSeconds: t.int({ description: "1..604800; null removes the limit." }),
  }),
});
