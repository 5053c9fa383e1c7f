// createSubIssues: an agent splits the issue its run holds into sub-issues,
// in one transaction; with parentWaits the parent waits on every new one, so
// the agent can release it with REQUEUE and get it back (it stays assigned)
// once they are all DONE (docs/lifecycle.md, "Sub-issues").
import { issueJson, queryAll, raw, retryingAborts, runViewJson, sql, statement } from "../../db/sql.js";
import type { LockDeps } from "../shared/deps.js";
import { lockedIssuesCte, runCte } from "../shared/fragments.js";
import { refuseRun } from "../runs/runs.js";
import type { AgentActor, IssueNotFound, NotLockOwner, RunNotActive, RunView } from "../shared/types.js";
import { issueNotFound } from "../shared/types.js";
import type { Issue } from "../../domain/types.js";
import { InvalidInputError, NotFoundError } from "../../domain/errors.js";
import { MAX_BLOCKED_BY, answerInputs, creationCtes, foldKeys, issueRow } from "./creation.js";
import type { CreateIssueInput } from "./creation.js";
import { lockDependencyGraph } from "./graphLock.js";

export const MAX_SUB_ISSUES_PER_CALL = 100;

export interface SubIssuesCreated {
  __typename: "SubIssuesCreated";
  parent: Issue;
  issues: Issue[];
}
export type CreateSubIssuesResult = SubIssuesCreated | NotLockOwner | RunNotActive | IssueNotFound;

interface Made {
  run: RunView | null;
  verdict: "NO_PARENT" | "NOT_OWNER" | "TOO_MANY" | "CREATE" | null;
  parent: Issue | null;
  holder: string | null;
  path: string[] | null;
  problem: "CYCLE" | "NO_AGENT" | "NOT_FOUND" | null;
  issue: Issue | null;
}

/**
 * Invariant: sub-issues are created only by a live run holding the parent's
 * checkout, judged on the parent's locked row (`cur`), and with parentWaits
 * only if no new edge closes a cycle: a blocker of a sub-issue that already
 * waits, through blockedBy edges, on the parent would (creationCtes, on a
 * snapshot after the company's graph lock). The parent's waiting_count rises
 * by the sub-issues made. One row per input.
 */
const createSubIssuesStatement = (actor: AgentActor, runId: string, parentId: string, rows: ReturnType<typeof issueRow>[], parentWaits: boolean) =>
  statement(
    "CREATE_SUB_ISSUES",
    sql`
    WITH ${runCte(runId, actor, true)},
    ${lockedIssuesCte(actor, [parentId])},
    verdict AS (
      SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM run WHERE run.live) THEN NULL
        WHEN NOT EXISTS (SELECT 1 FROM cur) THEN 'NO_PARENT'
        WHEN (SELECT checkout_run_id FROM cur) IS DISTINCT FROM ${runId}::uuid THEN 'NOT_OWNER'
        WHEN ${parentWaits}::boolean
             AND (SELECT count(*) FROM issue_dependencies d WHERE d.issue_id = ${parentId}::uuid) + ${rows.length}::int > ${MAX_BLOCKED_BY}::int
          THEN 'TOO_MANY'
        ELSE 'CREATE' END AS verdict
    ),
    ${creationCtes(actor.companyId, rows, raw("(SELECT verdict FROM verdict) = 'CREATE'"), parentWaits ? parentId : null)}
    SELECT (SELECT ${runViewJson("run")} FROM run) AS run, (SELECT verdict FROM verdict) AS verdict,
           (SELECT checkout_run_id FROM cur) AS holder, m.path, m.problem, m.issue,
           -- the parent as the statement left it: waiting on its new sub-issues (parent_waits), or as locked
           coalesce(m.parent, (SELECT ${issueJson("c")} FROM cur c)) AS parent
      FROM made m ORDER BY m.ord`,
  );

export async function createSubIssues(
  deps: Pick<LockDeps, "db">,
  actor: AgentActor,
  input: { runId: string; parentId: string; inputs: readonly CreateIssueInput[]; parentWaits?: boolean | null },
): Promise<CreateSubIssuesResult> {
  const { runId, parentId } = input;
  const parentWaits = input.parentWaits ?? false;
  if (input.inputs.length === 0) throw new InvalidInputError("inputs must not be empty");
  if (input.inputs.length > MAX_SUB_ISSUES_PER_CALL) throw new InvalidInputError(`at most ${MAX_SUB_ISSUES_PER_CALL} sub-issues per call`);
  const rows = input.inputs.map((i, n) => {
    if (i.parentId != null && i.parentId.toLowerCase() !== parentId.toLowerCase()) {
      throw new InvalidInputError(`inputs[${n}].parentId must be left out (or be ${parentId}): sub-issues belong to parentId`);
    }
    const row = issueRow({ ...i, parentId }, `inputs[${n}].`);
    if (parentWaits && row.blockedBy.includes(parentId.toLowerCase())) {
      throw new InvalidInputError(`inputs[${n}].blockedBy names the parent while parentWaits is set: they would wait on each other`);
    }
    return row;
  });
  const fold = foldKeys(rows);
  const made = await retryingAborts(() =>
    deps.db.$transaction(async (tx) => {
      // Only parentWaits adds edges into an existing issue, which could close a cycle.
      if (parentWaits) await lockDependencyGraph(tx, actor.companyId);
      return queryAll<Made>(tx, createSubIssuesStatement(actor, runId, parentId, fold.unique, parentWaits));
    }),
  );
  const first = made[0]!;
  const refused = refuseRun(first.run, runId, actor);
  if (refused) return refused;
  switch (first.verdict) {
    case "NO_PARENT":
      return issueNotFound(parentId);
    case "NOT_OWNER":
      return {
        __typename: "NotLockOwner",
        message: first.holder ? `issue ${parentId} is checked out by run ${first.holder}, not ${runId}` : `issue ${parentId} is not checked out`,
        issueId: parentId,
        ownerRunId: first.holder,
      };
    case "TOO_MANY":
      throw new InvalidInputError(`with parentWaits the parent would wait on more than ${MAX_BLOCKED_BY} issues, the most one issue may`);
    default:
      break;
  }
  if (first.problem === "CYCLE") {
    throw new InvalidInputError(
      `parentWaits would close a cycle: ${(first.path ?? []).join(" → ")} already waits on the parent, which would wait on its sub-issue`,
    );
  }
  if (first.problem === "NO_AGENT") throw new InvalidInputError("assigneeAgentId: no such agent in this company");
  if (first.problem === "NOT_FOUND") throw new NotFoundError("blockedBy names an issue that does not exist in this company; nothing was created");
  const issues = await answerInputs(deps.db, actor.companyId, rows, fold, made);
  return { __typename: "SubIssuesCreated", parent: first.parent!, issues };
}
