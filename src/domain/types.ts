// Baton's vocabulary, shared by every layer: the statuses, priorities and
// event kinds, and the shapes of an issue, a run, a lock event, a company and
// an agent as the API shows them. Nothing here imports from another layer;
// src/locks, src/auth, src/events and src/graphql all look down to it.

export type Timestamp = Date | string;

export const ISSUE_STATUSES = ["BACKLOG", "OPEN", "CLAIMED", "IN_PROGRESS", "BLOCKED", "DONE", "CANCELLED", "ESCALATED"] as const;
export type IssueStatus = (typeof ISSUE_STATUSES)[number];
export const ISSUE_PRIORITIES = ["CRITICAL", "HIGH", "MEDIUM", "LOW"] as const;
export type IssuePriority = (typeof ISSUE_PRIORITIES)[number];
export const RUN_STATUSES = ["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const RELEASE_OUTCOMES = ["DONE", "BLOCKED", "FAILED", "REQUEUE"] as const;
export type ReleaseOutcome = (typeof RELEASE_OUTCOMES)[number];
export const LOCK_EVENT_KINDS = ["CLAIMED", "ADOPTED", "EXECUTION_ACQUIRED", "RELEASED", "RECOVERED", "ESCALATED", "FORCE_RELEASED", "STATUS_CHANGED"] as const;
export type LockEventKind = (typeof LOCK_EVENT_KINDS)[number];

export interface Issue {
  id: string;
  companyId: string;
  title: string;
  description: string | null;
  status: IssueStatus;
  priority: IssuePriority;
  /** null: the company's unkeyed pool. */
  concurrencyKey: string | null;
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
  /** The issue this one was split from (createSubIssues); null for a top-level issue. */
  parentId: string | null;
  /** Not claimable before this instant (database clock); null: no delay. */
  notBefore: Timestamp | null;
  /** OPEN, an attempt left, no blocker short of DONE, notBefore null or past (docs/lifecycle.md, Ready). */
  ready: boolean;
  /** How many blockers are not DONE yet (waitingOn's length). */
  waitingCount: number;
  idempotencyKey: string | null;
  retryDelaySeconds: number;
  maxExecutionSeconds: number | null;
  payload: unknown;
  result: unknown;
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

export interface Company {
  id: string;
  name: string;
  createdAt: Date | string;
}

export interface Agent {
  id: string;
  companyId: string;
  name: string;
  nameKey: string;
  createdAt: Date | string;
  /** Set while the agent is disabled (disableAgent), with the reason given. */
  disabledAt: Date | string | null;
  disabledReason: string | null;
}

/** Where committed lock events go (the pub/sub fan-out, src/events/bus.ts). Never throws. */
export interface EventSink {
  publish(events: readonly LockEvent[]): void;
}

/** Who is calling: resolved from the bearer token (src/auth/principal.ts). */
export type Principal =
  | { role: "ADMIN"; companyId: null; agentId: null; keyId: null }
  | { role: "BOARD"; companyId: string; agentId: null; keyId: string }
  | { role: "AGENT"; companyId: string; agentId: string; agentNameKey: string; keyId: string };
