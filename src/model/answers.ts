// The answers the model gives: the members of the contract's result unions
// (schema.graphql, src/locks/shared/types.ts), with `__typename` and the fields that
// say what happened. Messages are left out. Errors the API throws (FORBIDDEN,
// BAD_USER_INPUT, NOT_FOUND) are answers here too, with nothing changed.
import type { Issue, IssueStatus, Run, RunStatus } from "./state.js";

export interface IssueClaimed {
  __typename: "IssueClaimed";
  issue: Issue;
  runId: string;
  alreadyHeld: boolean;
  adopted: boolean;
}
export interface IssuesClaimed {
  __typename: "IssuesClaimed";
  issues: Issue[];
  runId: string;
}
export interface NoIssueAvailable {
  __typename: "NoIssueAvailable";
}
export interface CheckoutConflict {
  __typename: "CheckoutConflict";
  issueId: string;
  status: IssueStatus;
  ownerAgentId: string | null;
  ownerRunId: string | null;
  executionRunId: string | null;
  holderRunIsLive: boolean;
}
export interface ExecutionConflict {
  __typename: "ExecutionConflict";
  issueId: string;
  ownerAgentId: string | null;
  ownerRunId: string | null;
}
export interface UnexpectedStatus {
  __typename: "UnexpectedStatus";
  issueId: string;
  status: IssueStatus;
  expectedStatuses: IssueStatus[];
}
export interface AttemptsExhausted {
  __typename: "AttemptsExhausted";
  issueId: string;
  attemptCount: number;
  maxAttempts: number;
}
export interface ConcurrencyLimitReached {
  __typename: "ConcurrencyLimitReached";
  key: string;
  maxActive: number;
}
/** A claim by id of an OPEN issue that is not ready: blockers short of DONE, or notBefore ahead. */
export interface IssueWaiting {
  __typename: "IssueWaiting";
  issueId: string;
  waitingOn: string[];
  notBefore: number | null;
}
/** An edge that would close a cycle: from blockedById along blockedBy edges to issueId, each issue once. */
export interface DependencyCycle {
  __typename: "DependencyCycle";
  path: string[];
}
export interface DependencyAdded {
  __typename: "DependencyAdded";
  issue: Issue;
}
export interface DependencyRemoved {
  __typename: "DependencyRemoved";
  issue: Issue;
}
/** createIssue / createIssues (the GraphQL answer is the list): one issue per input, in input order; an input whose idempotency key exists answers that issue. */
export interface IssuesCreated {
  __typename: "IssuesCreated";
  issues: Issue[];
}
export interface SubIssuesCreated {
  __typename: "SubIssuesCreated";
  parent: Issue;
  issues: Issue[];
}
export interface NotCheckedOut {
  __typename: "NotCheckedOut";
  issueId: string;
}
export interface NotLockOwner {
  __typename: "NotLockOwner";
  issueId: string;
  ownerRunId: string | null;
}
export interface RunNotActive {
  __typename: "RunNotActive";
  runId: string;
  status: RunStatus | null;
}
export interface IssueNotFound {
  __typename: "IssueNotFound";
  issueId: string;
}
export interface InvalidTransition {
  __typename: "InvalidTransition";
  issueId: string;
  from: IssueStatus;
  to: IssueStatus;
}
export interface ExecutionAcquired {
  __typename: "ExecutionAcquired";
  issue: Issue;
  alreadyHeld: boolean;
}
export interface IssueReleased {
  __typename: "IssueReleased";
  issue: Issue;
  /** releaseIssue with `next`: the caller's next issue, claimed right after the release (null: nothing was claimable). Left out without `next`. */
  next?: IssueClaimed | null;
}
export interface IssuesReleased {
  __typename: "IssuesReleased";
  issues: Issue[];
  refused: (NotLockOwner | InvalidTransition | IssueNotFound)[];
}
export interface IssueUpdated {
  __typename: "IssueUpdated";
  issue: Issue;
}
export interface RunUpdated {
  __typename: "RunUpdated";
  run: Run;
}
/** startRun's answer (the GraphQL HeartbeatRun). */
export interface RunStarted {
  __typename: "HeartbeatRun";
  run: Run;
}
export interface HeartbeatTick {
  __typename: "HeartbeatTick";
  runs: Run[];
  claims: IssueClaimed[];
}
/** One recovery sweep's counts (SweepCounts in src/locks/recovery/sweep.ts). */
export interface SweepCounts {
  __typename: "SweepCounts";
  timedOutRuns: number;
  recoveredIssues: number;
  escalatedIssues: number;
}
/**
 * disableAgent's and enableAgent's answer (the GraphQL Agent): whether it is
 * disabled now, and the reason disableAgent was given (trimmed; null once enabled).
 */
export interface AgentAnswer {
  __typename: "Agent";
  agentId: string;
  disabled: boolean;
  disabledReason: string | null;
}
/** The model's clock moved (no API verb: time passing). */
export interface Ticked {
  __typename: "Ticked";
  clock: number;
}
/** A GraphQL error: nothing changed. */
export interface ErrorAnswer {
  __typename: "Error";
  code: "FORBIDDEN" | "BAD_USER_INPUT" | "NOT_FOUND";
  message: string;
}

export type ClaimIssueResult =
  | IssueClaimed
  | NoIssueAvailable
  | CheckoutConflict
  | UnexpectedStatus
  | AttemptsExhausted
  | ConcurrencyLimitReached
  | IssueWaiting
  | RunNotActive
  | IssueNotFound
  | ErrorAnswer;
export type ClaimIssuesResult = IssuesClaimed | NoIssueAvailable | RunNotActive | ErrorAnswer;
export type AcquireExecutionResult = ExecutionAcquired | ExecutionConflict | NotCheckedOut | AttemptsExhausted | RunNotActive | IssueNotFound | ErrorAnswer;
export type ReleaseIssueResult = IssueReleased | NotLockOwner | InvalidTransition | RunNotActive | IssueNotFound | ErrorAnswer;
export type ReleaseIssuesResult = IssuesReleased | RunNotActive | ErrorAnswer;
export type ForceReleaseResult = IssueReleased | IssueNotFound | ErrorAnswer;
export type UpdateIssueResult = IssueUpdated | InvalidTransition | IssueNotFound | ErrorAnswer;
export type RunResult = RunUpdated | RunNotActive | ErrorAnswer;
export type AgentResult = AgentAnswer | ErrorAnswer;
export type CreateIssuesResult = IssuesCreated | ErrorAnswer;
export type CreateSubIssuesResult = SubIssuesCreated | NotLockOwner | RunNotActive | IssueNotFound | ErrorAnswer;
export type AddDependencyResult = DependencyAdded | DependencyCycle | IssueNotFound | NotLockOwner | ErrorAnswer;
export type RemoveDependencyResult = DependencyRemoved | IssueNotFound | NotLockOwner | ErrorAnswer;

export type Answer =
  | ClaimIssueResult
  | ClaimIssuesResult
  | AcquireExecutionResult
  | ReleaseIssueResult
  | ReleaseIssuesResult
  | ForceReleaseResult
  | UpdateIssueResult
  | RunResult
  | AgentResult
  | CreateIssuesResult
  | CreateSubIssuesResult
  | AddDependencyResult
  | RemoveDependencyResult
  | RunStarted
  | HeartbeatTick
  | SweepCounts
  | Ticked;

export const issueNotFound = (issueId: string): IssueNotFound => ({ __typename: "IssueNotFound", issueId });
export const forbidden = (message: string): ErrorAnswer => ({ __typename: "Error", code: "FORBIDDEN", message });
export const badInput = (message: string): ErrorAnswer => ({ __typename: "Error", code: "BAD_USER_INPUT", message });
export const notFound = (message: string): ErrorAnswer => ({ __typename: "Error", code: "NOT_FOUND", message });
/** runNotActive (src/locks/shared/types.ts): a RUNNING run that is not live has an expired lease, and is reported TIMED_OUT. */
export const runNotActive = (runId: string, status: RunStatus | null): RunNotActive => ({
  __typename: "RunNotActive",
  runId,
  status: status === "RUNNING" ? "TIMED_OUT" : status,
});
