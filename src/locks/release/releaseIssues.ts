// releaseIssues: the holder gives back many issues in one statement. Each
// issue is released or refused on its own; both locks of a released issue
// clear together. releaseIssue is this with one id.
import { appendEvents, issueJsonOrNull, raw, runViewJson, sql, stampEvent, statement } from "../../db/sql.js";
import { answerEach } from "../shared/commit.js";
import type { LockDeps, StatementDeps } from "../shared/deps.js";
import { CLEAR_LOCKS, backoffSeconds, delayBy, reopenOrEscalate, requestedIssuesCte, requestedRunsCte } from "../shared/fragments.js";
import type { ReleaseAnswer, ReleaseRequest, ReleaseVerdict } from "../shared/requests.js";
import { refuseRun } from "../runs/runs.js";
import type { AgentActor, IssueNotFound, InvalidTransition, NotLockOwner, RunNotActive } from "../shared/types.js";
import type { Issue, ReleaseOutcome } from "../../domain/types.js";
import { InvalidInputError } from "../../domain/errors.js";
import { issueNotFound } from "../shared/types.js";
import { MAX_RETRY_SECONDS, serialiseJson, validateSeconds, validateText } from "../../domain/validate.js";

export const MAX_REASON_LENGTH = 1000;
export const MAX_RELEASE_BATCH = 1000;

export type ReleaseRefusal = NotLockOwner | InvalidTransition | IssueNotFound;
export interface IssuesReleased {
  __typename: "IssuesReleased";
  issues: Issue[];
  refused: ReleaseRefusal[];
  /** Issues that waited on one of these released DONE (not in the GraphQL answer: the API announces them). */
  freed: string[];
}
export type ReleaseIssuesResult = IssuesReleased | RunNotActive;

/**
 * RELEASE_IF_CHECKOUT_HELD, for each request. Invariant: only the run holding
 * the checkout can release, and both locks clear in the same row update as the
 * status (no half-released pair is ever visible). The guard is on the locked
 * rows themselves (locked in id order, so two batch releases never deadlock),
 * so a release racing a recovery or a re-claim either finds its own lock or
 * answers NotLockOwner. DONE from CLAIMED is refused: work is finished only
 * under the execution lock. A dead run releases nothing (RunNotActive); its
 * run is read FOR SHARE (id order), so a release racing its own run's
 * finishRun answers IssueReleased or RunNotActive, never NotLockOwner.
 * DONE → DONE, BLOCKED → BLOCKED, FAILED and REQUEUE → OPEN, or ESCALATED
 * without an attempt left. A group never names one issue twice.
 *
 * Time (docs/lifecycle.md, Delays and backoff): retryAfterSeconds (REQUEUE or
 * FAILED) delays the reopened issue by exactly that; otherwise FAILED delays
 * it by its retry backoff. REQUEUE with retryAfterSeconds from IN_PROGRESS
 * gives back the attempt acquireExecution charged ("not now" is not a
 * failure), so it reopens and never escalates on it. `result`, when given, is
 * kept on the issue whatever the outcome.
 */
/** The attempt count a release leaves on issue i (request q): one less for REQUEUE with retryAfterSeconds from IN_PROGRESS. */
const ATTEMPTS_AFTER = `i.attempt_count - (q.outcome = 'REQUEUE' AND q.retry_after IS NOT NULL AND i.status = 'IN_PROGRESS')::int`;

function releaseStatement(companyId: string, group: ReleaseRequest[]) {
  return statement(
    "RELEASE_IF_CHECKOUT_HELD",
    sql`
    WITH req AS (
      SELECT q.run_id, q.agent_id, q.issue_id, q.outcome, q.reason, q.retry_after, q.result::jsonb AS result, q.n::int AS n
        FROM unnest(${group.map((g) => g.runId)}::uuid[], ${group.map((g) => g.actor.agentId)}::uuid[],
                    ${group.map((g) => g.issueId)}::uuid[], ${group.map((g) => g.outcome)}::text[], ${group.map((g) => g.reason)}::text[],
                    ${group.map((g) => g.retryAfterSeconds ?? null)}::int[], ${group.map((g) => g.result ?? null)}::text[])
             WITH ORDINALITY AS q(run_id, agent_id, issue_id, outcome, reason, retry_after, result, n)
    ),
    ${requestedRunsCte(companyId, true)},
    ${requestedIssuesCte(companyId)},
    verdict AS (
      SELECT q.n, q.issue_id, CASE
        WHEN c.checkout_run_id IS DISTINCT FROM q.run_id THEN 'NOT_OWNER'
        WHEN q.outcome = 'DONE' AND c.status = 'CLAIMED' THEN 'INVALID'
        ELSE 'RELEASE' END AS verdict
        FROM req q JOIN cur c ON c.id = q.issue_id
    ),
    changed AS (
      UPDATE issues i
         SET status = CASE q.outcome WHEN 'DONE' THEN 'DONE'::issue_status WHEN 'BLOCKED' THEN 'BLOCKED'::issue_status
                      ELSE ${raw(reopenOrEscalate("i", { attempts: ATTEMPTS_AFTER }))} END,
             attempt_count = ${raw(ATTEMPTS_AFTER)},
             ${raw(delayBy("i", `coalesce(q.retry_after, CASE WHEN q.outcome = 'FAILED' THEN ${backoffSeconds("i", "i.attempt_count")} END)`, `q.outcome IN ('REQUEUE', 'FAILED') AND ${ATTEMPTS_AFTER} < i.max_attempts`))},
             result = coalesce(q.result, i.result),
             ${raw(CLEAR_LOCKS)}, ${raw(stampEvent("i"))}, updated_at = now()
        FROM verdict v JOIN req q ON q.n = v.n
       WHERE i.id = v.issue_id AND v.verdict = 'RELEASE'
      RETURNING i.*, q.n AS req_n, 'RELEASED' AS ev_kind, q.run_id AS ev_run_id,
                q.agent_id AS ev_agent_id, q.reason AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT json_object_agg(r.id, ${runViewJson("r")}) FROM run r) AS runs,
           (SELECT json_agg(json_build_object(
              'runId', q.run_id, 'verdict', v.verdict, 'current', ${issueJsonOrNull("c")}, 'issue', ${issueJsonOrNull("ch")},
              -- the issues that waited on one released DONE (a hint for issuesChanged; the trigger moved their counts)
              'freed', (SELECT coalesce(json_agg(d.issue_id), '[]') FROM issue_dependencies d WHERE d.blocked_by_id = ch.id AND ch.status = 'DONE')
            ) ORDER BY q.n)
              FROM req q LEFT JOIN verdict v ON v.n = q.n
                         LEFT JOIN cur c ON c.id = q.issue_id LEFT JOIN changed ch ON ch.req_n = q.n) AS answers,
           (SELECT list FROM events) AS events`,
  );
}

/** Runs RELEASE_IF_CHECKOUT_HELD for a group of one company's requests; answers in request order. */
export async function releaseForEach(deps: StatementDeps, companyId: string, group: ReleaseRequest[]): Promise<ReleaseAnswer[]> {
  return answerEach<Omit<ReleaseAnswer, "run">>(deps, releaseStatement(companyId, group));
}

/** What a release says besides its issues: shared by releaseIssue and releaseIssues. */
export interface ReleaseInput {
  runId: string;
  outcome: ReleaseOutcome;
  reason?: string | null;
  retryAfterSeconds?: number | null;
  result?: unknown;
}

/** The request's reason, retryAfterSeconds and result, checked (BAD_USER_INPUT before anything runs). */
export function releaseDetails(input: ReleaseInput): Pick<ReleaseRequest, "reason" | "retryAfterSeconds" | "result"> {
  const retryAfterSeconds = input.retryAfterSeconds ?? null;
  if (retryAfterSeconds !== null) {
    if (input.outcome !== "REQUEUE" && input.outcome !== "FAILED") {
      throw new InvalidInputError(`retryAfterSeconds goes only with REQUEUE or FAILED, not ${input.outcome}`);
    }
    validateSeconds("retryAfterSeconds", retryAfterSeconds, 0, MAX_RETRY_SECONDS);
  }
  return { reason: releaseReason(input.outcome, input.reason), retryAfterSeconds, result: serialiseJson("result", input.result) };
}

/** What the event records as the reason. */
export function releaseReason(outcome: ReleaseOutcome, reason: string | null | undefined): string {
  if (reason != null) validateText("reason", reason, MAX_REASON_LENGTH);
  return reason?.trim() ? `${outcome}: ${reason.trim()}` : outcome;
}

export function refusal(runId: string, verdict: ReleaseVerdict, cur: Issue): ReleaseRefusal {
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

export async function releaseIssues(deps: LockDeps, actor: AgentActor, input: ReleaseInput & { issueIds: string[] }): Promise<ReleaseIssuesResult> {
  const { runId, outcome } = input;
  const issueIds = [...new Set(input.issueIds)];
  if (issueIds.length === 0) throw new InvalidInputError("issueIds must not be empty");
  if (issueIds.length > MAX_RELEASE_BATCH) throw new InvalidInputError(`at most ${MAX_RELEASE_BATCH} issues per call`);
  const details = releaseDetails(input);
  const answers = await releaseForEach(
    deps,
    actor.companyId,
    issueIds.map((issueId) => ({ actor, runId, issueId, outcome, ...details })),
  );
  const refused = refuseRun(answers[0]!.run, runId, actor);
  if (refused) return refused;
  return {
    __typename: "IssuesReleased",
    issues: answers.flatMap((a) => (a.issue ? [a.issue] : [])),
    freed: answers.flatMap((a) => a.freed ?? []),
    refused: answers.flatMap((a, i) => {
      if (!a.current || !a.verdict) return [issueNotFound(issueIds[i]!)];
      return a.verdict === "RELEASE" ? [] : [refusal(runId, a.verdict, a.current)];
    }),
  };
}
