// rotateAgentKey and rotateBoardKey: a new key, shown once; every key it
// replaces stops working (docs/access.md, "Rotating and revoking keys"). The
// caller tells every instance (revokeKeys) once this has committed.
import type { Db } from "../db/client.js";
import { queryOneInTransaction, raw, retryingAborts, sql, statement } from "../db/sql.js";
import { InvalidInputError, NotFoundError } from "../domain/errors.js";
import { generateKey } from "./keys.js";
import { REVOKE_KEYS, lockAgent } from "../db/agentRows.js";
import type { Scope } from "../db/agentRows.js";

export interface Rotated {
  /** The new key: shown once, only its hash is stored. */
  apiKey: string;
  /** The keys it replaced, now revoked. */
  revokedKeyIds: string[];
}

/**
 * ROTATE_AGENT_KEY, in one transaction of two statements. Invariant: an
 * agent has at most one key that works, the newest. The agent row is locked
 * first (lockAgent), so concurrent rotations (and disableAgent) of one agent
 * take turns, and the second statement's snapshot, taken after the lock, sees
 * the key a rotation just before it added, and revokes it.
 */
export async function rotateAgentKey(db: Db, scope: Scope, agentId: string): Promise<Rotated> {
  const { key, hash } = generateKey("agent");
  return retryingAborts(() =>
    db.$transaction(async (tx) => {
      const agent = await lockAgent(tx, scope, agentId);
      if (!agent) throw new NotFoundError(`agent ${agentId} not found`);
      if (agent.disabled) throw new InvalidInputError(`agent ${agentId} is disabled: enable it (enableAgent) before giving it a key`);
      const row = await queryOneInTransaction<{ revoked: string[] }>(
        tx,
        statement(
          "ROTATE_AGENT_KEY",
          sql`
        WITH revoked AS (
          UPDATE api_keys k SET ${raw(REVOKE_KEYS)}
           WHERE k.agent_id = ${agentId}::uuid AND k.revoked_at IS NULL
          RETURNING k.id
        ), added AS (
          INSERT INTO api_keys (company_id, agent_id, role, key_hash)
          SELECT a.company_id, a.id, 'AGENT', ${hash} FROM agents a WHERE a.id = ${agentId}::uuid
        )
        SELECT coalesce((SELECT array_agg(id::text) FROM revoked), '{}') AS revoked`,
        ),
      );
      return { apiKey: key, revokedKeyIds: row.revoked };
    }),
  );
}

/**
 * The same for a company's board key, the company row
 * locked first. Invariant: a company has at most one board key that works.
 */
export async function rotateBoardKey(db: Db, companyId: string): Promise<Rotated> {
  const { key, hash } = generateKey("board");
  return retryingAborts(() =>
    db.$transaction(async (tx) => {
      const company = await queryOneInTransaction<{ found: boolean }>(
        tx,
        statement(
          "LOCK_COMPANY",
          sql`
        WITH c AS (SELECT c.id FROM companies c WHERE c.id = ${companyId}::uuid FOR NO KEY UPDATE)
        SELECT EXISTS (SELECT 1 FROM c) AS found`,
        ),
      );
      if (!company.found) throw new NotFoundError(`company ${companyId} not found`);
      const row = await queryOneInTransaction<{ revoked: string[] }>(
        tx,
        statement(
          "ROTATE_BOARD_KEY",
          sql`
        WITH revoked AS (
          UPDATE api_keys k SET ${raw(REVOKE_KEYS)}
           WHERE k.company_id = ${companyId}::uuid AND k.role = 'BOARD' AND k.revoked_at IS NULL
          RETURNING k.id
        ), added AS (
          INSERT INTO api_keys (company_id, role, key_hash) VALUES (${companyId}::uuid, 'BOARD', ${hash})
        )
        SELECT coalesce((SELECT array_agg(id::text) FROM revoked), '{}') AS revoked`,
        ),
      );
      return { apiKey: key, revokedKeyIds: row.revoked };
    }),
  );
}
