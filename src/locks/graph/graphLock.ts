// The company's dependency-graph lock: every statement that adds an edge that
// could close a cycle (addDependency, createSubIssues with parentWaits) runs
// in a transaction that first takes it, so two such additions are judged one
// after the other, each on a snapshot that includes the other's edges.
import { queryOneInTransaction, sql, statement } from "../../db/sql.js";
import type { Queryable } from "../../db/client.js";

/**
 * Invariant: at most one transaction per company holds it, until it ends. The
 * row is made on first use; the upsert locks it either way. The statements
 * after it in the transaction take a newer snapshot (READ COMMITTED), so the
 * cycle check sees every edge committed before the lock was granted.
 */
const takeGraphLock = (companyId: string) =>
  statement(
    "LOCK_DEPENDENCY_GRAPH",
    sql`INSERT INTO dependency_graph_locks (company_id) VALUES (${companyId}::uuid)
        ON CONFLICT (company_id) DO UPDATE SET company_id = EXCLUDED.company_id
        RETURNING company_id`,
  );

export async function lockDependencyGraph(tx: Queryable, companyId: string): Promise<void> {
  await queryOneInTransaction(tx, takeGraphLock(companyId));
}
