// The one way this codebase talks to PostgreSQL: a Prisma client over a
// node-postgres pool (Prisma 7's driver adapter; no native engine needed).
// The lock statements go through $queryRaw; see src/locks/.
import { createHash } from "node:crypto";
import pg from "pg";
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "../generated/prisma/client.js";

export type Db = PrismaClient;
/** What a single statement needs: the client, or a transaction of it. */
export type Queryable = Pick<Db, "$queryRaw">;

export interface DbHandle {
  readonly prisma: Db;
  close(): Promise<void>;
}

const names = new Map<string, string>();

/**
 * Prepared statements: each distinct SQL text gets a stable name, so
 * node-postgres parses and plans it once per connection instead of on every
 * call (the lock statements are long CTEs; planning them is most of their
 * cost on a warm cache). The set of texts is small and fixed: values are
 * always parameters, never spliced in.
 */
function statementName(query: { sql: string }): string {
  let name = names.get(query.sql);
  if (!name) {
    // A named statement's prepared name starts with its name (claim_next_for_each_…); the hash tells its variants apart.
    const label = /^\/\* ([A-Z_]+) \*\//.exec(query.sql)?.[1]?.toLowerCase() ?? "baton";
    name = `${label}_${createHash("sha1").update(query.sql).digest("hex").slice(0, 12)}`;
    if (names.size < 1000) names.set(query.sql, name);
  }
  return name;
}

export function connectDb(databaseUrl: string, poolSize: number, applicationName = "baton"): DbHandle {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: poolSize,
    application_name: applicationName,
    // A claim never waits on another claim (SKIP LOCKED); anything that waits
    // this long on a lock is a bug or an outage, not load.
    statement_timeout: 30_000,
    idleTimeoutMillis: 30_000,
    // No JIT: every statement here runs in about a millisecond, and a plan
    // whose estimate crosses jit_above_cost (a claim over a large backlog
    // can) would spend a hundred times that compiling itself.
    options: "-c jit=off",
  });
  // An idle client that loses its connection emits 'error' on the pool; without
  // a listener that would crash the process. The next query reconnects.
  pool.on("error", () => {});
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool, { statementNameGenerator: statementName }) });
  return {
    prisma,
    async close() {
      await prisma.$disconnect();
      await pool.end().catch(() => {});
    },
  };
}
