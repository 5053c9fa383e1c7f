// `npm run print-db-schema`: writes prisma/schema.sql, the shape of a database
// migrated from nothing by src/db/migrate.ts. The scratch database lives on
// the PostgreSQL the tests use (TEST_DATABASE_URL, an admin URL; default
// postgresql://postgres@127.0.0.1:5432/postgres) and is dropped after; its
// name is one the tests' globalSetup clears if this run dies before the drop.
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import pg from "pg";
import { migrate } from "../src/db/migrate.js";
import { dumpSchema, SCHEMA_FILE } from "./dbSchema.js";

const adminUrl = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";

async function withAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const name = `baton_test_${Math.floor(Date.now() / 1000)}_schema_${randomBytes(4).toString("hex")}`;
const url = new URL(adminUrl);
url.pathname = `/${name}`;
try {
  await withAdmin(`CREATE DATABASE "${name}"`);
  try {
    await migrate(url.toString());
    await writeFile(SCHEMA_FILE, await dumpSchema(url.toString()));
  } finally {
    await withAdmin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  }
  console.log("wrote prisma/schema.sql");
} catch (err) {
  process.stderr.write(`print-db-schema: ${(err as Error).message}\n`);
  process.exit(1);
}
