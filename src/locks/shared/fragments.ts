// The SQL the lock statements share: each rule that more than one statement
// applies is written here once, under one name (docs/invariants.md names
// them). The `run` and `cur` CTEs, the claimable predicate, the two locks
// cleared together, where an issue goes when its hold ends, and the attempt a
// dead CLAIMED holder used.
import { raw, sql } from "../../db/sql.js";
import type { Sql } from "../../db/sql.js";
import type { AgentActor } from "./types.js";

/**
 * Whether run `alias` may hold locks: RUNNING with its lease in the future on
 * the database clock. baton_run_is_live (prisma/migrations/20261129000000_init)
 * is the one definition; use it wherever liveness is a value.
 */
export const runIsLive = (alias: string) => `baton_run_is_live(${alias}.status, ${alias}.lease_expires_at)`;

/**
 * runIsLive as a WHERE predicate, and its opposite for a run still marked
 * RUNNING: the function's body written out (status and lease are NOT NULL, so
 * it means the same), which heartbeat_runs_running_lease_idx can serve and a
 * call cannot. A heartbeat (live) and a time-out (expired) guard the same row
 * with these two, so exactly one of them wins at the expiry instant.
 */
export const runLeaseLive = (alias: string) => `${alias}.status = 'RUNNING' AND ${alias}.lease_expires_at > now()`;
export const runLeaseExpired = (alias: string) => `${alias}.status = 'RUNNING' AND ${alias}.lease_expires_at <= now()`;

/** A run row with its liveness (runIsLive), as the `run` CTEs read it. */
export const RUN_CTE_COLUMNS = `r.*, ${runIsLive("r")} AS live`;

/**
 * The `run` CTE of the agent mutations: the named run, if it is in the
 * caller's company, with its liveness. Statements that can take a new lock
 * read it FOR SHARE, so that finishRun and the recovery sweep (which update
 * the run row first) either wait for them or make them see a dead run.
 */
export const runCte = (runId: string, actor: AgentActor, forShare: boolean) => sql`
    run AS (
      SELECT ${raw(RUN_CTE_COLUMNS)} FROM heartbeat_runs r
       WHERE r.id = ${runId}::uuid AND r.company_id = ${actor.companyId}::uuid
       ${raw(forShare ? "FOR SHARE" : "")}
    )`;

/**
 * The `cur` CTE: the named issues of the caller's company, locked FOR UPDATE
 * (in id order, so that statements locking several never deadlock) and read
 * at their newest version, so a verdict made on them cannot go stale before
 * the change. Nothing is locked unless the run may act.
 *
 * An UPDATE after `cur` must take the lock columns it writes or keeps from
 * `cur`, never from its own alias. When the row changed after the statement's
 * snapshot (a claim committed while `cur` waited for it), PostgreSQL first
 * builds the new row from the snapshot's version and checks the CHECK
 * constraints on it; only then does it find the newer version and re-apply
 * the SET to it. A SET mixing `cur`'s status with the alias's checkout
 * (CLAIMED with no holder) fails issues_lock_pair on that first row, although
 * the row finally written would have been right.
 */
export const lockedIssuesCte = (actor: AgentActor, issueIds: readonly string[]) => sql`
    cur AS (
      SELECT i.* FROM issues i
       WHERE i.id = ANY(${[...issueIds]}::uuid[]) AND i.company_id = ${actor.companyId}::uuid
         AND EXISTS (SELECT 1 FROM run WHERE run.live AND run.agent_id = ${actor.agentId}::uuid)
       ORDER BY i.id
         FOR UPDATE
    )`;

/**
 * The `cur` CTE of the board's statements: one issue of the board's company,
 * locked FOR UPDATE and read at its newest version.
 */
export const boardLockedIssueCte = (companyId: string, issueId: string) => sql`
    cur AS (
      SELECT i.* FROM issues i
       WHERE i.id = ${issueId}::uuid AND i.company_id = ${companyId}::uuid
         FOR UPDATE
    )`;

/**
 * The `run` CTE of the grouped statements: the runs a `req` CTE names, in the
 * company, with their liveness; FOR SHARE in id order when the statement can
 * take a new lock (see runCte).
 */
export const requestedRunsCte = (companyId: string, forShare: boolean) => sql`
    run AS (
      SELECT ${raw(RUN_CTE_COLUMNS)} FROM heartbeat_runs r
       WHERE r.id IN (SELECT run_id FROM req) AND r.company_id = ${companyId}::uuid
       ${raw(forShare ? "ORDER BY r.id FOR SHARE" : "")}
    )`;

/**
 * The `cur` CTE of the grouped statements: the issues a `req` CTE names whose
 * request comes from a live run of its own agent, locked FOR UPDATE in id
 * order and read at their newest version.
 */
export const requestedIssuesCte = (companyId: string) => sql`
    cur AS (
      SELECT i.* FROM issues i
       WHERE i.id IN (SELECT q.issue_id FROM req q JOIN run r ON r.id = q.run_id AND r.agent_id = q.agent_id AND r.live)
         AND i.company_id = ${companyId}::uuid
       ORDER BY i.id
         FOR UPDATE
    )`;

/**
 * Whose claim may take issue `alias`: the one it is assigned to (`agent`), or,
 * when it is unassigned, a claim that includes the unassigned pool (`pool`, a
 * SQL boolean: a column of the request). The grouped claim hands its
 * candidates out by it (claimNextForEach.ts).
 */
export const assignedOrPooled = (alias: string, agent: Sql, pool: Sql): Sql =>
  sql`(${raw(alias)}.assignee_agent_id = ${agent} OR (${pool} AND ${raw(alias)}.assignee_agent_id IS NULL))`;

/**
 * Issue `alias` may be claimed by claim-next: OPEN (so it holds no lock) with
 * an attempt left (an exhausted issue is never claimed: docs/invariants.md, 9)
 * and ready (docs/lifecycle.md, Ready): no blocker short of DONE
 * (waiting_count) and not delayed. The claim indexes' WHERE
 * (issues_claimable_idx, issues_pool_idx, issues_key_pool_idx) and the keys'
 * trigger hold the same four; the last term re-checks not_before on the
 * database clock, so that not even a delayed flag left set by mistake could
 * let an issue out early.
 */
export const claimable = (alias: string) =>
  `${alias}.status = 'OPEN' AND ${alias}.attempt_count < ${alias}.max_attempts AND ${alias}.waiting_count = 0 AND NOT ${alias}.delayed` +
  ` AND (${alias}.not_before IS NULL OR ${alias}.not_before <= now())`;

/** An OPEN issue `alias` that claim by id answers IssueWaiting for: a blocker short of DONE, or notBefore still ahead. */
export const waiting = (alias: string) => `${alias}.status = 'OPEN' AND (${alias}.waiting_count > 0 OR ${alias}.not_before > now())`;

/**
 * The SET terms that delay issue `alias` by `seconds` (a SQL expression; NULL
 * leaves not_before as it is): not_before moves to now() + seconds, and the
 * issue leaves the claim indexes (delayed) until WAKE_DUE_ISSUES sees it due.
 * `when` (a SQL condition on the old row) limits it to some rows.
 */
export const delayBy = (alias: string, seconds: string, when = "true") =>
  `not_before = CASE WHEN (${when}) AND (${seconds}) IS NOT NULL THEN now() + make_interval(secs => (${seconds})) ELSE ${alias}.not_before END,
   delayed = CASE WHEN (${when}) AND (${seconds}) IS NOT NULL THEN (${seconds}) > 0 ELSE ${alias}.delayed END`;

/**
 * Retry backoff after an attempt of issue `alias` ended without DONE, when
 * `attempts` (the count after the charge) leaves it OPEN: retryDelaySeconds ×
 * 2^(attempts − 1), at most a day; NULL (no delay) when retry_delay_seconds is
 * 0 or the issue escalates.
 */
export const backoffSeconds = (alias: string, attempts: string) =>
  `CASE WHEN ${alias}.retry_delay_seconds > 0 AND (${attempts}) < ${alias}.max_attempts
        THEN least(${alias}.retry_delay_seconds::float8 * power(2, greatest((${attempts}) - 1, 0)), 86400) END`;

/**
 * Issue `alias` is OPEN with no attempt left: never claimable (claimable's
 * opposite among OPEN issues), for ESCALATE_EXHAUSTED_OPEN to escalate;
 * issues_exhausted_idx has the same WHERE.
 */
export const exhaustedOpen = (alias: string) => `${alias}.status = 'OPEN' AND ${alias}.attempt_count >= ${alias}.max_attempts`;

/**
 * The claimable predicate of an agent's own work: issue `alias` is claimable
 * and assigned to `agent`; issues_claimable_idx has the same WHERE. (A claim
 * by issue id decides with CLAIMABLE_STATUSES and its own verdicts instead:
 * checkoutIfExpected.ts.)
 */
export const claimableBy = (alias: string, agent: Sql): Sql => sql`${raw(claimable(alias))} AND ${raw(alias)}.assignee_agent_id = ${agent}`;

/** The same for the unassigned pool: claimable, and assigned to nobody; issues_pool_idx has the same WHERE. */
export const claimableUnassigned = (alias: string): Sql => raw(`${claimable(alias)} AND ${alias}.assignee_agent_id IS NULL`);

/** Both locks and their details, cleared together (the issues_lock_pair CHECK insists). */
export const CLEAR_LOCKS = `checkout_run_id = NULL, execution_run_id = NULL, execution_agent_name_key = NULL, execution_locked_at = NULL`;

/**
 * A holder that died while CLAIMED has used an attempt (it never reached
 * IN_PROGRESS, where acquireExecution counts one): the attempt count issue
 * `alias` has once such a holder's lock is taken from it, by adoption
 * (CHECKOUT_IF_EXPECTED) or recovery (RECOVER_LOCKS_OF_DEAD_RUNS).
 */
export const attemptsAfterDeath = (alias: string) => `${alias}.attempt_count + (${alias}.status = 'CLAIMED')::int`;

/**
 * Where an issue goes when its hold ends without DONE/BLOCKED, or when the
 * board reopens it: back to OPEN, or ESCALATED when it has no attempt left
 * (docs/lifecycle.md, Attempts: an exhausted issue never returns to OPEN).
 * The attempts are issue `alias`'s own columns unless given: the count after
 * a dead holder's attempt (attemptsAfterDeath), or the maxAttempts the board
 * sets in the same update.
 */
export const reopenOrEscalate = (
  alias: string,
  { attempts = `${alias}.attempt_count`, maxAttempts = `${alias}.max_attempts` }: { attempts?: string; maxAttempts?: string } = {},
) => `(CASE WHEN ${attempts} >= ${maxAttempts} THEN 'ESCALATED' ELSE 'OPEN' END)::issue_status`;

/**
 * A dead holder's lock taken back from issue `alias` (RECOVER_LOCKS_OF_DEAD_RUNS,
 * and disableAgent's RECOVER_LOCKS_OF_DISABLED_RUNS): the attempt a CLAIMED
 * holder used is charged, the issue reopens (or escalates when that was its
 * last attempt) after its retry backoff, both locks cleared. RECOVERED_KIND is its event's kind.
 */
export const recoverLock = (alias: string) =>
  `attempt_count = ${attemptsAfterDeath(alias)},
   status = ${reopenOrEscalate(alias, { attempts: attemptsAfterDeath(alias) })},
   ${delayBy(alias, backoffSeconds(alias, attemptsAfterDeath(alias)))},
   ${CLEAR_LOCKS}`;
/** The event of a recovered lock, read from the changed row `alias`. */
export const recoveredKind = (alias: string) => `CASE WHEN ${alias}.status = 'ESCALATED' THEN 'ESCALATED' ELSE 'RECOVERED' END`;
