// updateIssue: the board edits an issue and moves it through the part of the
// life cycle that belongs to the board (docs/lifecycle.md).
import { appendEvents, issueJson, raw, sql, stampEvent, statement } from "../../db/sql.js";
import { commitChange } from "../shared/commit.js";
import type { LockDeps } from "../shared/deps.js";
import { boardLockedIssueCte, reopenOrEscalate } from "../shared/fragments.js";
import type { Issue, IssuePriority, IssueStatus, LockEvent } from "../../domain/types.js";
import type { UpdateIssueResult } from "../shared/types.js";
import { ISSUE_STATUSES } from "../../domain/types.js";
import { InvalidInputError } from "../../domain/errors.js";
import { issueNotFound } from "../shared/types.js";
import { BOARD_TRANSITIONS } from "../../domain/transitions.js";
import {
  MAX_EXECUTION_SECONDS,
  MAX_RETRY_SECONDS,
  validateConcurrencyKey,
  validateDescription,
  validateInstant,
  validateMaxAttempts,
  validateSeconds,
  validateTitle,
} from "../../domain/validate.js";

/** BOARD_TRANSITIONS as SQL: the statuses `alias.status` may move to. */
const allowedTargets = (alias: string) =>
  `(CASE ${alias}.status ${ISSUE_STATUSES.map(
    (from) => `WHEN '${from}' THEN ARRAY[${[from, ...BOARD_TRANSITIONS[from]].map((s) => `'${s}'`).join(", ")}]::issue_status[]`,
  ).join(" ")} END)`;

export interface UpdateIssueInput {
  title?: string | null;
  description?: string | null;
  priority?: IssuePriority | null;
  /** undefined keeps the assignee; null unassigns. */
  assigneeAgentId?: string | null;
  maxAttempts?: number | null;
  status?: IssueStatus | null;
  /** undefined keeps the key; null moves the issue to the unkeyed pool. */
  concurrencyKey?: string | null;
  /** undefined keeps it; null clears it (no delay). */
  notBefore?: Date | null;
  /** undefined keeps it; null is 0 (no backoff). */
  retryDelaySeconds?: number | null;
  /** undefined keeps it; null removes the limit. */
  maxExecutionSeconds?: number | null;
}

type Verdict = "INVALID" | "EXHAUSTED" | "KEY_WHILE_ACTIVE" | "NO_AGENT" | "UPDATE";

/**
 * Invariant: the status only moves along the
 * board's edges, decided on the locked row; a move that ends a hold (to
 * CANCELLED) clears both locks in the same update. A move to OPEN without an
 * attempt left ends in ESCALATED instead, and from ESCALATED is refused (raise
 * maxAttempts in the same call to reopen). One STATUS_CHANGED event when the
 * status changes; none for edits of other fields.
 */
function updateStatement(companyId: string, issueId: string, input: UpdateIssueInput) {
  const set = (value: unknown, column: string, cast: string) => (value === undefined ? raw(`i.${column}`) : sql`${value}::${raw(cast)}`);
  const status = input.status ?? null;
  const key = input.concurrencyKey === undefined ? null : (input.concurrencyKey ?? "");
  return statement(
    "UPDATE_IF_TRANSITION_ALLOWED",
    sql`
    WITH ${boardLockedIssueCte(companyId, issueId)},
    asked AS (
      SELECT c.id,
             coalesce(${status}::issue_status, c.status) AS requested,
             ${input.maxAttempts === undefined || input.maxAttempts === null ? raw("c.max_attempts") : sql`${input.maxAttempts}::int`} AS max_attempts
        FROM cur c
    ),
    next AS (
      -- docs/lifecycle.md: an issue with no attempt left that would return to OPEN
      -- becomes ESCALATED instead (raise maxAttempts in the same call to reopen
      -- it). From ESCALATED itself that would change nothing: the board is
      -- told so instead (EXHAUSTED below).
      SELECT a.id, a.requested, a.max_attempts,
             CASE WHEN a.requested = 'OPEN' AND c.status <> 'OPEN'
                  THEN ${raw(reopenOrEscalate("c", { maxAttempts: "a.max_attempts" }))} ELSE a.requested END AS status
        FROM asked a JOIN cur c ON c.id = a.id
    ),
    verdict AS (
      SELECT CASE
        WHEN NOT (n.requested = ANY(${raw(allowedTargets("c"))})) THEN 'INVALID'
        WHEN c.status = 'ESCALATED' AND n.status = 'ESCALATED' AND n.requested = 'OPEN' THEN 'EXHAUSTED'
        -- an active issue counts against its key's limit: it keeps its key until its hold ends
        WHEN ${key}::text IS NOT NULL AND ${key}::text <> c.concurrency_key AND c.status IN ('CLAIMED', 'IN_PROGRESS') THEN 'KEY_WHILE_ACTIVE'
        WHEN ${input.assigneeAgentId ?? null}::uuid IS NOT NULL AND NOT EXISTS (
          SELECT 1 FROM agents a WHERE a.id = ${input.assigneeAgentId ?? null}::uuid AND a.company_id = ${companyId}::uuid
        ) THEN 'NO_AGENT'
        ELSE 'UPDATE' END AS verdict
        FROM cur c JOIN next n ON n.id = c.id
    ),
    changed AS (
      UPDATE issues i
         SET title = ${set(input.title, "title", "text")},
             description = ${set(input.description, "description", "text")},
             priority = ${set(input.priority, "priority", "issue_priority")},
             assignee_agent_id = ${set(input.assigneeAgentId, "assignee_agent_id", "uuid")},
             concurrency_key = coalesce(${key}::text, i.concurrency_key),
             max_attempts = n.max_attempts,
             status = n.status,
             -- a notBefore still ahead takes the issue out of the claim indexes until WAKE_DUE_ISSUES
             not_before = ${input.notBefore === undefined ? raw("i.not_before") : sql`${input.notBefore}::timestamptz`},
             delayed = ${input.notBefore === undefined ? raw("i.delayed") : sql`coalesce(${input.notBefore}::timestamptz > now(), false)`},
             retry_delay_seconds = ${input.retryDelaySeconds === undefined ? raw("i.retry_delay_seconds") : sql`${input.retryDelaySeconds ?? 0}::int`},
             max_execution_seconds = ${set(input.maxExecutionSeconds, "max_execution_seconds", "int")},
             -- the locks as cur locked them, not i's (see lockedIssuesCte): n.status
             -- came from cur, and the row PostgreSQL checks first is the snapshot's
             checkout_run_id = CASE WHEN n.status IN ('CLAIMED', 'IN_PROGRESS') THEN c.checkout_run_id END,
             claimed_at = c.claimed_at,
             execution_run_id = CASE WHEN n.status = 'IN_PROGRESS' THEN c.execution_run_id END,
             execution_agent_name_key = CASE WHEN n.status = 'IN_PROGRESS' THEN c.execution_agent_name_key END,
             execution_locked_at = CASE WHEN n.status = 'IN_PROGRESS' THEN c.execution_locked_at END,
             -- only a status change writes an event (status_changed below)
             ${raw(stampEvent("i", "n.status <> i.status"))},
             updated_at = now()
        FROM verdict v, next n, cur c LEFT JOIN heartbeat_runs h ON h.id = c.checkout_run_id
       WHERE i.id = c.id AND n.id = c.id AND v.verdict = 'UPDATE'
      RETURNING i.*, c.status AS old_status, 'STATUS_CHANGED' AS ev_kind, c.checkout_run_id AS ev_run_id,
                h.agent_id AS ev_agent_id, (c.status::text || ' -> ' || i.status::text) AS ev_reason
    ),
    status_changed AS (SELECT * FROM changed WHERE old_status <> status),
    ${appendEvents("status_changed")}
    SELECT (SELECT ${issueJson("c")} FROM cur c) AS current,
           (SELECT verdict FROM verdict) AS verdict,
           (SELECT ${issueJson("c")} FROM changed c) AS issue,
           (SELECT list FROM events) AS events`,
  );
}

export async function updateIssue(deps: LockDeps, companyId: string, issueId: string, input: UpdateIssueInput): Promise<UpdateIssueResult> {
  if (input.title !== undefined) validateTitle(input.title);
  if (input.description !== undefined && input.description !== null) validateDescription(input.description);
  if (input.maxAttempts !== undefined) validateMaxAttempts(input.maxAttempts);
  if (input.priority === null) throw new InvalidInputError("priority cannot be null");
  if (input.status === null) throw new InvalidInputError("status cannot be null");
  if (input.concurrencyKey != null) validateConcurrencyKey("concurrencyKey", input.concurrencyKey);
  if (input.notBefore != null) validateInstant("notBefore", input.notBefore);
  if (input.retryDelaySeconds != null) validateSeconds("retryDelaySeconds", input.retryDelaySeconds, 0, MAX_RETRY_SECONDS);
  if (input.maxExecutionSeconds != null) validateSeconds("maxExecutionSeconds", input.maxExecutionSeconds, 1, MAX_EXECUTION_SECONDS);
  const row = await commitChange<{ current: Issue | null; verdict: Verdict | null; issue: Issue | null; events: LockEvent[] }>(
    deps,
    updateStatement(companyId, issueId, input),
  );
  const cur = row.current;
  if (!cur || !row.verdict) return issueNotFound(issueId);
  const to = input.status ?? cur.status;
  switch (row.verdict) {
    case "UPDATE":
      return { __typename: "IssueUpdated", issue: row.issue! };
    case "INVALID":
      return {
        __typename: "InvalidTransition",
        message: `the board cannot move issue ${issueId} from ${cur.status} to ${to}`,
        issueId,
        from: cur.status,
        to,
      };
    case "EXHAUSTED":
      return {
        __typename: "InvalidTransition",
        message: `issue ${issueId} has used ${cur.attemptCount} of ${input.maxAttempts ?? cur.maxAttempts} attempts: raise maxAttempts to reopen it`,
        issueId,
        from: cur.status,
        to,
      };
    case "KEY_WHILE_ACTIVE":
      return {
        __typename: "InvalidTransition",
        message: `issue ${issueId} is ${cur.status}: its concurrencyKey can change only when it is not CLAIMED or IN_PROGRESS`,
        issueId,
        from: cur.status,
        to,
      };
    case "NO_AGENT":
      throw new InvalidInputError(`assigneeAgentId ${input.assigneeAgentId}: no such agent in this company`);
  }
}
