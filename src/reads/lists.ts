// Read models for the queries. Every read is scoped to one company: an id from
// another company reads as not found.
import type { Queryable } from "../db/client.js";
import { prunedColumns, refuseAhead, refusePruned } from "../events/history.js";
import type { PrunedColumns } from "../events/history.js";
import { agentJson, companyJson, eventJson, issueJson, queryAll, queryOne, raw, readyNow, runJson, sql, statement } from "../db/sql.js";
import type { Agent, Company } from "../domain/types.js";
import type { Issue, IssueStatus, LockEvent, Run, RunStatus } from "../domain/types.js";

/** A companies row under `c`, keys as in GraphQL. */

export async function getCompany(db: Queryable, id: string): Promise<Company | null> {
  const row = await queryOne<{ company: Company } | undefined>(
    db,
    statement("READ_COMPANY", sql`SELECT ${companyJson("c")} AS company FROM companies c WHERE c.id = ${id}::uuid`),
  );
  return row?.company ?? null;
}

/** Companies by name, for the admin token's company picker. */
export async function listCompanies(db: Queryable, first: number): Promise<Company[]> {
  const rows = await queryAll<{ company: Company }>(
    db,
    statement(
      "LIST_COMPANIES",
      sql`SELECT ${companyJson("c")} AS company
          FROM companies c ORDER BY c.name, c.id LIMIT ${first}::int`,
    ),
  );
  return rows.map((r) => r.company);
}

export async function listAgents(db: Queryable, companyId: string): Promise<Agent[]> {
  const rows = await queryAll<{ agent: Agent }>(
    db,
    statement(
      "LIST_AGENTS",
      sql`SELECT ${agentJson("a")} AS agent
          FROM agents a WHERE a.company_id = ${companyId}::uuid ORDER BY a.created_at, a.id`,
    ),
  );
  return rows.map((r) => r.agent);
}

/** Issues by id, each only if it belongs to the company (null: any company). */
export async function getIssues(db: Queryable, ids: readonly string[], companyId: string | null): Promise<Issue[]> {
  if (ids.length === 0) return [];
  const rows = await queryAll<{ issue: Issue }>(
    db,
    statement(
      "READ_ISSUES_BY_ID",
      sql`SELECT ${issueJson("i")} AS issue FROM issues i
         WHERE i.id = ANY(${[...ids]}::uuid[]) AND (${companyId}::uuid IS NULL OR i.company_id = ${companyId}::uuid)`,
    ),
  );
  return rows.map((r) => r.issue);
}

export interface IssuePage {
  issues: Issue[];
  hasNextPage: boolean;
}

/**
 * Each issue's blockedBy edges with their blockers' status, for the issues
 * `ids` (Issue.blockedBy and Issue.waitingOn, through a DataLoader): oldest
 * edge first, and edges made together in their blockers' creation order.
 */
export async function getDependencies(db: Queryable, ids: readonly string[]): Promise<{ issueId: string; blockedById: string; done: boolean }[]> {
  if (ids.length === 0) return [];
  return queryAll(
    db,
    statement(
      "READ_DEPENDENCIES",
      sql`SELECT d.issue_id AS "issueId", d.blocked_by_id AS "blockedById", b.status = 'DONE' AS done
            FROM issue_dependencies d JOIN issues b ON b.id = d.blocked_by_id
           WHERE d.issue_id = ANY(${[...ids]}::uuid[])
           ORDER BY d.issue_id, d.created_at, b.created_at, b.id`,
    ),
  );
}

/** Issues in (created_at, id) order, after the issue `afterId` (keyset pagination: stable under inserts). */
export async function listIssues(
  db: Queryable,
  companyId: string,
  filter: {
    status?: IssueStatus[] | null;
    assigneeAgentId?: string | null;
    /** Only the sub-issues of this issue. */
    parentId?: string | null;
    /** Only ready issues (true) or only the others (false): Issue.ready. */
    ready?: boolean | null;
    afterId?: string | null;
    first: number;
  },
): Promise<IssuePage> {
  const rows = await queryAll<{ issue: Issue }>(
    db,
    statement(
      "LIST_ISSUES_PAGE",
      sql`SELECT ${issueJson("i")} AS issue FROM issues i
         WHERE i.company_id = ${companyId}::uuid
           AND (${filter.status ?? null}::issue_status[] IS NULL OR i.status = ANY(${filter.status ?? null}::issue_status[]))
           AND (${filter.assigneeAgentId ?? null}::uuid IS NULL OR i.assignee_agent_id = ${filter.assigneeAgentId ?? null}::uuid)
           AND (${filter.parentId ?? null}::uuid IS NULL OR i.parent_id = ${filter.parentId ?? null}::uuid)
           AND (${filter.ready ?? null}::boolean IS NULL OR ${filter.ready ?? null}::boolean = ${raw(readyNow("i"))})
           AND (${filter.afterId ?? null}::uuid IS NULL OR (i.created_at, i.id) > (
                 SELECT a.created_at, a.id FROM issues a WHERE a.id = ${filter.afterId ?? null}::uuid AND a.company_id = ${companyId}::uuid))
         ORDER BY i.created_at, i.id
         LIMIT ${filter.first + 1}::int`,
    ),
  );
  return { issues: rows.slice(0, filter.first).map((r) => r.issue), hasNextPage: rows.length > filter.first };
}

export async function getRun(db: Queryable, id: string, companyId: string | null): Promise<Run | null> {
  const row = await queryOne<{ run: Run } | undefined>(
    db,
    statement(
      "READ_RUN",
      sql`SELECT ${runJson("r")} AS run FROM heartbeat_runs r
         WHERE r.id = ${id}::uuid AND (${companyId}::uuid IS NULL OR r.company_id = ${companyId}::uuid)`,
    ),
  );
  return row?.run ?? null;
}

/** Newest first. */
export async function listRuns(db: Queryable, companyId: string, status: RunStatus[] | null, first: number): Promise<Run[]> {
  const rows = await queryAll<{ run: Run }>(
    db,
    statement(
      "LIST_RUNS",
      sql`SELECT ${runJson("r")} AS run FROM heartbeat_runs r
         WHERE r.company_id = ${companyId}::uuid
           AND (${status}::run_status[] IS NULL OR r.status = ANY(${status}::run_status[]))
         ORDER BY r.started_at DESC, r.id DESC
         LIMIT ${first}::int`,
    ),
  );
  return rows.map((r) => r.run);
}

/**
 * A page of a company's ledger, final events only (below the statement's
 * horizon), so it is safe to resume from: no smaller seq can appear later
 * (docs/events.md, "How seq is made"). A page: seq > afterSeq and seq < beforeSeq, ascending,
 * or newest first (the event tail of a board, paged back with beforeSeq).
 */
export async function listLockEvents(
  db: Queryable,
  companyId: string,
  filter: { afterSeq: string | null; beforeSeq?: string | null; newestFirst?: boolean; issueId?: string | null; agentId?: string | null; first: number },
): Promise<LockEvent[]> {
  // A literal direction, not a CASE: either way the (company_id, seq) key reads the page in order.
  const order = raw(filter.newestFirst === true ? "e.seq DESC" : "e.seq");
  const pageOrder = raw(filter.newestFirst === true ? "p.seq DESC" : "p.seq");
  // Without afterSeq the page starts at the oldest event kept: nothing to refuse.
  const afterSeq = filter.afterSeq === null ? null : BigInt(filter.afterSeq);
  const matches = sql`e.company_id = ${companyId}::uuid
           AND e.seq > ${filter.afterSeq ?? "0"}::bigint
           AND e.seq < ${filter.beforeSeq ?? "9223372036854775807"}::bigint
           AND e.seq < (SELECT baton_event_horizon())
           AND (${filter.issueId ?? null}::uuid IS NULL OR e.issue_id = ${filter.issueId ?? null}::uuid)
           AND (${filter.agentId ?? null}::uuid IS NULL OR e.agent_id = ${filter.agentId ?? null}::uuid)`;
  // Read forward from below the newest dropped seq (a point EVENTS_PRUNED offered), a page also
  // holds every kept event below that seq, past `first`: the next page then starts above it, where
  // nothing is refused, however few events a page holds.
  const beyond =
    filter.newestFirst === true || afterSeq === null
      ? sql`0`
      : sql`(SELECT count(*)::int FROM lock_events e, lock_events_pruned x
              WHERE x.company_id = ${companyId}::uuid AND e.seq < x.through_seq AND ${matches})`;
  const row = await queryOne<{ events: LockEvent[]; ceiling: string } & PrunedColumns>(
    db,
    // Only final events, below the snapshot's horizon (docs/events.md),
    // so a reader that resumes after the last seq of a page never skips one; and one
    // resuming where retention dropped events (EVENTS_PRUNED), or after a seq this cluster
    // has not made (SEQ_AHEAD), is refused: same snapshot.
    statement(
      "LIST_LOCK_EVENTS",
      sql`SELECT coalesce((SELECT json_agg(p.event ORDER BY ${pageOrder}) FROM (
         SELECT e.seq, ${eventJson("e")} AS event FROM lock_events e
         WHERE ${matches}
         ORDER BY ${order}
         LIMIT ${filter.first}::int + ${beyond}) p), '[]'::json) AS events,
       (SELECT baton_event_ceiling())::text AS ceiling,
       ${prunedColumns(companyId, afterSeq ?? 0n)}`,
    ),
  );
  if (afterSeq !== null) {
    refuseAhead(afterSeq, BigInt(row.ceiling));
    refusePruned(afterSeq, row);
  }
  return row.events;
}
