import type { Issue } from "../../domain/types.js";
import { builder } from "../builder.js";
import { IssuePriorityEnum, IssueStatusEnum } from "./enums.js";

export const IssueRef = builder.objectRef<Issue>("Issue").implement({
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
  }),
});

export interface IssueEdge {
  cursor: string;
  node: Issue;
}
export interface IssueConnection {
  edges: IssueEdge[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

const IssueEdgeRef = builder.objectRef<IssueEdge>("IssueEdge").implement({
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

export const IssueConnectionRef = builder.objectRef<IssueConnection>("IssueConnection").implement({
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
  }),
});
