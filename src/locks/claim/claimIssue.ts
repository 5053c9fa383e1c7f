// claimIssue: take the checkout lock, either on the caller's next claimable
// issue (CLAIM_NEXT_FOR_EACH, claimNextForEach.ts) or on one named issue
// (CHECKOUT_IF_EXPECTED, checkoutIfExpected.ts), and answer what happened;
// with startExecution, the execution lock too (claim-next: in the same
// statement; by id: acquireExecution right after).
// Each is one statement: the decision, the change and its ledger row commit
// together, and zero changed rows is a typed outcome, never an exception.
import { CLAIMABLE_STATUSES, checkoutIfExpected, waitingOn as blockersNotDone } from "./checkoutIfExpected.js";
import { claimNextForEach } from "./claimNextForEach.js";
import type { LockDeps } from "../shared/deps.js";
import { refuseRun, withoutLive } from "../runs/runs.js";
import type { AgentActor, ClaimIssueResult, IssueClaimed } from "../shared/types.js";
import { acquireExecution } from "../execution/acquireExecution.js";
import { certainlyNotApplied } from "../../db/sql.js";
import type { IssueStatus } from "../../domain/types.js";
import { issueNotFound } from "../shared/types.js";

export interface ClaimInput {
  runId: string;
  issueId?: string | null;
  expectedStatuses?: IssueStatus[] | null;
  includeUnassigned?: boolean | null;
  /** Take the execution lock too: the answer's issue is IN_PROGRESS, as if acquireExecution had followed. */
  startExecution?: boolean | null;
}

export async function claimIssue(deps: LockDeps, actor: AgentActor, input: ClaimInput): Promise<ClaimIssueResult> {
  if (input.issueId) {
    const claimed = await checkoutNamed(deps, actor, input.runId, input.issueId, input.expectedStatuses ?? ["OPEN"]);
    return input.startExecution && claimed.__typename === "IssueClaimed" ? started(deps, actor, claimed) : claimed;
  }
  return claimNext(deps, actor, input.runId, input.includeUnassigned ?? false, input.startExecution ?? false);
}

/**
 * A checkout by id, then its execution lock (acquireExecution), for
 * startExecution: what the two calls one after the other answer. Between them
 * the hold can only be lost (a force-release, the run's end): then the answer
 * says so as a checkout would.
 */
async function started(deps: LockDeps, actor: AgentActor, claimed: IssueClaimed): Promise<ClaimIssueResult> {
  const issueId = claimed.issue.id;
  // The checkout has committed: an acquisition that certainly changed nothing leaves it as it is (CLAIMED), never the
  // whole answer; one whose outcome is unknown is thrown.
  const acquired = await acquireExecution(deps, actor, { runId: claimed.run.id, issueId }).catch((err: unknown) => {
    if (certainlyNotApplied(err)) return null;
    throw err;
  });
  if (!acquired) return claimed;
  switch (acquired.__typename) {
    case "ExecutionAcquired":
      return { ...claimed, issue: acquired.issue };
    case "AttemptsExhausted":
    case "RunNotActive":
    case "IssueNotFound":
      return acquired;
    case "ExecutionConflict":
    case "NotCheckedOut":
      return {
        __typename: "CheckoutConflict",
        message: `issue ${issueId} was checked out by run ${claimed.run.id}, but its hold was lost before work could start: ${acquired.message}`,
        issueId,
        status: claimed.issue.status,
        ownerAgentId: acquired.__typename === "ExecutionConflict" ? acquired.ownerAgentId : null,
        ownerRunId: acquired.__typename === "ExecutionConflict" ? acquired.ownerRunId : null,
        executionRunId: acquired.__typename === "ExecutionConflict" ? acquired.ownerRunId : null,
        holderRunIsLive: acquired.__typename === "ExecutionConflict",
      };
  }
}

/** Without an issue id: CLAIM_NEXT_FOR_EACH, with the company's other claims in flight when the API groups them. */
async function claimNext(deps: LockDeps, actor: AgentActor, runId: string, includeUnassigned: boolean, start: boolean): Promise<ClaimIssueResult> {
  const request = { actor, runId, includeUnassigned, start };
  const { run, issue } = deps.groups
    ? await deps.groups.claim.submit(actor.companyId, request) // with the company's other claims in flight
    : (await claimNextForEach(deps, actor.companyId, [request]))[0]!;
  const refused = refuseRun(run, runId, actor);
  if (refused) return refused;
  if (!issue || !run) return { __typename: "NoIssueAvailable", message: "no claimable issue" };
  return { __typename: "IssueClaimed", issue, run: withoutLive(run), alreadyHeld: false, adopted: false };
}

/** With an issue id: CHECKOUT_IF_EXPECTED, its verdict turned into the answer. */
async function checkoutNamed(deps: LockDeps, actor: AgentActor, runId: string, issueId: string, expected: IssueStatus[]): Promise<ClaimIssueResult> {
  const row = await checkoutIfExpected(deps, actor, runId, issueId, expected);
  const refused = refuseRun(row.run, runId, actor);
  if (refused) return refused;
  const run = withoutLive(row.run!);
  const cur = row.current;
  if (!cur || !row.verdict) return issueNotFound(issueId);
  switch (row.verdict) {
    case "ALREADY_HELD":
      return { __typename: "IssueClaimed", issue: cur, run, alreadyHeld: true, adopted: false };
    case "CLAIM":
    case "ADOPT":
      return { __typename: "IssueClaimed", issue: row.issue!, run, alreadyHeld: false, adopted: row.verdict === "ADOPT" };
    case "WAITING": {
      const waitingOn = cur.waitingCount > 0 ? await blockersNotDone(deps, issueId) : [];
      const parts = [
        ...(waitingOn.length > 0 ? [`${waitingOn.length} blocker${waitingOn.length === 1 ? "" : "s"} not DONE (${waitingOn.join(", ")})`] : []),
        ...(cur.notBefore && waitingOn.length === 0 ? [`notBefore ${String(cur.notBefore)}`] : []),
      ];
      return {
        __typename: "IssueWaiting",
        message: parts.length
          ? `issue ${issueId} is not ready: it waits on ${parts.join(" and ")}`
          : `issue ${issueId} was not ready (what it waited on has just ended): claim it again`,
        issueId,
        waitingOn,
        notBefore: cur.notBefore,
      };
    }
    case "LIMIT_REACHED":
      return {
        __typename: "ConcurrencyLimitReached",
        message: `concurrency key ${row.limit!.key} already has ${row.limit!.maxActive} active issues, its limit`,
        key: row.limit!.key,
        maxActive: row.limit!.maxActive,
      };
    case "UNEXPECTED_STATUS":
      return {
        __typename: "UnexpectedStatus",
        message:
          CLAIMABLE_STATUSES.includes(cur.status) || !expected.includes(cur.status)
            ? `issue ${issueId} is ${cur.status}, expected one of [${expected.join(", ")}]`
            : `issue ${issueId} is ${cur.status}: a checkout starts only from ${CLAIMABLE_STATUSES.join(", ")}`,
        issueId,
        status: cur.status,
        expectedStatuses: expected,
      };
    case "HELD":
      return {
        __typename: "CheckoutConflict",
        message: `issue ${issueId} is checked out by run ${cur.checkoutRunId} of agent ${row.holder?.agentId ?? "unknown"}`,
        issueId,
        status: cur.status,
        ownerAgentId: row.holder?.agentId ?? null,
        ownerRunId: cur.checkoutRunId,
        executionRunId: cur.executionRunId,
        holderRunIsLive: true,
      };
    case "ASSIGNED":
      return {
        __typename: "CheckoutConflict",
        message: `issue ${issueId} is assigned to agent ${cur.assigneeAgentId}`,
        issueId,
        status: cur.status,
        ownerAgentId: cur.assigneeAgentId,
        ownerRunId: cur.checkoutRunId,
        executionRunId: cur.executionRunId,
        holderRunIsLive: false,
      };
    case "EXHAUSTED":
    case "ADOPT_EXHAUSTED": {
      const after = row.issue ?? cur;
      return {
        __typename: "AttemptsExhausted",
        message:
          row.verdict === "ADOPT_EXHAUSTED"
            ? `issue ${issueId} used its last attempt when its holder died; it is now ESCALATED`
            : `issue ${issueId} has used all ${after.maxAttempts} attempts`,
        issueId,
        attemptCount: after.attemptCount,
        maxAttempts: after.maxAttempts,
      };
    }
  }
}
