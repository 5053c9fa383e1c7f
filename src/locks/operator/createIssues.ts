// createIssue / createIssues: the board adds work. Up to 1000 in one
// statement; no lock changes, so no events. An input may name a parent, the
// issues it waits on (blockedBy), a notBefore, an idempotency key, retry
// backoff, an execution limit and a payload (src/locks/graph/creation.ts).
import { queryAll, raw, retryingAborts, sql, statement } from "../../db/sql.js";
import type { LockDeps } from "../shared/deps.js";
import type { Issue } from "../../domain/types.js";
import { InvalidInputError, NotFoundError } from "../../domain/errors.js";
import { answerInputs, creationCtes, foldKeys, issueRow } from "../graph/creation.js";
import type { CreateIssueInput } from "../graph/creation.js";

export type { CreateIssueInput };

export const MAX_ISSUES_PER_CALL = 1000;

/**
 * Invariant: all or nothing. An unknown assignee, parent or blocker (or one of
 * another company) makes the statement insert nothing; an input whose
 * idempotency key the company already has answers that issue and creates
 * nothing (creationCtes). A new issue closes no cycle: nothing waits on it yet.
 */
export async function createIssues(deps: Pick<LockDeps, "db">, companyId: string, inputs: readonly CreateIssueInput[]): Promise<Issue[]> {
  if (inputs.length === 0) return [];
  if (inputs.length > MAX_ISSUES_PER_CALL) throw new InvalidInputError(`at most ${MAX_ISSUES_PER_CALL} issues per call`);
  const rows = inputs.map((input, n) => issueRow(input, inputs.length > 1 ? `inputs[${n}].` : ""));
  const fold = foldKeys(rows);
  const made = await retryingAborts(() =>
    queryAll<{ problem: "NO_AGENT" | "NOT_FOUND" | null; issue: Issue | null }>(
      deps.db,
      statement(
        "CREATE_ISSUES",
        sql`
      WITH ${creationCtes(companyId, fold.unique, raw("true"), null)}
      SELECT problem, issue FROM made ORDER BY ord`,
      ),
    ),
  );
  const problem = made[0]?.problem ?? null;
  if (problem === "NO_AGENT") throw new InvalidInputError("assigneeAgentId: no such agent in this company");
  if (problem === "NOT_FOUND") throw new NotFoundError("parentId or blockedBy names an issue that does not exist in this company; nothing was created");
  return answerInputs(deps.db, companyId, rows, fold, made);
}
