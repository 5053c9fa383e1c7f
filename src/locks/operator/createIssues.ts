// createIssue / createIssues: the board adds work. Up to 1000 in one
// transaction (one statement); no lock changes, so no events.
import { issueJson, queryAll, sql, statement } from "../../db/sql.js";
import type { LockDeps } from "../shared/deps.js";
import type { Issue, IssuePriority, IssueStatus } from "../../domain/types.js";
import { InvalidInputError } from "../../domain/errors.js";
import { validateConcurrencyKey, validateDescription, validateMaxAttempts, validateTitle } from "../../domain/validate.js";

export const MAX_ISSUES_PER_CALL = 1000;

export interface CreateIssueInput {
  title: string;
  description?: string | null;
  priority?: IssuePriority | null;
  assigneeAgentId?: string | null;
  /** null or left out: the unkeyed pool. */
  concurrencyKey?: string | null;
  maxAttempts?: number | null;
  status?: IssueStatus | null;
}

/**
 * Invariant: an issue's assignee is an agent of the
 * same company. Rows are inserted in input order with increasing created_at
 * (clock_timestamp per row), so equal priorities are claimed in input order, and an unknown assignee
 * makes the whole statement insert nothing. A named concurrency key gets its
 * concurrency_keys row from the keys' trigger, in the same statement.
 */
export async function createIssues(deps: Pick<LockDeps, "db">, companyId: string, inputs: readonly CreateIssueInput[]): Promise<Issue[]> {
  if (inputs.length === 0) return [];
  if (inputs.length > MAX_ISSUES_PER_CALL) throw new InvalidInputError(`at most ${MAX_ISSUES_PER_CALL} issues per call`);
  const rows = inputs.map((input, n) => {
    const where = inputs.length > 1 ? `inputs[${n}].` : "";
    try {
      validateTitle(input.title);
      if (input.description != null) validateDescription(input.description);
      validateMaxAttempts(input.maxAttempts ?? 3);
      if (input.concurrencyKey != null) validateConcurrencyKey("concurrencyKey", input.concurrencyKey);
    } catch (err) {
      throw new InvalidInputError(`${where}${(err as Error).message}`);
    }
    const status = input.status ?? "OPEN";
    if (status !== "OPEN" && status !== "BACKLOG") throw new InvalidInputError(`${where}status must be BACKLOG or OPEN`);
    return {
      title: input.title,
      description: input.description ?? null,
      priority: input.priority ?? "MEDIUM",
      assignee: input.assigneeAgentId ?? null,
      key: input.concurrencyKey ?? "",
      maxAttempts: input.maxAttempts ?? 3,
      status,
    };
  });
  const assignees = [...new Set(rows.map((r) => r.assignee).filter((a): a is string => a !== null))];
  const inserted = await queryAll<{ issue: Issue; ord: number }>(
    deps.db,
    statement(
      "CREATE_ISSUES",
      sql`
      WITH input AS (
        SELECT * FROM unnest(
          ${rows.map((r) => r.title)}::text[], ${rows.map((r) => r.description)}::text[],
          ${rows.map((r) => r.priority)}::issue_priority[], ${rows.map((r) => r.assignee)}::uuid[],
          ${rows.map((r) => r.maxAttempts)}::int[], ${rows.map((r) => r.status)}::issue_status[],
          ${rows.map((r) => r.key)}::text[]
        ) WITH ORDINALITY AS t(title, description, priority, assignee, max_attempts, status, concurrency_key, ord)
      ),
      known AS (
        SELECT count(*) AS n FROM agents a
         WHERE a.company_id = ${companyId}::uuid AND a.id = ANY(${assignees}::uuid[])
      ),
      created AS (
        INSERT INTO issues (company_id, title, description, priority, assignee_agent_id, concurrency_key, max_attempts, status, created_at, updated_at)
        SELECT ${companyId}::uuid, t.title, t.description, t.priority, t.assignee, t.concurrency_key, t.max_attempts, t.status,
               clock_timestamp(), clock_timestamp()
          FROM input t
         WHERE (SELECT n FROM known) = ${assignees.length}::int
         ORDER BY t.ord
        RETURNING *
      )
      SELECT ${issueJson("c")} AS issue FROM created c`,
    ),
  );
  if (inserted.length !== rows.length) {
    throw new InvalidInputError("assigneeAgentId: no such agent in this company");
  }
  return inserted.map((r) => r.issue);
}
