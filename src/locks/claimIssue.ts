// claimIssue: take the checkout lock, either on the caller's next claimable
// issue (CLAIM_NEXT_FOR_EACH, claimNext.ts) or on one named issue
// (CHECKOUT_IF_EXPECTED).
// Each is one statement: the decision, the change and its ledger row commit
// together, and zero changed rows is a typed outcome, never an exception.
import { appendEvents, issueJson, named, raw, runViewJson, sql, stampEvent } from "../db/sql.js";
import type { LockDeps } from "./deps.js";
import { RUN_CTE_COLUMNS, commitChange, lockedIssuesCte, refuseRun, runCte, withoutLive } from "./deps.js";
import { claimNextForEach } from "./claimNext.js";
import type { AgentActor, ClaimIssueResult, Issue, IssueStatus, LockEvent, RunView } from "./types.js";
import { issueNotFound } from "./types.js";

/**
 * Statuses a checkout can start from: OPEN, or a lock left behind by a dead
 * run. Any status may be listed in expectedStatuses (docs/lifecycle.md checks it after
 * IssueNotFound and alreadyHeld); an issue in any other status answers
 * UnexpectedStatus even when it is listed.
 */
export const CLAIMABLE_STATUSES: readonly IssueStatus[] = ["OPEN", "CLAIMED", "IN_PROGRESS"];

export interface ClaimInput {
  runId: string;
  issueId?: string | null;
  expectedStatuses?: IssueStatus[] | null;
  includeUnassigned?: boolean | null;
}

export async function claimIssue(deps: LockDeps, actor: AgentActor, input: ClaimInput): Promise<ClaimIssueResult> {
  if (input.issueId) return checkoutNamed(deps, actor, input.runId, input.issueId, input.expectedStatuses ?? ["OPEN"]);
  return claimNext(deps, actor, input.runId, input.includeUnassigned ?? false);
}

async function claimNext(deps: LockDeps, actor: AgentActor, runId: string, includeUnassigned: boolean): Promise<ClaimIssueResult> {
  const request = { actor, runId, includeUnassigned };
  const { run, issue } = deps.groups
    ? await deps.groups.claim.submit(actor.companyId, request) // with the company's other claims in flight
    : (await claimNextForEach(deps, actor.companyId, [request]))[0]!;
  const refused = refuseRun(run, runId, actor);
  if (refused) return refused;
  if (!issue || !run) return { __typename: "NoIssueAvailable", message: "no claimable issue" };
  return { __typename: "IssueClaimed", issue, run: withoutLive(run), alreadyHeld: false, adopted: false };
}

type Verdict =
  | "ALREADY_HELD"
  | "UNEXPECTED_STATUS"
  | "HELD"
  | "ASSIGNED"
  | "EXHAUSTED"
  | "ADOPT_EXHAUSTED"
  | "ADOPT"
  | "CLAIM";

interface CheckoutRow {
  run: RunView | null;
  verdict: Verdict | null;
  current: Issue | null;
  issue: Issue | null;
  holder: Pick<RunView, "id" | "agentId" | "status" | "live"> | null;
  events: LockEvent[];
}

/**
 * CHECKOUT_IF_EXPECTED. Invariant: at most one run holds the checkout, and a
 * lock is taken over only from a run that is dead on the database clock.
 * `cur` locks the issue row first (FOR UPDATE returns its newest version), so
 * the verdict cannot go stale before the change. A holder whose lease has run
 * out but which is still marked RUNNING is timed out here, under its row lock,
 * before its lock is adopted: a heartbeat racing this statement either lands
 * first (the holder is live: CheckoutConflict) or finds the run TIMED_OUT
 * (RunNotActive) — never both. A holder that looks dead is judged by the
 * newest version of its run row (holder_now, locked), never by the snapshot:
 * another statement may have timed it out meanwhile, and it is still dead.
 * A holder this statement cannot see is younger than its snapshot, hence alive. The checks run in the order docs/lifecycle.md gives.
 */
function checkoutStatement(runId: string, actor: AgentActor, issueId: string, expected: IssueStatus[]) {
  return sql`
    WITH ${runCte(runId, actor, true)},
    ${lockedIssuesCte(actor, [issueId])},
    holder AS (
      SELECT ${raw(RUN_CTE_COLUMNS)} FROM heartbeat_runs r WHERE r.id = (SELECT checkout_run_id FROM cur)
    ),
    -- A holder that looks dead in this statement's snapshot may have changed
    -- since: its row is locked and read at its newest version, and liveness
    -- is decided from that. (Another statement timing the run out makes it
    -- TIMED_OUT, dead; a heartbeat that landed first makes it live.)
    holder_now AS (
      SELECT r.id, r.status, baton_run_is_live(r.status, r.lease_expires_at) AS live FROM heartbeat_runs r
       WHERE r.id = (SELECT id FROM holder WHERE NOT live)
         AND (SELECT checkout_run_id <> ${runId}::uuid FROM cur)
       FOR UPDATE
    ),
    expired AS (
      UPDATE heartbeat_runs r SET status = 'TIMED_OUT', finished_at = now()
       WHERE r.id = (SELECT id FROM holder_now WHERE NOT live AND status = 'RUNNING')
         AND r.status = 'RUNNING' AND r.lease_expires_at <= now()
      RETURNING r.id
    ),
    seen AS (
      SELECT cur.*,
             CASE WHEN cur.checkout_run_id IS NULL THEN false
                  WHEN NOT EXISTS (SELECT 1 FROM holder) THEN true
                  WHEN (SELECT live FROM holder) THEN true
                  ELSE coalesce((SELECT live FROM holder_now), false) END AS holder_live
        FROM cur
    ),
    verdict AS (
      SELECT CASE
        WHEN s.checkout_run_id = ${runId}::uuid THEN 'ALREADY_HELD'
        WHEN NOT (s.status = ANY(${expected}::issue_status[]) AND s.status = ANY(${CLAIMABLE_STATUSES}::issue_status[])) THEN 'UNEXPECTED_STATUS'
        WHEN s.holder_live THEN 'HELD'
        WHEN s.assignee_agent_id IS NOT NULL AND s.assignee_agent_id <> ${actor.agentId}::uuid THEN 'ASSIGNED'
        WHEN s.checkout_run_id IS NOT NULL
             AND s.attempt_count + (s.status = 'CLAIMED')::int >= s.max_attempts THEN 'ADOPT_EXHAUSTED'
        WHEN s.attempt_count >= s.max_attempts THEN 'EXHAUSTED'
        WHEN s.checkout_run_id IS NOT NULL THEN 'ADOPT'
        WHEN s.status = 'OPEN' THEN 'CLAIM'
        ELSE 'UNEXPECTED_STATUS' END AS verdict
        FROM seen s
    ),
    changed AS (
      UPDATE issues i
         SET status = CASE WHEN v.verdict = 'ADOPT_EXHAUSTED' THEN 'ESCALATED' ELSE 'CLAIMED' END::issue_status,
             checkout_run_id = CASE WHEN v.verdict = 'ADOPT_EXHAUSTED' THEN NULL ELSE ${runId}::uuid END,
             execution_run_id = NULL, execution_agent_name_key = NULL, execution_locked_at = NULL,
             claimed_at = CASE WHEN v.verdict = 'ADOPT_EXHAUSTED' THEN i.claimed_at ELSE now() END,
             -- a CLAIMED holder that died before reaching IN_PROGRESS spent an attempt
             attempt_count = i.attempt_count + (v.verdict IN ('ADOPT', 'ADOPT_EXHAUSTED') AND i.status = 'CLAIMED')::int,
             lock_epoch = i.lock_epoch + (v.verdict IN ('ADOPT', 'CLAIM'))::int,
             ${raw(stampEvent("i"))}, updated_at = now()
        FROM verdict v
       WHERE i.id = ${issueId}::uuid AND v.verdict IN ('CLAIM', 'ADOPT', 'ADOPT_EXHAUSTED')
      RETURNING i.*,
                CASE v.verdict WHEN 'CLAIM' THEN 'CLAIMED' WHEN 'ADOPT' THEN 'ADOPTED' ELSE 'ESCALATED' END AS ev_kind,
                ${runId}::uuid AS ev_run_id, ${actor.agentId}::uuid AS ev_agent_id,
                CASE v.verdict WHEN 'CLAIM' THEN NULL ELSE 'HOLDER_DEAD' END AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT ${runViewJson("run")} FROM run) AS run,
           (SELECT verdict FROM verdict) AS verdict,
           (SELECT ${issueJson("c")} FROM cur c) AS current,
           (SELECT ${issueJson("c")} FROM changed c) AS issue,
           (SELECT json_build_object('id', h.id, 'agentId', h.agent_id, 'status', h.status, 'live', h.live) FROM holder h) AS holder,
           (SELECT list FROM events) AS events`;
}

async function checkoutNamed(
  deps: LockDeps,
  actor: AgentActor,
  runId: string,
  issueId: string,
  expected: IssueStatus[],
): Promise<ClaimIssueResult> {
  const row = await commitChange<CheckoutRow>(deps, named("CHECKOUT_IF_EXPECTED", checkoutStatement(runId, actor, issueId, expected)));
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
    case "UNEXPECTED_STATUS":
      return {
        __typename: "UnexpectedStatus",
        message: CLAIMABLE_STATUSES.includes(cur.status) || !expected.includes(cur.status)
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
