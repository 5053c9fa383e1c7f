// Domain outcomes that are not successes: union members, never thrown strings.
import type * as T from "../../locks/shared/types.js";
import { builder } from "../builder.js";
import { IssueStatusEnum, RunStatusEnum } from "./enums.js";

const ProblemRef = builder.interfaceRef<{ __typename: string; message: string }>("Problem").implement({
  resolveType: (value) => value.__typename,
  fields: (t) => ({ message: t.exposeString("message") }),
});

const problem = <P extends { __typename: string; message: string }>(name: P["__typename"]) => builder.objectRef<P>(name);

export const NoIssueAvailableRef = problem<T.NoIssueAvailable>("NoIssueAvailable").implement({
  interfaces: [ProblemRef],
  fields: () => ({}),
});

export const CheckoutConflictRef = problem<T.CheckoutConflict>("CheckoutConflict").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({
    issueId: t.exposeID("issueId"),
    status: t.expose("status", { type: IssueStatusEnum }),
    ownerAgentId: t.exposeID("ownerAgentId", { nullable: true }),
    ownerRunId: t.exposeID("ownerRunId", { nullable: true }),
    executionRunId: t.exposeID("executionRunId", { nullable: true }),
    holderRunIsLive: t.exposeBoolean("holderRunIsLive", {
      description: "False when the holder's run is terminal or its lease has expired (recovery is pending).",
    }),
  }),
});

export const ExecutionConflictRef = problem<T.ExecutionConflict>("ExecutionConflict").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({
    issueId: t.exposeID("issueId"),
    ownerAgentId: t.exposeID("ownerAgentId", { nullable: true }),
    ownerRunId: t.exposeID("ownerRunId", { nullable: true }),
  }),
});

export const UnexpectedStatusRef = problem<T.UnexpectedStatus>("UnexpectedStatus").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({
    issueId: t.exposeID("issueId"),
    status: t.expose("status", { type: IssueStatusEnum }),
    expectedStatuses: t.expose("expectedStatuses", { type: [IssueStatusEnum] }),
  }),
});

export const AttemptsExhaustedRef = problem<T.AttemptsExhausted>("AttemptsExhausted").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({
    issueId: t.exposeID("issueId"),
    attemptCount: t.exposeInt("attemptCount"),
    maxAttempts: t.exposeInt("maxAttempts"),
  }),
});

export const ConcurrencyLimitReachedRef = problem<T.ConcurrencyLimitReached>("ConcurrencyLimitReached").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({
    key: t.exposeString("key"),
    maxActive: t.exposeInt("maxActive"),
  }),
});

export const NotCheckedOutRef = problem<T.NotCheckedOut>("NotCheckedOut").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({ issueId: t.exposeID("issueId") }),
});

export const NotLockOwnerRef = problem<T.NotLockOwner>("NotLockOwner").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({ issueId: t.exposeID("issueId"), ownerRunId: t.exposeID("ownerRunId", { nullable: true }) }),
});

export const RunNotActiveRef = problem<T.RunNotActive>("RunNotActive").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({
    runId: t.exposeID("runId"),
    status: t.expose("status", { type: RunStatusEnum, nullable: true }),
  }),
});

export const IssueNotFoundRef = problem<T.IssueNotFound>("IssueNotFound").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({ issueId: t.exposeID("issueId") }),
});

export const InvalidTransitionRef = problem<T.InvalidTransition>("InvalidTransition").implement({
  interfaces: [ProblemRef],
  fields: (t) => ({
    issueId: t.exposeID("issueId"),
    from: t.expose("from", { type: IssueStatusEnum }),
    to: t.expose("to", { type: IssueStatusEnum }),
  }),
});

export const IssueWaitingRef = problem<T.IssueWaiting>("IssueWaiting").implement({
  interfaces: [ProblemRef],
  description: "A claim by id of an OPEN issue that is not ready: it waits on blockers not DONE yet, or on its notBefore.",
  fields: (t) => ({
    issueId: t.exposeID("issueId"),
    waitingOn: t.exposeIDList("waitingOn"),
    notBefore: t.expose("notBefore", { type: "DateTime", nullable: true }),
  }),
});

export const DependencyCycleRef = problem<T.DependencyCycle>("DependencyCycle").implement({
  interfaces: [ProblemRef],
  description: "The edge would close a cycle. path: the cycle's issues once each, from blockedById along blockedBy edges to issueId.",
  fields: (t) => ({ path: t.exposeIDList("path") }),
});
