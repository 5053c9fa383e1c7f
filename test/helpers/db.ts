// A database per test file, cloned from a template that globalSetup migrated
// once (CREATE DATABASE … TEMPLATE is a file copy: milliseconds).
import { createHash, randomBytes } from "node:crypto";
import pg from "pg";
import { readMigrations } from "../../src/db/migrate.js";

export const ADMIN_DATABASE_URL = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";

export function databaseUrl(name: string): string {
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function templateName(): Promise<string> {
  const migrations = await readMigrations();
  const hash = createHash("sha256")
    .update(migrations.map((m) => `${m.name}:${m.checksum}`).join("\n"))
    .digest("hex");
  return `baton_template_${hash.slice(0, 12)}`;
}

export async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const template = await templateName();
  // The creation time is in the name: globalSetup drops only old leftovers,
  // never a database another test run has just created.
  const name = `baton_test_${Math.floor(Date.now() / 1000)}_${randomBytes(4).toString("hex")}`;
  await withAdmin(async (client) => {
    for (let attempt = 1; ; attempt++) {
      try {
        await client.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
        return;
      } catch (err) {
        // Two files cloning the same template at the same instant: try again.
        if (attempt >= 20 || !/being accessed by other users/.test(String(err))) throw err;
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
  });
  return {
    name,
    url: databaseUrl(name),
    drop: () => withAdmin((client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => {}),
  };
}
