// The domain's shapes, as the lock statements return them (JSON objects whose
// keys match the GraphQL fields). Timestamps arrive as ISO strings from JSON.
export type Timestamp = Date | string;

export const ISSUE_STATUSES = ["BACKLOG", "OPEN", "CLAIMED", "IN_PROGRESS", "BLOCKED", "DONE", "CANCELLED", "ESCALATED"] as const;
export type IssueStatus = (typeof ISSUE_STATUSES)[number];
export const ISSUE_PRIORITIES = ["CRITICAL", "HIGH", "MEDIUM", "LOW"] as const;
export type IssuePriority = (typeof ISSUE_PRIORITIES)[number];
export const RUN_STATUSES = ["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const RELEASE_OUTCOMES = ["DONE", "BLOCKED", "FAILED", "REQUEUE"] as const;
export type ReleaseOutcome = (typeof RELEASE_OUTCOMES)[number];
export const LOCK_EVENT_KINDS = [
  "CLAIMED",
  "ADOPTED",
  "EXECUTION_ACQUIRED",
  "RELEASED",
  "RECOVERED",
  "ESCALATED",
  "FORCE_RELEASED",
  "STATUS_CHANGED",
] as const;
export type LockEventKind = (typeof LOCK_EVENT_KINDS)[number];

export interface Issue {
  id: string;
  companyId: string;
  title: string;
  description: string | null;
  status: IssueStatus;
  priority: IssuePriority;
  assigneeAgentId: string | null;
  checkoutRunId: string | null;
  executionRunId: string | null;
  executionAgentNameKey: string | null;
  attemptCount: number;
  maxAttempts: number;
  lockEpoch: number;
  claimedAt: Timestamp | null;
  executionLockedAt: Timestamp | null;
  createdAt: Timestamp;
  updatedAt: Timestamp;
}

export interface Run {
  id: string;
  companyId: string;
  agentId: string;
  status: RunStatus;
  startedAt: Timestamp;
  lastHeartbeatAt: Timestamp;
  leaseExpiresAt: Timestamp;
  finishedAt: Timestamp | null;
}

/** A run as the lock statements see it: with liveness on the database clock. */
export interface RunView extends Run {
  live: boolean;
}

export interface LockEvent {
  /** Decimal string: bigint does not fit a JS number safely. */
  seq: string;
  companyId: string;
  issueId: string;
  kind: LockEventKind;
  status: IssueStatus;
  runId: string | null;
  agentId: string | null;
  checkoutRunId: string | null;
  executionRunId: string | null;
  reason: string | null;
  at: Timestamp;
}

/** Who is acting: an agent, always inside one company. */
export interface AgentActor {
  companyId: string;
  agentId: string;
  agentNameKey: string;
}

// ---- outcomes: every domain result is one of these, never a thrown string ----

export interface NoIssueAvailable { __typename: "NoIssueAvailable"; message: string }
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
export interface ExecutionConflict { __typename: "ExecutionConflict"; message: string; issueId: string; ownerAgentId: string | null; ownerRunId: string | null }
export interface UnexpectedStatus { __typename: "UnexpectedStatus"; message: string; issueId: string; status: IssueStatus; expectedStatuses: IssueStatus[] }
export interface AttemptsExhausted { __typename: "AttemptsExhausted"; message: string; issueId: string; attemptCount: number; maxAttempts: number }
export interface NotCheckedOut { __typename: "NotCheckedOut"; message: string; issueId: string }
export interface NotLockOwner { __typename: "NotLockOwner"; message: string; issueId: string; ownerRunId: string | null }
export interface RunNotActive { __typename: "RunNotActive"; message: string; runId: string; status: RunStatus | null }
export interface IssueNotFound { __typename: "IssueNotFound"; message: string; issueId: string }
export interface InvalidTransition { __typename: "InvalidTransition"; message: string; issueId: string; from: IssueStatus; to: IssueStatus }

export interface IssueClaimed { __typename: "IssueClaimed"; issue: Issue; run: Run; alreadyHeld: boolean; adopted: boolean }
export interface ExecutionAcquired { __typename: "ExecutionAcquired"; issue: Issue; alreadyHeld: boolean }
export interface IssueReleased { __typename: "IssueReleased"; issue: Issue }
export interface IssueUpdated { __typename: "IssueUpdated"; issue: Issue }
export interface RunUpdated { __typename: "RunUpdated"; run: Run }

export type ClaimIssueResult = IssueClaimed | NoIssueAvailable | CheckoutConflict | UnexpectedStatus | AttemptsExhausted | RunNotActive | IssueNotFound;
export type AcquireExecutionResult = ExecutionAcquired | ExecutionConflict | NotCheckedOut | AttemptsExhausted | RunNotActive | IssueNotFound;
export type ReleaseIssueResult = IssueReleased | NotLockOwner | InvalidTransition | RunNotActive | IssueNotFound;
export type ForceReleaseResult = IssueReleased | IssueNotFound;
export type UpdateIssueResult = IssueUpdated | InvalidTransition | IssueNotFound;
export type RunResult = RunUpdated | RunNotActive;

/** A valid token used outside its scope: another agent's run. Maps to FORBIDDEN. */
export class ForbiddenError extends Error {
  override name = "ForbiddenError";
}
/** Input that is well-typed but not acceptable. Maps to BAD_USER_INPUT; nothing changed. */
export class InvalidInputError extends Error {
  override name = "InvalidInputError";
}

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
