// What the grouped agent statements are asked and what they answer, one
// request at a time: CLAIM_NEXT_FOR_EACH (claimNextForEach.ts),
// ACQUIRE_IF_CHECKOUT_HELD (acquireExecution.ts) and RELEASE_IF_CHECKOUT_HELD
// (releaseIssues.ts). Types only, importing nothing from the verbs, so that
// deps.ts (LockGroups) and the verbs can both name them without a cycle.
import type { AgentActor, RunView } from "./types.js";
import type { Issue, ReleaseOutcome } from "../../domain/types.js";

export interface ClaimRequest {
  actor: AgentActor;
  runId: string;
  includeUnassigned: boolean;
  /** Also take the execution lock (IN_PROGRESS, attempt counted), as acquireExecution right after the claim would. */
  start?: boolean;
}

export interface ClaimAnswer {
  run: RunView | null;
  issue: Issue | null;
}

/** ACQUIRE_IF_CHECKOUT_HELD's decision on one request. */
export type AcquireVerdict = "ALREADY_HELD" | "EXECUTION_CONFLICT" | "NOT_CHECKED_OUT" | "EXHAUSTED" | "ACQUIRE";

export interface AcquireRequest {
  actor: AgentActor;
  runId: string;
  issueId: string;
}

export interface AcquireAnswer {
  run: RunView | null;
  verdict: AcquireVerdict | null;
  current: Issue | null;
  issue: Issue | null;
  ownerAgentId: string | null;
}

/** RELEASE_IF_CHECKOUT_HELD's decision on one request. */
export type ReleaseVerdict = "NOT_OWNER" | "INVALID" | "RELEASE";

export interface ReleaseRequest {
  actor: AgentActor;
  runId: string;
  issueId: string;
  outcome: ReleaseOutcome;
  /** As recorded in the event: the outcome, or "OUTCOME: the caller's reason". */
  reason: string;
  /** REQUEUE or FAILED only: not claimable again for this many seconds (instead of the backoff). */
  retryAfterSeconds?: number | null;
  /** What the work produced, serialised JSON (validated); null leaves the issue's result as it is. */
  result?: string | null;
}

export interface ReleaseAnswer {
  run: RunView | null;
  verdict: ReleaseVerdict | null;
  current: Issue | null;
  issue: Issue | null;
  /** The issues that waited on this one, when it was released DONE. */
  freed?: string[];
}
