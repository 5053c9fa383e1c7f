// releaseIssues: the holder gives back many issues in one statement. Each
// issue is released or refused on its own; both locks of a released issue
// clear together. releaseIssue is this with one id.
import { appendEvents, issueJson, queryOne, raw, runViewJson, sql } from "../db/sql.js";
import type { LockDeps } from "./deps.js";
import { CLEAR_LOCKS, lockedIssuesCte, refuseRun, reopenOrEscalate, runCte } from "./deps.js";
import type {
  AgentActor,
  Issue,
  IssueNotFound,
  InvalidTransition,
  LockEvent,
  NotLockOwner,
  ReleaseOutcome,
  RunNotActive,
  RunView,
} from "./types.js";
import { InvalidInputError, issueNotFound } from "./types.js";
import { validateText } from "./validate.js";

export const MAX_REASON_LENGTH = 1000;
export const MAX_RELEASE_BATCH = 1000;

export type ReleaseRefusal = NotLockOwner | InvalidTransition | IssueNotFound;
export interface IssuesReleased {
  __typename: "IssuesReleased";
  issues: Issue[];
  refused: ReleaseRefusal[];
}
export type ReleaseIssuesResult = IssuesReleased | RunNotActive;

/** The status an outcome leads to; FAILED and REQUEUE reopen (or escalate). */
const TARGET: Record<ReleaseOutcome, string> = {
  DONE: `'DONE'::issue_status`,
  BLOCKED: `'BLOCKED'::issue_status`,
  FAILED: reopenOrEscalate("i"),
  REQUEUE: reopenOrEscalate("i"),
};

type Verdict = "NOT_OWNER" | "INVALID" | "RELEASE";

/**
 * RELEASE_IF_CHECKOUT_HELD. Invariant: only the run holding the checkout can
 * release, and both locks clear in the same row update as the status (no
 * half-released pair is ever visible). The guard is on the locked rows
 * themselves (locked in id order, so two batch releases never deadlock), so
 * a release racing a recovery or a re-claim either finds its own lock or
 * answers NotLockOwner. DONE from CLAIMED is refused: work is finished only
 * under the execution lock. A dead run releases nothing (RunNotActive).
 */
function releaseStatement(runId: string, actor: AgentActor, issueIds: string[], outcome: ReleaseOutcome, reason: string) {
  return sql`
    WITH ${runCte(runId, actor, false)},
    ${lockedIssuesCte(actor, issueIds)},
    verdict AS (
      SELECT c.id, CASE
        WHEN c.checkout_run_id IS DISTINCT FROM ${runId}::uuid THEN 'NOT_OWNER'
        WHEN ${outcome}::text = 'DONE' AND c.status = 'CLAIMED' THEN 'INVALID'
        ELSE 'RELEASE' END AS verdict
        FROM cur c
    ),
    changed AS (
      UPDATE issues i
         SET status = ${raw(TARGET[outcome])}, ${raw(CLEAR_LOCKS)}, updated_at = now()
        FROM verdict v
       WHERE i.id = v.id AND v.verdict = 'RELEASE'
      RETURNING i.*, 'RELEASED' AS ev_kind, ${runId}::uuid AS ev_run_id,
                ${actor.agentId}::uuid AS ev_agent_id, ${reason}::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT ${runViewJson("run")} FROM run) AS run,
           (SELECT coalesce(json_agg(json_build_object('verdict', v.verdict, 'issue', ${issueJson("c")})), '[]'::json)
              FROM cur c JOIN verdict v ON v.id = c.id) AS current,
           (SELECT coalesce(json_agg(${issueJson("c")} ORDER BY c.id), '[]'::json) FROM changed c) AS released,
           (SELECT list FROM events) AS events`;
}

function refusal(runId: string, verdict: Verdict, cur: Issue): ReleaseRefusal {
  if (verdict === "INVALID") {
    return {
      __typename: "InvalidTransition",
      message: `issue ${cur.id} is CLAIMED: acquire execution before releasing it as DONE`,
      issueId: cur.id,
      from: cur.status,
      to: "DONE",
    };
  }
  return {
    __typename: "NotLockOwner",
    message: cur.checkoutRunId ? `issue ${cur.id} is checked out by run ${cur.checkoutRunId}, not ${runId}` : `issue ${cur.id} is not checked out`,
    issueId: cur.id,
    ownerRunId: cur.checkoutRunId,
  };
}

export async function releaseIssues(
  deps: LockDeps,
  actor: AgentActor,
  input: { runId: string; issueIds: string[]; outcome: ReleaseOutcome; reason?: string | null },
): Promise<ReleaseIssuesResult> {
  const { runId, outcome } = input;
  const issueIds = [...new Set(input.issueIds)];
  if (issueIds.length === 0) throw new InvalidInputError("issueIds must not be empty");
  if (issueIds.length > MAX_RELEASE_BATCH) throw new InvalidInputError(`at most ${MAX_RELEASE_BATCH} issues per call`);
  if (input.reason != null) validateText("reason", input.reason, MAX_REASON_LENGTH);
  const reason = input.reason?.trim() ? `${outcome}: ${input.reason.trim()}` : outcome;
  const row = await queryOne<{
    run: RunView | null;
    current: { verdict: Verdict; issue: Issue }[];
    released: Issue[];
    events: LockEvent[];
  }>(deps.db, releaseStatement(runId, actor, issueIds, outcome, reason));
  deps.events.publish(row.events);
  const refused = refuseRun(row.run, runId, actor);
  if (refused) return refused;
  const seen = new Map(row.current.map((c) => [c.issue.id, c]));
  return {
    __typename: "IssuesReleased",
    issues: row.released,
    refused: issueIds.flatMap((id) => {
      const c = seen.get(id);
      if (!c) return [issueNotFound(id)];
      return c.verdict === "RELEASE" ? [] : [refusal(runId, c.verdict, c.issue)];
    }),
  };
}
