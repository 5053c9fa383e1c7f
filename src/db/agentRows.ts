// The agent row's lock and the key revocation, shared by key management
// (src/auth/rotateKeys.ts) and disableAgent (src/locks/operator/disableAgent.ts):
// written once, below both, so that neither depends on the other.
import type { Db } from "./client.js";
import { queryOneInTransaction, sql, statement } from "./sql.js";

/**
 * Who may act on which company: a board key on its own (companyId), the admin
 * token on any (null).
 */
export type Scope = string | null;

/**
 * The revocation: stamps the keys with the time and the revoking transaction,
 * which the revocation poll reads (revocations.ts).
 */
export const REVOKE_KEYS = `revoked_at = now(), revoked_xid = pg_current_xact_id()`;

/**
 * The agent row, within the caller's scope, locked FOR NO KEY
 * UPDATE (foreign-key checks, such as an issue assigned to the agent, do not
 * wait for it), so that rotations and disableAgent of one agent take turns
 * and START_RUN (FOR SHARE) waits for them. null: no such agent in the scope.
 */
export async function lockAgent(tx: Pick<Db, "$queryRaw">, scope: Scope, agentId: string): Promise<{ disabled: boolean } | null> {
  const row = await queryOneInTransaction<{ found: boolean; disabled: boolean }>(
    tx,
    statement(
      "LOCK_AGENT",
      sql`
      WITH a AS (
        SELECT a.disabled_at FROM agents a
         WHERE a.id = ${agentId}::uuid AND (${scope}::uuid IS NULL OR a.company_id = ${scope}::uuid)
           FOR NO KEY UPDATE
      )
      SELECT EXISTS (SELECT 1 FROM a) AS found, EXISTS (SELECT 1 FROM a WHERE disabled_at IS NOT NULL) AS disabled`,
    ),
  );
  return row.found ? { disabled: row.disabled } : null;
}
