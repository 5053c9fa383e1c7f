// disableAgent and enableAgent (docs/access.md, "Rotating and revoking keys").
// Disabling an agent revokes every key it has, finishes its RUNNING runs
// (CANCELLED) and takes back the locks they held as the recovery sweep takes
// back a dead run's: the attempt charged as for any dead run, the issue OPEN
// again or ESCALATED, a RECOVERED (or ESCALATED) event with reason
// AGENT_DISABLED. The caller then tells every instance which keys were
// revoked (revocations.ts).
import { agentJson, appendEvents, queryOne, queryOneInTransaction, raw, retryingAborts, sql, stampEvent, statement } from "../../db/sql.js";
import { InvalidInputError, NotFoundError } from "../../domain/errors.js";
import type { Agent, LockEvent } from "../../domain/types.js";
import { REVOKE_KEYS, lockAgent } from "../../db/agentRows.js";
import type { Scope } from "../../db/agentRows.js";
import { validateText } from "../../domain/validate.js";
import { commitChange } from "../shared/commit.js";
import type { LockDeps } from "../shared/deps.js";
import { recoveredKind, recoverLock } from "../shared/fragments.js";

export interface Disabled {
  agent: Agent;
  revokedKeyIds: string[];
  events: LockEvent[];
}

/** The event reason of a lock taken back from a disabled agent's run. */
export const AGENT_DISABLED = "AGENT_DISABLED";

/**
 * Two commits. Invariant: once disableAgent returns, the agent has no key
 * that works, no RUNNING run and no lock.
 *
 * 1. LOCK_AGENT then DISABLE_AGENT, one transaction: the agent is disabled,
 *    its keys revoked and its RUNNING runs CANCELLED. The agent row is locked
 *    first (rotations of the agent take turns with this; START_RUN reads it
 *    FOR SHARE). Claims read their run FOR SHARE, so once DISABLE_AGENT has
 *    the run rows, every claim those runs made has committed, and none can
 *    follow: from this commit on, nothing the agent holds can change hands
 *    except by recovery (or another agent's adoption of a dead holder).
 * 2. RECOVER_LOCKS_OF_DISABLED_RUNS, its own statement: every lock a run of
 *    the agent holds is taken back as the sweep takes a dead run's, with the
 *    events (reason AGENT_DISABLED).
 *
 * Why not one transaction: a transaction takes its id at its first row lock,
 * and the claims it then waits for may have younger ids; its events would
 * have to sort after theirs, which a seq made from an older id cannot
 * (docs/events.md). The event order check refused such a transaction every
 * time an agent was claiming while it was disabled. The second statement
 * runs after the claims committed, so its id is younger than all of theirs.
 * If the process dies between the two, the locks are held by CANCELLED runs:
 * the recovery sweep takes them back (reason RUN_FINISHED), and disabling
 * again takes them back too. Disabling a disabled agent changes its reason and
 * takes back anything still held.
 */
export async function disableAgent(
  deps: LockDeps,
  scope: Scope,
  agentId: string,
  reason: string,
  /** Told the revoked keys as soon as the first commit is made, before the locks are taken back. */
  onKeysRevoked: (keyIds: string[]) => void = () => {},
): Promise<Disabled> {
  const why = validateText("reason", reason.trim(), 1000);
  if (!why) throw new InvalidInputError("reason must not be empty: say why the agent is disabled");
  const disabled = await retryingAborts(() =>
    deps.db.$transaction(async (tx) => {
      if (!(await lockAgent(tx, scope, agentId))) return null;
      return queryOneInTransaction<{ agent: Agent; revoked: string[] }>(
        tx,
        statement(
          "DISABLE_AGENT",
          sql`
        WITH agent AS (
          UPDATE agents a SET disabled_at = coalesce(a.disabled_at, now()), disabled_reason = ${why}
           WHERE a.id = ${agentId}::uuid
          RETURNING a.*
        ), revoked AS (
          UPDATE api_keys k SET ${raw(REVOKE_KEYS)}
           WHERE k.agent_id = ${agentId}::uuid AND k.revoked_at IS NULL
          RETURNING k.id
        ), runs AS (
          UPDATE heartbeat_runs r SET status = 'CANCELLED', finished_at = now()
           WHERE r.agent_id = ${agentId}::uuid AND r.status = 'RUNNING'
          RETURNING r.id
        )
        SELECT (SELECT ${agentJson("a")} FROM agent a) AS agent,
               coalesce((SELECT array_agg(id::text) FROM revoked), '{}') AS revoked,
               (SELECT count(*) FROM runs) AS runs`,
        ),
      );
    }),
  );
  if (!disabled) throw new NotFoundError(`agent ${agentId} not found`);
  onKeysRevoked(disabled.revoked);
  const recovered = await commitChange<{ events: LockEvent[] }>(
    deps,
    statement(
      "RECOVER_LOCKS_OF_DISABLED_RUNS",
      sql`
      WITH held AS (
        -- every lock a run of the agent holds: none of its runs is RUNNING now
        SELECT i.id, i.checkout_run_id AS run_id FROM issues i JOIN heartbeat_runs r ON r.id = i.checkout_run_id
         WHERE r.agent_id = ${agentId}::uuid AND r.status <> 'RUNNING'
         ORDER BY i.id
           FOR UPDATE OF i
      ),
      changed AS (
        UPDATE issues i SET ${raw(recoverLock("i"))}, ${raw(stampEvent("i"))}, updated_at = now()
          FROM held h
         WHERE i.id = h.id
        RETURNING i.*, ${raw(recoveredKind("i"))} AS ev_kind, h.run_id AS ev_run_id,
                  ${agentId}::uuid AS ev_agent_id, ${AGENT_DISABLED}::text AS ev_reason
      ),
      ${appendEvents("changed")}
      SELECT (SELECT list FROM events) AS events`,
    ),
  );
  return { agent: disabled.agent, revokedKeyIds: disabled.revoked, events: recovered.events };
}

/**
 * The agent may be given a key again (rotateAgentKey); the keys
 * it had stay revoked.
 */
export async function enableAgent(db: LockDeps["db"], scope: Scope, agentId: string): Promise<Agent> {
  const row = await queryOne<{ agent: Agent | null }>(
    db,
    statement(
      "ENABLE_AGENT",
      sql`
      WITH agent AS (
        UPDATE agents a SET disabled_at = NULL, disabled_reason = NULL
         WHERE a.id = ${agentId}::uuid AND (${scope}::uuid IS NULL OR a.company_id = ${scope}::uuid)
        RETURNING a.*
      )
      SELECT (SELECT ${agentJson("a")} FROM agent a) AS agent`,
    ),
  );
  if (!row.agent) throw new NotFoundError(`agent ${agentId} not found`);
  return row.agent;
}
