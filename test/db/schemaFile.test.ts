// The committed prisma/schema.sql in step with the migrations: a migrated
// database dumped as scripts/print-db-schema.ts dumps it (scripts/dbSchema.ts)
// is that file, byte for byte. (The migrations themselves: migrations.test.ts.)
import { readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dumpSchema, SCHEMA_FILE } from "../../scripts/dbSchema.js";
import { createTestDatabase } from "../helpers/db.js";
import type { TestDatabase } from "../helpers/db.js";

let database: TestDatabase;
let dumped: string;
const committed = readFileSync(SCHEMA_FILE, "utf8");
const versions = (schema: string) => /^-- (pg_dump \d+ of PostgreSQL \d+)/m.exec(schema)?.[1];

beforeAll(async () => {
  database = await createTestDatabase();
  dumped = await dumpSchema(database.url);
});
afterAll(async () => {
  await database?.drop();
});

describe("prisma/schema.sql", () => {
  it("was printed by the major versions of pg_dump and PostgreSQL here (their output differs between majors)", () => {
    expect(versions(dumped), `prisma/schema.sql was printed by ${versions(committed)}, this machine has ${versions(dumped)}`).toBe(versions(committed));
  });

  it("is the shape of the migrated database (run `npm run print-db-schema` after changing prisma/migrations)", () => {
    expect(dumped, "prisma/schema.sql differs from the migrated database: run `npm run print-db-schema` and commit it").toBe(committed);
  });

  it("keeps lock_events partitioned by day and leaves out the dated partitions the database has", async () => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'lock_events'::regclass`);
      expect(rows[0]?.n).toBeGreaterThan(0);
    } finally {
      await client.end();
    }
    expect(committed).toMatch(/^CREATE TABLE public\.lock_events \([^;]*\)\nPARTITION BY RANGE \(at\);$/m);
    expect(committed).not.toMatch(/lock_events_\d{8}/);
  });
});
