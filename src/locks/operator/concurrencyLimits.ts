// setConcurrencyLimit / concurrencyLimits: the board caps how many issues of
// one concurrency key may be active (CLAIMED or IN_PROGRESS) at once, and
// reads the caps with their current counts. The counts themselves are kept by
// the keys' trigger (prisma/migrations/…_concurrency_keys), in the transaction
// of every change to an issue; the claims read them (claimOrder.ts).
import { queryAll, queryOne, sql, statement } from "../../db/sql.js";
import type { Db } from "../../db/client.js";
import { InvalidInputError } from "../../domain/errors.js";
import { validateConcurrencyKey, validateConcurrencyLimit } from "../../domain/validate.js";

/** A company may limit this many keys: it bounds concurrencyLimits' answer. */
export const MAX_LIMITED_KEYS = 10_000;

export interface ConcurrencyLimit {
  key: string;
  maxActive: number;
  active: number;
}

/**
 * Invariant: from its commit on, no claim takes the key past
 * `maxActive`. The key's row is locked (ON CONFLICT DO UPDATE waits for any
 * statement changing the key's issues, whose trigger holds it), so its
 * `active` is exact when the limit lands; a limit below it takes nothing
 * away, it only stops new claims until the count falls. A key without a row
 * has never had an issue: it gets one, with nothing active.
 */
export async function setConcurrencyLimit(db: Db, companyId: string, key: string, maxActive: number | null): Promise<ConcurrencyLimit | null> {
  validateConcurrencyKey("key", key);
  if (maxActive === null) {
    await queryAll(
      db,
      statement(
        "REMOVE_KEY_LIMIT",
        sql`
      UPDATE concurrency_keys SET max_active = NULL
       WHERE company_id = ${companyId}::uuid AND key = ${key} AND max_active IS NOT NULL
      RETURNING key`,
      ),
    );
    return null;
  }
  validateConcurrencyLimit(maxActive);
  const row = await queryOne<{ limit: ConcurrencyLimit | null }>(
    db,
    statement(
      "SET_KEY_LIMIT",
      sql`
    WITH set AS (
      INSERT INTO concurrency_keys AS k (company_id, key, max_active)
      SELECT ${companyId}::uuid, ${key}, ${maxActive}::int
       WHERE (SELECT count(*) FROM concurrency_keys c
               WHERE c.company_id = ${companyId}::uuid AND c.max_active IS NOT NULL AND c.key <> ${key}) < ${MAX_LIMITED_KEYS}::int
      ON CONFLICT (company_id, key) DO UPDATE SET max_active = EXCLUDED.max_active
      RETURNING k.key, k.max_active, k.active
    )
    SELECT (SELECT json_build_object('key', s.key, 'maxActive', s.max_active, 'active', s.active) FROM set s) AS "limit"`,
    ),
  );
  if (!row.limit) throw new InvalidInputError(`a company may limit at most ${MAX_LIMITED_KEYS} keys: remove one first`);
  return row.limit;
}

/** LIST_KEY_LIMITS: every limited key of the company, by key. */
export function listConcurrencyLimits(db: Pick<Db, "$queryRaw">, companyId: string): Promise<ConcurrencyLimit[]> {
  return queryAll<ConcurrencyLimit>(
    db,
    statement(
      "LIST_KEY_LIMITS",
      sql`
    SELECT k.key, k.max_active AS "maxActive", k.active FROM concurrency_keys k
     WHERE k.company_id = ${companyId}::uuid AND k.max_active IS NOT NULL
     ORDER BY k.key`,
    ),
  );
}
