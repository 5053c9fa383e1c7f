// Success payloads and the result unions of the mutations.
import type * as T from "../../locks/shared/types.js";
import type { SchedulerTick } from "../../locks/runs/schedulerTick.js";
import type { IssuesClaimed } from "../../locks/claim/claimIssues.js";
import type { IssuesReleased } from "../../locks/release/releaseIssues.js";
import type { DependencyChanged } from "../../locks/graph/dependencies.js";
import type { SubIssuesCreated } from "../../locks/graph/createSubIssues.js";
import type { Agent, Company } from "../../domain/types.js";
import { builder } from "../builder.js";
import { AgentRef, CompanyRef } from "./company.js";
import { IssueRef } from "./issue.js";
import * as P from "./problems.js";
import { HeartbeatRunRef } from "./run.js";

const IssueClaimedRef = builder.objectRef<T.IssueClaimed>("IssueClaimed").implement({
  fields: (t) => ({
    issue: t.field({ type: IssueRef, resolve: (r) => r.issue }),
    run: t.field({ type: HeartbeatRunRef, resolve: (r) => r.run }),
    alreadyHeld: t.exposeBoolean("alreadyHeld", {
      description: "True when this run already held the checkout (idempotent re-claim, no new event).",
    }),
    adopted: t.exposeBoolean("adopted", { description: "True when the lock was taken over from a terminal or expired run." }),
  }),
});

const ExecutionAcquiredRef = builder.objectRef<T.ExecutionAcquired>("ExecutionAcquired").implement({
  fields: (t) => ({
    issue: t.field({ type: IssueRef, resolve: (r) => r.issue }),
    alreadyHeld: t.exposeBoolean("alreadyHeld"),
  }),
});

const IssueReleasedRef = builder.objectRef<T.IssueReleased>("IssueReleased").implement({
  fields: (t) => ({
    issue: t.field({ type: IssueRef, resolve: (r) => r.issue }),
    next: t.field({
      type: IssueClaimedRef,
      nullable: true,
      description: "releaseIssue with next: the issue claimed right after the release; null when nothing was claimable (or next was not asked).",
      resolve: (r) => r.next ?? null,
    }),
  }),
});

const IssueUpdatedRef = builder.objectRef<T.IssueUpdated>("IssueUpdated").implement({
  fields: (t) => ({ issue: t.field({ type: IssueRef, resolve: (r) => r.issue }) }),
});

const RunUpdatedRef = builder.objectRef<T.RunUpdated>("RunUpdated").implement({
  fields: (t) => ({ run: t.field({ type: HeartbeatRunRef, resolve: (r) => r.run }) }),
});

const byTypename = (value: { __typename: string }) => value.__typename;

export const ClaimIssueResultRef = builder.unionType("ClaimIssueResult", {
  types: [
    IssueClaimedRef,
    P.NoIssueAvailableRef,
    P.CheckoutConflictRef,
    P.UnexpectedStatusRef,
    P.AttemptsExhaustedRef,
    P.RunNotActiveRef,
    P.IssueNotFoundRef,
    P.ConcurrencyLimitReachedRef,
    P.IssueWaitingRef,
  ],
  resolveType: byTypename,
});

export const AcquireExecutionResultRef = builder.unionType("AcquireExecutionResult", {
  types: [ExecutionAcquiredRef, P.ExecutionConflictRef, P.NotCheckedOutRef, P.AttemptsExhaustedRef, P.RunNotActiveRef, P.IssueNotFoundRef],
  resolveType: byTypename,
});

export const ReleaseIssueResultRef = builder.unionType("ReleaseIssueResult", {
  types: [IssueReleasedRef, P.NotLockOwnerRef, P.InvalidTransitionRef, P.RunNotActiveRef, P.IssueNotFoundRef],
  resolveType: byTypename,
});

export const ForceReleaseResultRef = builder.unionType("ForceReleaseResult", {
  types: [IssueReleasedRef, P.IssueNotFoundRef],
  resolveType: byTypename,
});

export const UpdateIssueResultRef = builder.unionType("UpdateIssueResult", {
  types: [IssueUpdatedRef, P.InvalidTransitionRef, P.IssueNotFoundRef],
  resolveType: byTypename,
});

export const RunResultRef = builder.unionType("RunResult", {
  types: [RunUpdatedRef, P.RunNotActiveRef],
  resolveType: byTypename,
});

export const CreateCompanyPayloadRef = builder.objectRef<{ company: Company; boardKey: string }>("CreateCompanyPayload").implement({
  fields: (t) => ({
    company: t.field({ type: CompanyRef, resolve: (p) => p.company }),
    boardKey: t.exposeString("boardKey", { description: "Shown once; only its hash is stored." }),
  }),
});

export const CreateAgentPayloadRef = builder.objectRef<{ agent: Agent; apiKey: string }>("CreateAgentPayload").implement({
  fields: (t) => ({
    agent: t.field({ type: AgentRef, resolve: (p) => p.agent }),
    apiKey: t.exposeString("apiKey", { description: "Shown once; only its hash is stored." }),
  }),
});

export const RotateKeyPayloadRef = builder.objectRef<{ apiKey: string }>("RotateKeyPayload").implement({
  fields: (t) => ({
    apiKey: t.exposeString("apiKey", { description: "Shown once, like createAgent's; only its hash is stored. The key it replaces no longer works." }),
  }),
});

export const HeartbeatTickRef = builder.objectRef<SchedulerTick>("HeartbeatTick").implement({
  fields: (t) => ({
    runs: t.field({ type: [HeartbeatRunRef], resolve: (tick) => tick.runs }),
    claims: t.field({ type: [IssueClaimedRef], resolve: (tick) => tick.claims }),
  }),
});

// ---- batch operations (beyond the contract) ----

const IssuesClaimedRef = builder.objectRef<IssuesClaimed>("IssuesClaimed").implement({
  description: "The issues claimed by one claimIssues call, in claim order (priority, then concurrency keys in turn, then oldest).",
  fields: (t) => ({
    issues: t.field({ type: [IssueRef], resolve: (r) => r.issues }),
    run: t.field({ type: HeartbeatRunRef, resolve: (r) => r.run }),
  }),
});

export const ClaimIssuesResultRef = builder.unionType("ClaimIssuesResult", {
  types: [IssuesClaimedRef, P.NoIssueAvailableRef, P.RunNotActiveRef],
  resolveType: byTypename,
});

const ReleaseRefusalRef = builder.unionType("ReleaseRefusal", {
  description: "Why one issue of a releaseIssues call was not released.",
  types: [P.NotLockOwnerRef, P.InvalidTransitionRef, P.IssueNotFoundRef],
  resolveType: byTypename,
});

const IssuesReleasedRef = builder.objectRef<IssuesReleased>("IssuesReleased").implement({
  description: "Each issue is released or refused on its own; the released ones committed together.",
  fields: (t) => ({
    issues: t.field({ type: [IssueRef], description: "The issues released.", resolve: (r) => r.issues }),
    refused: t.field({ type: [ReleaseRefusalRef], description: "One entry per issue not released.", resolve: (r) => r.refused }),
  }),
});

export const ReleaseIssuesResultRef = builder.unionType("ReleaseIssuesResult", {
  types: [IssuesReleasedRef, P.RunNotActiveRef],
  resolveType: byTypename,
});

const DependencyAddedRef = builder.objectRef<DependencyChanged>("DependencyAdded").implement({
  fields: (t) => ({ issue: t.field({ type: IssueRef, resolve: (r) => r.issue }) }),
});
const DependencyRemovedRef = builder.objectRef<DependencyChanged>("DependencyRemoved").implement({
  fields: (t) => ({ issue: t.field({ type: IssueRef, resolve: (r) => r.issue }) }),
});

export const AddDependencyResultRef = builder.unionType("AddDependencyResult", {
  types: [DependencyAddedRef, P.DependencyCycleRef, P.IssueNotFoundRef, P.NotLockOwnerRef],
  resolveType: byTypename,
});

export const RemoveDependencyResultRef = builder.unionType("RemoveDependencyResult", {
  types: [DependencyRemovedRef, P.IssueNotFoundRef, P.NotLockOwnerRef],
  resolveType: byTypename,
});

const SubIssuesCreatedRef = builder.objectRef<SubIssuesCreated>("SubIssuesCreated").implement({
  fields: (t) => ({
    parent: t.field({ type: IssueRef, resolve: (r) => r.parent }),
    issues: t.field({ type: [IssueRef], resolve: (r) => r.issues }),
  }),
});

export const CreateSubIssuesResultRef = builder.unionType("CreateSubIssuesResult", {
  types: [SubIssuesCreatedRef, P.NotLockOwnerRef, P.RunNotActiveRef, P.IssueNotFoundRef],
  resolveType: byTypename,
});
