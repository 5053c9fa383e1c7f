// Once per `npm test`: build the migrated template database the test files clone.
import { migrate } from "../../src/db/migrate.js";
import { databaseUrl, templateName, withAdmin } from "./db.js";

export default async function setup() {
  const template = await templateName();
  await withAdmin(async (client) => {
    // Test databases of earlier runs that did not get to drop theirs.
    const { rows } = await client.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE 'baton_test_%' OR (datname LIKE 'baton_template_%' AND datname <> $1)`,
      [template],
    );
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    const exists = await client.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [template]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${template}"`);
  });
  await migrate(databaseUrl(template));
}
