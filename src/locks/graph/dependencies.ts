// addDependency / removeDependency: the board, or an agent whose run holds the
// issue's checkout, says that one issue waits on another (docs/lifecycle.md,
// "The work graph"). Not a lock change: no ledger event; a held issue keeps
// its locks and the edge matters from its next claim.
import { issueJson, queryOneInTransaction, raw, retryingAborts, sql, statement } from "../../db/sql.js";
import type { Sql } from "../../db/sql.js";
import type { LockDeps } from "../shared/deps.js";
import { runIsLive } from "../shared/fragments.js";
import type { DependencyCycle, IssueNotFound, NotLockOwner } from "../shared/types.js";
import { issueNotFound } from "../shared/types.js";
import type { Issue } from "../../domain/types.js";
import { lockDependencyGraph } from "./graphLock.js";
import { MAX_BLOCKED_BY } from "./creation.js";
import { InvalidInputError } from "../../domain/errors.js";

/** Who edits the graph: the board of a company, or an agent through a run that must hold the issue. */
export type GraphEditor = { companyId: string; agentId: null } | { companyId: string; agentId: string; runId: string };

export interface DependencyChanged {
  __typename: "DependencyAdded" | "DependencyRemoved";
  issue: Issue;
}
export type AddDependencyResult = DependencyChanged | DependencyCycle | IssueNotFound | NotLockOwner;
export type RemoveDependencyResult = DependencyChanged | IssueNotFound | NotLockOwner;

type Verdict = "NO_ISSUE" | "NO_BLOCKER" | "NOT_OWNER" | "CYCLE" | "TOO_MANY" | "CHANGE";

interface EdgeAnswer {
  verdict: Verdict;
  issue: Issue | null;
  holder: string | null;
  path: string[] | null;
}

/**
 * The CTEs both edge statements begin with: `blk`, the blocker locked FOR
 * SHARE (a status change into or out of DONE waits for this transaction, and
 * then its trigger sees the edge as this transaction left it), then `cur`, the
 * dependent locked FOR UPDATE (after blk: the InitPlan runs before the row is
 * locked, so the locks are taken in the order a DONE release takes them,
 * blocker then dependents), and `owner`, whether the editor may change it.
 */
const edgeCtes = (editor: GraphEditor, issueId: string, blockedById: string) => sql`
    blk AS (
      SELECT b.id, b.status FROM issues b
       WHERE b.id = ${blockedById}::uuid AND b.company_id = ${editor.companyId}::uuid
         FOR SHARE
    ),
    cur AS (
      SELECT i.* FROM issues i
       WHERE i.id = ${issueId}::uuid AND i.company_id = ${editor.companyId}::uuid AND (SELECT count(*) FROM blk) >= 0
         FOR UPDATE
    ),
    owner AS (
      SELECT ${
        editor.agentId === null
          ? raw("true")
          : sql`EXISTS (SELECT 1 FROM cur JOIN heartbeat_runs r ON r.id = cur.checkout_run_id
                        WHERE r.id = ${editor.runId}::uuid AND r.agent_id = ${editor.agentId}::uuid AND ${raw(runIsLive("r"))})`
      } AS ok
    )`;

const answerColumns = sql`
    (SELECT verdict FROM verdict) AS verdict,
    (SELECT coalesce((SELECT ${issueJson("u")} FROM updated u), ${issueJson("c")}) FROM cur c) AS issue,
    (SELECT checkout_run_id FROM cur) AS holder`;

/**
 * Invariant: the graph stays acyclic. The edge is added only if `blockedById`
 * does not already wait, through blockedBy edges, on `issueId`
 * (baton_dependency_path, on a snapshot taken after the company's graph lock:
 * lockDependencyGraph); an issue waits on at most MAX_BLOCKED_BY issues; and
 * the dependent's waiting_count rises by one when
 * the blocker is not DONE, judged on the blocker's locked row. An edge that
 * exists already is answered as added, and changes nothing.
 */
const addEdge = (editor: GraphEditor, issueId: string, blockedById: string) =>
  statement(
    "ADD_DEPENDENCY_IF_ACYCLIC",
    sql`
    WITH ${edgeCtes(editor, issueId, blockedById)},
    cycle AS (
      SELECT baton_dependency_path(${blockedById}::uuid, ${issueId}::uuid) AS path
    ),
    verdict AS (
      SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM cur) THEN 'NO_ISSUE'
        WHEN NOT EXISTS (SELECT 1 FROM blk) THEN 'NO_BLOCKER'
        WHEN NOT (SELECT ok FROM owner) THEN 'NOT_OWNER'
        WHEN EXISTS (SELECT 1 FROM issue_dependencies d WHERE d.issue_id = ${issueId}::uuid AND d.blocked_by_id = ${blockedById}::uuid) THEN 'CHANGE'
        WHEN (SELECT path FROM cycle) IS NOT NULL THEN 'CYCLE'
        WHEN (SELECT count(*) FROM issue_dependencies d WHERE d.issue_id = ${issueId}::uuid) >= ${MAX_BLOCKED_BY}::int THEN 'TOO_MANY'
        ELSE 'CHANGE' END AS verdict
    ),
    edge AS (
      INSERT INTO issue_dependencies (issue_id, blocked_by_id, company_id)
      SELECT ${issueId}::uuid, ${blockedById}::uuid, ${editor.companyId}::uuid FROM verdict WHERE verdict = 'CHANGE'
          ON CONFLICT DO NOTHING
      RETURNING issue_id
    ),
    updated AS (
      UPDATE issues i SET waiting_count = i.waiting_count + 1, updated_at = now()
        FROM edge, blk WHERE i.id = edge.issue_id AND blk.status <> 'DONE'
      RETURNING i.*
    )
    SELECT ${answerColumns}, (SELECT path FROM cycle WHERE (SELECT verdict FROM verdict) = 'CYCLE') AS path`,
  );

/**
 * Invariant: removing an edge frees one wait of the dependent when the blocker
 * is not DONE (judged on its locked row); removing an edge that is not there
 * changes nothing.
 */
const removeEdge = (editor: GraphEditor, issueId: string, blockedById: string) =>
  statement(
    "REMOVE_DEPENDENCY",
    sql`
    WITH ${edgeCtes(editor, issueId, blockedById)},
    verdict AS (
      SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM cur) THEN 'NO_ISSUE'
        WHEN NOT EXISTS (SELECT 1 FROM blk) THEN 'NO_BLOCKER'
        WHEN NOT (SELECT ok FROM owner) THEN 'NOT_OWNER'
        ELSE 'CHANGE' END AS verdict
    ),
    edge AS (
      DELETE FROM issue_dependencies d USING verdict v
       WHERE v.verdict = 'CHANGE' AND d.issue_id = ${issueId}::uuid AND d.blocked_by_id = ${blockedById}::uuid
      RETURNING d.issue_id
    ),
    updated AS (
      UPDATE issues i SET waiting_count = i.waiting_count - 1, updated_at = now()
        FROM edge, blk WHERE i.id = edge.issue_id AND blk.status <> 'DONE'
      RETURNING i.*
    )
    SELECT ${answerColumns}, NULL::uuid[] AS path`,
  );

function answer(
  kind: "DependencyAdded" | "DependencyRemoved",
  editor: GraphEditor,
  issueId: string,
  blockedById: string,
  row: EdgeAnswer,
): AddDependencyResult {
  switch (row.verdict) {
    case "NO_ISSUE":
      return issueNotFound(issueId);
    case "NO_BLOCKER":
      return issueNotFound(blockedById);
    case "NOT_OWNER":
      return {
        __typename: "NotLockOwner",
        message: row.holder
          ? `issue ${issueId} is checked out by run ${row.holder}, not ${editor.agentId === null ? "" : editor.runId}`
          : `issue ${issueId} is not checked out: an agent changes the dependencies only of an issue its run holds`,
        issueId,
        ownerRunId: row.holder,
      };
    case "CYCLE": {
      const path = row.path ?? [];
      return {
        __typename: "DependencyCycle",
        message:
          path.length === 1
            ? `issue ${issueId} cannot wait on itself`
            : `issue ${issueId} cannot wait on ${blockedById}: ${blockedById} already waits on it (${path.join(" → ")})`,
        path,
      };
    }
    case "TOO_MANY":
      throw new InvalidInputError(`issue ${issueId} already waits on ${MAX_BLOCKED_BY} issues, the most one issue may`);
    case "CHANGE":
      return { __typename: kind, issue: row.issue! };
  }
}

/** One graph edit: the company's graph lock, then the statement, in one transaction (retried whole if aborted). */
function inGraphTransaction(deps: Pick<LockDeps, "db">, companyId: string, query: Sql): Promise<EdgeAnswer> {
  return retryingAborts(() =>
    deps.db.$transaction(async (tx) => {
      await lockDependencyGraph(tx, companyId);
      return queryOneInTransaction<EdgeAnswer>(tx, query);
    }),
  );
}

export async function addDependency(deps: Pick<LockDeps, "db">, editor: GraphEditor, issueId: string, blockedById: string): Promise<AddDependencyResult> {
  const row = await inGraphTransaction(deps, editor.companyId, addEdge(editor, issueId, blockedById));
  return answer("DependencyAdded", editor, issueId, blockedById, row);
}

export async function removeDependency(deps: Pick<LockDeps, "db">, editor: GraphEditor, issueId: string, blockedById: string): Promise<RemoveDependencyResult> {
  // A removal closes no cycle, but takes the graph lock all the same: removing "X waits on B" beside adding
  // "B waits on X" would otherwise lock B then X against X then B.
  const row = await inGraphTransaction(deps, editor.companyId, removeEdge(editor, issueId, blockedById));
  return answer("DependencyRemoved", editor, issueId, blockedById, row) as RemoveDependencyResult;
}
