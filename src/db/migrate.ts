// Applies prisma/migrations/*/migration.sql in name order and records each in
// _prisma_migrations exactly as `prisma migrate deploy` does (same table, same
// sha256 checksum, same advisory lock), so a database migrated here is accepted
// by Prisma's own tooling and vice versa. Several processes may call this at
// once: the advisory lock makes them take turns, and the loser finds nothing
// left to apply.
import { createHash, randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";

/** Prisma Migrate's advisory lock key. */
const PRISMA_MIGRATE_LOCK = 72707369;

const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../prisma/migrations");

const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(path.join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
}

class MigrationError extends Error {
  override name = "MigrationError";
}

/** Applies pending migrations; returns the names it applied. */
export async function migrate(databaseUrl: string, dir = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = await readMigrations(dir);
  const client = new pg.Client({ connectionString: databaseUrl, application_name: "baton-migrate" });
  await client.connect();
  const applied: string[] = [];
  try {
    await client.query("SELECT pg_advisory_lock($1)", [PRISMA_MIGRATE_LOCK]);
    await client.query(CREATE_MIGRATIONS_TABLE);
    const { rows } = await client.query<{ migration_name: string; checksum: string }>(
      `SELECT migration_name, checksum FROM "_prisma_migrations"
        WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`,
    );
    const done = new Map(rows.map((r) => [r.migration_name, r.checksum]));
    for (const m of migrations) {
      const recorded = done.get(m.name);
      if (recorded !== undefined) {
        if (recorded !== m.checksum) {
          throw new MigrationError(`migration ${m.name} was changed after it was applied (checksum differs)`);
        }
        continue;
      }
      // One transaction per migration: it is applied and recorded, or neither.
      await client.query("BEGIN");
      try {
        await client.query(m.sql);
        await client.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
           VALUES ($1, $2, $3, now(), clock_timestamp(), 1)`,
          [randomUUID(), m.checksum, m.name],
        );
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw new MigrationError(`migration ${m.name} failed: ${(err as Error).message}`);
      }
      applied.push(m.name);
    }
    await refuseLedgerAhead(client);
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [PRISMA_MIGRATE_LOCK]).catch(() => {});
    await client.end().catch(() => {});
  }
  return applied;
}

/**
 * Seqs and issue stamps are made from transaction ids (docs/events.md, "How
 * seq is made"), so they only work on the cluster that wrote them, or a
 * physical copy of it. A logical copy (pg_dump, logical replication) starts
 * at lower ids: every change would then fail its stamp, and new seqs would
 * sort before old ones. Refuse to start on one, rather than fail every claim.
 */
async function refuseLedgerAhead(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ ahead: boolean | null }>(
    `SELECT (SELECT max(last_event_xid) FROM issues) >= pg_snapshot_xmax(pg_current_snapshot()) AS ahead`,
  );
  if (rows[0]?.ahead) {
    throw new MigrationError(
      "the ledger is ahead of this cluster's transaction ids (a pg_dump restore or a logical replica?): " +
        "Baton needs the cluster that wrote it, or a physical copy of it (docs/events.md, How seq is made)",
    );
  }
}
