// How issues are created, shared by createIssue(s) (the board) and
// createSubIssues (an agent): the inputs checked, idempotency keys folded, and
// the CTEs that insert the issues with their blockedBy edges and waits in one
// statement (docs/lifecycle.md, "The work graph").
import { issueJson, queryAll, raw, sql, statement } from "../../db/sql.js";
import type { Queryable } from "../../db/client.js";
import type { Sql } from "../../db/sql.js";
import type { Issue, IssuePriority, IssueStatus } from "../../domain/types.js";
import { InvalidInputError } from "../../domain/errors.js";
import {
  MAX_EXECUTION_SECONDS,
  MAX_RETRY_SECONDS,
  serialiseJson,
  validateConcurrencyKey,
  validateDescription,
  validateId,
  validateIdempotencyKey,
  validateInstant,
  validateMaxAttempts,
  validateSeconds,
  validateTitle,
} from "../../domain/validate.js";

/** Blockers one input may name. */
export const MAX_BLOCKED_BY = 100;

export interface CreateIssueInput {
  title: string;
  description?: string | null;
  priority?: IssuePriority | null;
  assigneeAgentId?: string | null;
  /** null or left out: the unkeyed pool. */
  concurrencyKey?: string | null;
  maxAttempts?: number | null;
  status?: IssueStatus | null;
  parentId?: string | null;
  blockedBy?: readonly string[] | null;
  notBefore?: Date | null;
  idempotencyKey?: string | null;
  retryDelaySeconds?: number | null;
  maxExecutionSeconds?: number | null;
  payload?: unknown;
}

/** One input, checked and in the statement's terms. */
export interface IssueRow {
  title: string;
  description: string | null;
  priority: IssuePriority;
  assignee: string | null;
  key: string;
  maxAttempts: number;
  status: IssueStatus;
  parent: string | null;
  blockedBy: string[];
  notBefore: Date | null;
  idempotencyKey: string | null;
  retryDelaySeconds: number;
  maxExecutionSeconds: number | null;
  payload: string | null;
}

/** Checks one input (BAD_USER_INPUT naming `inputs[n].` when there are several); nothing runs before every input passes. */
export function issueRow(input: CreateIssueInput, where: string): IssueRow {
  try {
    validateTitle(input.title);
    if (input.description != null) validateDescription(input.description);
    validateMaxAttempts(input.maxAttempts ?? 3);
    if (input.concurrencyKey != null) validateConcurrencyKey("concurrencyKey", input.concurrencyKey);
    if (input.idempotencyKey != null) validateIdempotencyKey(input.idempotencyKey);
    if (input.retryDelaySeconds != null) validateSeconds("retryDelaySeconds", input.retryDelaySeconds, 0, MAX_RETRY_SECONDS);
    if (input.maxExecutionSeconds != null) validateSeconds("maxExecutionSeconds", input.maxExecutionSeconds, 1, MAX_EXECUTION_SECONDS);
    if (input.notBefore != null) validateInstant("notBefore", input.notBefore);
    const blockedBy = [...new Set((input.blockedBy ?? []).map((id) => validateId("blockedBy", id)))];
    if (blockedBy.length > MAX_BLOCKED_BY) throw new InvalidInputError(`blockedBy names at most ${MAX_BLOCKED_BY} issues`);
    const status = input.status ?? "OPEN";
    if (status !== "OPEN" && status !== "BACKLOG") throw new InvalidInputError("status must be BACKLOG or OPEN");
    return {
      title: input.title,
      description: input.description ?? null,
      priority: input.priority ?? "MEDIUM",
      assignee: input.assigneeAgentId ?? null,
      key: input.concurrencyKey ?? "",
      maxAttempts: input.maxAttempts ?? 3,
      status,
      parent: input.parentId == null ? null : validateId("parentId", input.parentId),
      blockedBy,
      notBefore: input.notBefore ?? null,
      idempotencyKey: input.idempotencyKey ?? null,
      retryDelaySeconds: input.retryDelaySeconds ?? 0,
      maxExecutionSeconds: input.maxExecutionSeconds ?? null,
      payload: serialiseJson("payload", input.payload),
    };
  } catch (err) {
    if (err instanceof InvalidInputError) throw new InvalidInputError(`${where}${err.message}`);
    throw err;
  }
}

/**
 * The inputs a statement inserts, and for each input which of them answers it:
 * within one call the first input with an idempotency key wins, and a later
 * one with the same key answers that issue.
 */
export function foldKeys(rows: IssueRow[]): { unique: IssueRow[]; answeredBy: number[] } {
  const firstOfKey = new Map<string, number>();
  const unique: IssueRow[] = [];
  const answeredBy = rows.map((row) => {
    if (row.idempotencyKey !== null) {
      const first = firstOfKey.get(row.idempotencyKey);
      if (first !== undefined) return first;
      firstOfKey.set(row.idempotencyKey, unique.length);
    }
    unique.push(row);
    return unique.length - 1;
  });
  return { unique, answeredBy };
}

/**
 * CTEs that create `rows` in company `companyId`, ending in `made`: one row per
 * input (ord, in input order) with the issue it is answered by as `issue`
 * (JSON), or NULL for an input whose idempotency key a concurrent create took
 * after this statement's snapshot (the caller reads it: FIND_ISSUES_BY_KEY);
 * `problem`, the one reason nothing was created: 'CYCLE' (with `path`),
 * 'NO_AGENT', 'NOT_FOUND' (a blocker or parent not in the company), or NULL;
 * and `parent`, the parent as the statement leaves it (with `parentWaits`).
 *
 * `go` (SQL boolean) gates the insert (createSubIssues' verdict). With
 * `parentWaits` (a parent id, locked FOR UPDATE by the caller's statement as
 * `cur`), each new issue is added to the parent's blockedBy and the parent's
 * waiting_count rises by as many; an input whose blockers already wait on the
 * parent would close a cycle (baton_dependency_path; the caller holds the
 * company's graph lock).
 *
 * Invariants (docs/invariants.md, 18-20): an issue's assignee, parent and
 * blockers are in its company; an issue is created with waiting_count = its
 * blockers not DONE, read from the blockers' rows locked FOR SHARE, so a
 * blocker that becomes DONE concurrently either commits first (and is counted
 * DONE) or waits, and then its trigger (baton_dependents_follow_done) sees
 * the new edge; one issue per idempotency key and company: an input whose key
 * the snapshot holds answers that issue whatever its other fields say (it is
 * not checked, and creates nothing), one committed since is skipped by ON
 * CONFLICT and read by the caller. Rows are inserted in input order with
 * increasing created_at, so equal priorities are claimed in input order.
 */
export function creationCtes(companyId: string, rows: IssueRow[], go: Sql, parentWaits: string | null): Sql {
  const edgeOrd = rows.flatMap((r, n) => r.blockedBy.map(() => n + 1));
  const edgeBlocker = rows.flatMap((r) => r.blockedBy);
  return sql`
    input AS MATERIALIZED (
      SELECT t.*, gen_random_uuid() AS new_id FROM unnest(
        ${rows.map((r) => r.title)}::text[], ${rows.map((r) => r.description)}::text[],
        ${rows.map((r) => r.priority)}::issue_priority[], ${rows.map((r) => r.assignee)}::uuid[],
        ${rows.map((r) => r.maxAttempts)}::int[], ${rows.map((r) => r.status)}::issue_status[],
        ${rows.map((r) => r.key)}::text[], ${rows.map((r) => r.parent)}::uuid[],
        ${rows.map((r) => r.notBefore)}::timestamptz[], ${rows.map((r) => r.idempotencyKey)}::text[],
        ${rows.map((r) => r.retryDelaySeconds)}::int[], ${rows.map((r) => r.maxExecutionSeconds)}::int[],
        ${rows.map((r) => r.payload)}::text[]
      ) WITH ORDINALITY AS t(title, description, priority, assignee, max_attempts, status, concurrency_key, parent_id,
                             not_before, idempotency_key, retry_delay_seconds, max_execution_seconds, payload, ord)
    ),
    existing AS (
      SELECT i.* FROM issues i
       WHERE i.company_id = ${companyId}::uuid AND i.idempotency_key IN (SELECT idempotency_key FROM input WHERE idempotency_key IS NOT NULL)
    ),
    -- the inputs to create: not those answered by an issue their key already names
    fresh AS (
      SELECT t.* FROM input t WHERE NOT EXISTS (SELECT 1 FROM existing x WHERE x.idempotency_key = t.idempotency_key)
    ),
    edge_in AS (
      SELECT e.ord::bigint AS ord, e.blocker FROM unnest(${edgeOrd}::int[], ${edgeBlocker}::uuid[]) AS e(ord, blocker)
       WHERE e.ord IN (SELECT ord FROM fresh)
    ),
    blocker AS (
      SELECT b.id, b.status FROM issues b
       WHERE b.id IN (SELECT blocker FROM edge_in) AND b.company_id = ${companyId}::uuid
       ORDER BY b.id
         FOR SHARE
    ),
    cycle AS (
      ${
        parentWaits === null
          ? raw("SELECT NULL::uuid[] AS path WHERE false")
          : sql`SELECT p.path FROM (SELECT DISTINCT blocker FROM edge_in) b
                 CROSS JOIN LATERAL (SELECT baton_dependency_path(b.blocker, ${parentWaits}::uuid) AS path) p
                 WHERE p.path IS NOT NULL LIMIT 1`
      }
    ),
    problem AS (
      SELECT CASE
        WHEN EXISTS (SELECT 1 FROM cycle) THEN 'CYCLE'
        WHEN (SELECT count(DISTINCT assignee) FROM fresh)
             <> (SELECT count(*) FROM agents a WHERE a.company_id = ${companyId}::uuid AND a.id IN (SELECT assignee FROM fresh))
          THEN 'NO_AGENT'
        WHEN (SELECT count(*) FROM blocker) <> (SELECT count(DISTINCT blocker) FROM edge_in)
          OR (SELECT count(DISTINCT parent_id) FROM fresh)
             <> (SELECT count(*) FROM issues p WHERE p.id IN (SELECT parent_id FROM fresh) AND p.company_id = ${companyId}::uuid)
          THEN 'NOT_FOUND'
        END AS problem
    ),
    created AS (
      INSERT INTO issues (id, company_id, title, description, priority, assignee_agent_id, concurrency_key, max_attempts, status,
                          parent_id, not_before, delayed, waiting_count, idempotency_key, retry_delay_seconds, max_execution_seconds,
                          payload, created_at, updated_at)
      SELECT t.new_id, ${companyId}::uuid, t.title, t.description, t.priority, t.assignee, t.concurrency_key, t.max_attempts, t.status,
             t.parent_id, t.not_before, coalesce(t.not_before > now(), false),
             (SELECT count(*) FROM edge_in e JOIN blocker b ON b.id = e.blocker WHERE e.ord = t.ord AND b.status <> 'DONE')::int,
             t.idempotency_key, t.retry_delay_seconds, t.max_execution_seconds, t.payload::jsonb,
             clock_timestamp(), clock_timestamp()
        FROM fresh t
       WHERE ${go} AND (SELECT problem FROM problem) IS NULL
       ORDER BY t.ord
          ON CONFLICT (company_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
      RETURNING *
    ),
    edges AS (
      INSERT INTO issue_dependencies (issue_id, blocked_by_id, company_id)
      SELECT c.id, e.blocker, ${companyId}::uuid FROM created c JOIN input t ON t.new_id = c.id JOIN edge_in e ON e.ord = t.ord
      ${parentWaits === null ? raw("") : sql`UNION ALL SELECT ${parentWaits}::uuid, c.id, ${companyId}::uuid FROM created c`}
      RETURNING 1
    ),
    ${
      parentWaits === null
        ? raw("parent_waits AS (SELECT i.* FROM issues i WHERE false),")
        : sql`parent_waits AS (
      UPDATE issues p SET waiting_count = p.waiting_count + (SELECT count(*) FROM created)::int
       WHERE p.id = ${parentWaits}::uuid AND EXISTS (SELECT 1 FROM created)
      RETURNING p.*
    ),`
    }
    made AS (
      SELECT t.ord, (SELECT problem FROM problem) AS problem, (SELECT path FROM cycle) AS path,
             coalesce((SELECT ${issueJson("c")} FROM created c WHERE c.id = t.new_id),
                      (SELECT ${issueJson("x")} FROM existing x WHERE x.idempotency_key = t.idempotency_key)) AS issue,
             (SELECT ${issueJson("w")} FROM parent_waits w) AS parent
        FROM input t
    )`;
}

/**
 * The issues whose idempotency keys a concurrent create committed after a
 * creation statement's snapshot (its ON CONFLICT skipped them): read in a
 * statement of their own, which sees that commit.
 */
async function issuesByKey(db: Queryable, companyId: string, keys: string[]): Promise<Map<string, Issue>> {
  if (keys.length === 0) return new Map();
  const found = await queryAll<{ key: string; issue: Issue }>(
    db,
    statement(
      "FIND_ISSUES_BY_KEY",
      sql`SELECT i.idempotency_key AS key, ${issueJson("i")} AS issue FROM issues i
           WHERE i.company_id = ${companyId}::uuid AND i.idempotency_key = ANY(${keys}::text[])`,
    ),
  );
  return new Map(found.map((f) => [f.key, f.issue]));
}

/** What a creation statement answered, per input of the call: the issues, in input order. */
export async function answerInputs(
  db: Queryable,
  companyId: string,
  rows: IssueRow[],
  fold: { unique: IssueRow[]; answeredBy: number[] },
  made: { issue: Issue | null }[],
): Promise<Issue[]> {
  const late = fold.unique.flatMap((row, n) => (made[n]!.issue === null && row.idempotencyKey !== null ? [row.idempotencyKey] : []));
  const byKey = await issuesByKey(db, companyId, late);
  return rows.map((_, n) => {
    const u = fold.answeredBy[n]!;
    const issue = made[u]!.issue ?? byKey.get(fold.unique[u]!.idempotencyKey ?? "");
    if (!issue) throw new Error(`creation answered no issue for input ${n}`);
    return issue;
  });
}
