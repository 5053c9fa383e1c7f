// Group commit for claimIssue without an issue id. Concurrent claims of one
// company that reach this API instance while its previous claim statement is
// still running are answered together by the next statement
// (CLAIM_NEXT_FOR_EACH): one round trip, one commit and one take of the
// company's seq lock for the whole group, instead of one each. When the
// instance is idle a claim goes out at once, alone: batching adds no delay,
// it only appears under load, where the seq lock (held until commit) would
// otherwise serialise every claim of the company (docs/events.md).
import { appendEvents, issueJson, queryOne, raw, runViewJson, sql } from "../db/sql.js";
import type { LockDeps } from "./deps.js";
import { RUN_CTE_COLUMNS } from "./deps.js";
import type { AgentActor, Issue, LockEvent, RunView } from "./types.js";

export interface ClaimRequest {
  actor: AgentActor;
  runId: string;
  includeUnassigned: boolean;
}

export interface ClaimAnswer {
  run: RunView | null;
  issue: Issue | null;
}

/** More than this many waiting claims go out in several statements. */
const MAX_GROUP = 64;

/**
 * CLAIM_NEXT_FOR_EACH. Invariant: at most one run holds an issue's checkout,
 * and each request receives what it would have received had the requests
 * claimed one after another in arrival order: the first issue, in claim order,
 * that is claimable by its agent (assigned to it, or unassigned with
 * includeUnassigned) and not given to an earlier request of the group.
 *  - `run` reads every named run FOR SHARE, in id order (as claimIssue does:
 *    finishRun and the sweep update the run row first, so a run being ended
 *    cannot take a lock); only requests whose run is live and their own may claim.
 *  - `cand` takes, for each distinct (agent, pool) of the group, up to
 *    group-size claimable issues in claim order with FOR UPDATE SKIP LOCKED:
 *    other transactions' claims are skipped and never waited for, and a row
 *    changed since the snapshot is re-checked on its newest version. Lists of
 *    different agents may share rows (this statement's own locks do not skip);
 *    `step` hands each row out once.
 *  - `step` walks the requests in arrival order, giving each its best
 *    remaining candidate. Candidates left over stay locked until commit.
 * One CLAIMED event per claimed issue, all under one take of the seq lock.
 */
function claimForEachStatement(companyId: string, group: ClaimRequest[]) {
  return sql`
    WITH RECURSIVE req AS (
      SELECT q.run_id, q.agent_id, q.pool, q.n::int AS n
        FROM unnest(${group.map((g) => g.runId)}::uuid[], ${group.map((g) => g.actor.agentId)}::uuid[],
                    ${group.map((g) => g.includeUnassigned)}::boolean[]) WITH ORDINALITY AS q(run_id, agent_id, pool, n)
    ),
    run AS (
      SELECT ${raw(RUN_CTE_COLUMNS)} FROM heartbeat_runs r
       WHERE r.id IN (SELECT run_id FROM req) AND r.company_id = ${companyId}::uuid
       ORDER BY r.id
         FOR SHARE
    ),
    asker AS (
      SELECT q.* FROM req q JOIN run r ON r.id = q.run_id AND r.agent_id = q.agent_id AND r.live
    ),
    cand AS (
      SELECT DISTINCT ON (c.id) c.*
        FROM (SELECT DISTINCT agent_id, pool FROM asker) g
        CROSS JOIN LATERAL (
          SELECT i.id, i.assignee_agent_id, i.priority, i.created_at FROM issues i
           WHERE i.company_id = ${companyId}::uuid
             AND i.status = 'OPEN' AND i.attempt_count < i.max_attempts
             AND (i.assignee_agent_id = g.agent_id OR (g.pool AND i.assignee_agent_id IS NULL))
           ORDER BY i.priority, i.created_at, i.id
           LIMIT ${group.length}::int
             FOR UPDATE SKIP LOCKED
        ) c
    ),
    step AS (
      SELECT 0 AS n, ARRAY[]::uuid[] AS taken, NULL::uuid AS issue_id
      UNION ALL
      SELECT s.n + 1, CASE WHEN p.id IS NULL THEN s.taken ELSE s.taken || p.id END, p.id
        FROM step s
        LEFT JOIN LATERAL (
          SELECT c.id FROM cand c JOIN asker a ON a.n = s.n + 1
           WHERE (c.assignee_agent_id = a.agent_id OR (a.pool AND c.assignee_agent_id IS NULL))
             AND c.id <> ALL(s.taken)
           ORDER BY c.priority, c.created_at, c.id
           LIMIT 1
        ) p ON true
       WHERE s.n < ${group.length}::int
    ),
    changed AS (
      UPDATE issues i
         SET status = 'CLAIMED', checkout_run_id = q.run_id, claimed_at = now(),
             lock_epoch = i.lock_epoch + 1, updated_at = now()
        FROM step s JOIN req q ON q.n = s.n
       WHERE i.id = s.issue_id
      RETURNING i.*, q.n AS req_n, 'CLAIMED' AS ev_kind, q.run_id AS ev_run_id, q.agent_id AS ev_agent_id, NULL::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT json_agg(json_build_object(
              'run', (SELECT ${runViewJson("r")} FROM run r WHERE r.id = q.run_id),
              'issue', (SELECT ${issueJson("c")} FROM changed c WHERE c.req_n = q.n)) ORDER BY q.n)
              FROM req q) AS answers,
           (SELECT list FROM events) AS events`;
}

interface Waiting extends ClaimRequest {
  resolve: (answer: ClaimAnswer) => void;
  reject: (err: unknown) => void;
}

export class ClaimBatcher {
  private readonly queues = new Map<string, Waiting[]>();

  constructor(private readonly deps: LockDeps) {}

  claim(request: ClaimRequest): Promise<ClaimAnswer> {
    return new Promise((resolve, reject) => {
      const companyId = request.actor.companyId;
      const queue = this.queues.get(companyId);
      if (queue) {
        queue.push({ ...request, resolve, reject }); // a statement is running: join the next group
        return;
      }
      const fresh: Waiting[] = [{ ...request, resolve, reject }];
      this.queues.set(companyId, fresh);
      void this.drain(companyId, fresh);
    });
  }

  /** One statement at a time per company: whoever arrived meanwhile goes in the next. */
  private async drain(companyId: string, queue: Waiting[]): Promise<void> {
    while (queue.length > 0) {
      const group = queue.splice(0, MAX_GROUP);
      try {
        const row = await queryOne<{ answers: ClaimAnswer[]; events: LockEvent[] }>(this.deps.db, claimForEachStatement(companyId, group));
        this.deps.events.publish(row.events);
        group.forEach((waiting, i) => waiting.resolve(row.answers[i] ?? { run: null, issue: null }));
      } catch (err) {
        for (const waiting of group) waiting.reject(err);
      }
    }
    this.queues.delete(companyId);
  }
}
