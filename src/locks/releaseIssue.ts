// releaseIssue: the holder gives the issue back, clearing both locks at once.
import { appendEvents, issueJson, queryOne, raw, runViewJson, sql } from "../db/sql.js";
import type { LockDeps } from "./deps.js";
import { CLEAR_LOCKS, RUN_CTE_COLUMNS, refuseRun, reopenOrEscalate } from "./deps.js";
import type { AgentActor, Issue, LockEvent, ReleaseIssueResult, ReleaseOutcome, RunView } from "./types.js";
import { issueNotFound } from "./types.js";
import { validateText } from "./validate.js";

type Verdict = "NOT_OWNER" | "INVALID" | "RELEASE";

interface ReleaseRow {
  run: RunView | null;
  verdict: Verdict | null;
  current: Issue | null;
  issue: Issue | null;
  events: LockEvent[];
}

/** The status an outcome leads to; FAILED and REQUEUE reopen (or escalate). */
const TARGET: Record<ReleaseOutcome, string> = {
  DONE: `'DONE'::issue_status`,
  BLOCKED: `'BLOCKED'::issue_status`,
  FAILED: reopenOrEscalate("i"),
  REQUEUE: reopenOrEscalate("i"),
};

/**
 * RELEASE_IF_CHECKOUT_HELD. Invariant: only the run holding the checkout can
 * release, and both locks clear in the same row update as the status (no
 * half-released pair is ever visible). The guard is on the locked row itself,
 * so a release racing a recovery or a re-claim either finds its own lock or
 * answers NotLockOwner. DONE from CLAIMED is refused: work is finished only
 * under the execution lock.
 */
function releaseStatement(runId: string, actor: AgentActor, issueId: string, outcome: ReleaseOutcome, reason: string) {
  return sql`
    WITH run AS (
      SELECT ${raw(RUN_CTE_COLUMNS)} FROM heartbeat_runs r
       WHERE r.id = ${runId}::uuid AND r.company_id = ${actor.companyId}::uuid
    ),
    cur AS (
      SELECT i.* FROM issues i
       WHERE i.id = ${issueId}::uuid AND i.company_id = ${actor.companyId}::uuid
         AND EXISTS (SELECT 1 FROM run WHERE run.live AND run.agent_id = ${actor.agentId}::uuid)
         FOR UPDATE
    ),
    verdict AS (
      SELECT CASE
        WHEN c.checkout_run_id IS DISTINCT FROM ${runId}::uuid THEN 'NOT_OWNER'
        WHEN ${outcome}::text = 'DONE' AND c.status = 'CLAIMED' THEN 'INVALID'
        ELSE 'RELEASE' END AS verdict
        FROM cur c
    ),
    changed AS (
      UPDATE issues i
         SET status = ${raw(TARGET[outcome])}, ${raw(CLEAR_LOCKS)}, updated_at = now()
        FROM verdict v
       WHERE i.id = ${issueId}::uuid AND v.verdict = 'RELEASE'
      RETURNING i.*, 'RELEASED' AS ev_kind, ${runId}::uuid AS ev_run_id,
                ${actor.agentId}::uuid AS ev_agent_id, ${reason}::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT ${runViewJson("run")} FROM run) AS run,
           (SELECT verdict FROM verdict) AS verdict,
           (SELECT ${issueJson("c")} FROM cur c) AS current,
           (SELECT ${issueJson("c")} FROM changed c) AS issue,
           (SELECT list FROM events) AS events`;
}

export const MAX_REASON_LENGTH = 1000;

export async function releaseIssue(
  deps: LockDeps,
  actor: AgentActor,
  input: { runId: string; issueId: string; outcome: ReleaseOutcome; reason?: string | null },
): Promise<ReleaseIssueResult> {
  const { runId, issueId, outcome } = input;
  if (input.reason != null) validateText("reason", input.reason, MAX_REASON_LENGTH);
  const reason = input.reason?.trim() ? `${outcome}: ${input.reason.trim()}` : outcome;
  const row = await queryOne<ReleaseRow>(deps.db, releaseStatement(runId, actor, issueId, outcome, reason));
  deps.events.publish(row.events);
  const refused = refuseRun(row.run, runId, actor);
  if (refused) return refused;
  const cur = row.current;
  if (!cur || !row.verdict) return issueNotFound(issueId);
  switch (row.verdict) {
    case "RELEASE":
      return { __typename: "IssueReleased", issue: row.issue! };
    case "NOT_OWNER":
      return {
        __typename: "NotLockOwner",
        message: cur.checkoutRunId
          ? `issue ${issueId} is checked out by run ${cur.checkoutRunId}, not ${runId}`
          : `issue ${issueId} is not checked out`,
        issueId,
        ownerRunId: cur.checkoutRunId,
      };
    case "INVALID":
      return {
        __typename: "InvalidTransition",
        message: `issue ${issueId} is CLAIMED: acquire execution before releasing it as DONE`,
        issueId,
        from: cur.status,
        to: "DONE",
      };
  }
}
