// Once per `npm test`: build the migrated template database the test files clone.
import { migrate } from "../../src/db/migrate.js";
import { ensureLedgerPartitions } from "../../src/retention/partitions.js";
import { databaseUrl, templateName, withAdmin } from "./db.js";

export default async function setup() {
  const template = await templateName();
  await withAdmin(async (client) => {
    // Test databases of earlier runs that did not get to drop theirs: only
    // those nobody is connected to and created over an hour ago (the name
    // says when), since another test run may be using, or just creating, its own.
    const { rows } = await client.query<{ datname: string }>(
      `SELECT d.datname FROM pg_database d
        WHERE CASE WHEN d.datname ~ '^baton_test_[0-9]+_' THEN split_part(d.datname, '_', 3)::bigint < extract(epoch FROM now()) - 3600
                   WHEN d.datname LIKE 'baton_template_%' THEN d.datname <> $1
                   ELSE d.datname LIKE 'baton_test_%' END
          AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`,
      [template],
    );
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS "${datname}"`).catch(() => {});
    const exists = await client.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [template]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE "${template}"`);
  });
  await migrate(databaseUrl(template));
  await ensureLedgerPartitions(databaseUrl(template));
}
