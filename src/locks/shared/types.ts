// What the lock verbs answer: a run with its liveness, the acting agent, and
// each verb's result union (JSON objects whose keys match the GraphQL
// fields). The shapes every layer shares are in src/domain/.
import type { Issue, IssueStatus, Run, RunStatus, Timestamp } from "../../domain/types.js";

export interface RunView extends Run {
  live: boolean;
}

export interface AgentActor {
  companyId: string;
  agentId: string;
  agentNameKey: string;
}

// ---- outcomes: every domain result is one of these, never a thrown string ----

export interface NoIssueAvailable {
  __typename: "NoIssueAvailable";
  message: string;
}
export interface CheckoutConflict {
  __typename: "CheckoutConflict";
  message: string;
  issueId: string;
  status: IssueStatus;
  ownerAgentId: string | null;
  ownerRunId: string | null;
  executionRunId: string | null;
  holderRunIsLive: boolean;
}
export interface ExecutionConflict {
  __typename: "ExecutionConflict";
  message: string;
  issueId: string;
  ownerAgentId: string | null;
  ownerRunId: string | null;
}
export interface UnexpectedStatus {
  __typename: "UnexpectedStatus";
  message: string;
  issueId: string;
  status: IssueStatus;
  expectedStatuses: IssueStatus[];
}
export interface AttemptsExhausted {
  __typename: "AttemptsExhausted";
  message: string;
  issueId: string;
  attemptCount: number;
  maxAttempts: number;
}
export interface ConcurrencyLimitReached {
  __typename: "ConcurrencyLimitReached";
  message: string;
  key: string;
  maxActive: number;
}
/** A claim by id of an OPEN issue that is not ready: blockers not DONE, or notBefore still ahead. */
export interface IssueWaiting {
  __typename: "IssueWaiting";
  message: string;
  issueId: string;
  waitingOn: string[];
  notBefore: Timestamp | null;
}
/** An edge that would close a cycle: path runs from blockedById along blockedBy edges to issueId. */
export interface DependencyCycle {
  __typename: "DependencyCycle";
  message: string;
  path: string[];
}
export interface NotCheckedOut {
  __typename: "NotCheckedOut";
  message: string;
  issueId: string;
}
export interface NotLockOwner {
  __typename: "NotLockOwner";
  message: string;
  issueId: string;
  ownerRunId: string | null;
}
export interface RunNotActive {
  __typename: "RunNotActive";
  message: string;
  runId: string;
  status: RunStatus | null;
}
export interface IssueNotFound {
  __typename: "IssueNotFound";
  message: string;
  issueId: string;
}
export interface InvalidTransition {
  __typename: "InvalidTransition";
  message: string;
  issueId: string;
  from: IssueStatus;
  to: IssueStatus;
}

export interface IssueClaimed {
  __typename: "IssueClaimed";
  issue: Issue;
  run: Run;
  alreadyHeld: boolean;
  adopted: boolean;
}
export interface ExecutionAcquired {
  __typename: "ExecutionAcquired";
  issue: Issue;
  alreadyHeld: boolean;
}
export interface IssueReleased {
  __typename: "IssueReleased";
  issue: Issue;
  /** Issues that waited on this one, when it was released DONE (not in the GraphQL answer: the API announces them). */
  freed?: string[];
  /** releaseIssue with `next`: the caller's next issue, claimed right after (null: nothing was claimable). */
  next?: IssueClaimed | null;
}
export interface IssueUpdated {
  __typename: "IssueUpdated";
  issue: Issue;
}
export interface RunUpdated {
  __typename: "RunUpdated";
  run: Run;
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
  | IssueNotFound;
export type AcquireExecutionResult = ExecutionAcquired | ExecutionConflict | NotCheckedOut | AttemptsExhausted | RunNotActive | IssueNotFound;
export type ReleaseIssueResult = IssueReleased | NotLockOwner | InvalidTransition | RunNotActive | IssueNotFound;
export type ForceReleaseResult = IssueReleased | IssueNotFound;
export type UpdateIssueResult = IssueUpdated | InvalidTransition | IssueNotFound;
export type RunResult = RunUpdated | RunNotActive;

export const runNotActive = (runId: string, status: RunStatus | null): RunNotActive => ({
  __typename: "RunNotActive",
  message: status === null ? `run ${runId} does not exist` : `run ${runId} is not active (${status === "RUNNING" ? "lease expired" : status})`,
  runId,
  status: status === "RUNNING" ? "TIMED_OUT" : status,
});

export const issueNotFound = (issueId: string): IssueNotFound => ({
  __typename: "IssueNotFound",
  message: `issue ${issueId} not found`,
  issueId,
});
