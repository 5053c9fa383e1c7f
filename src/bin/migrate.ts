// `npm run migrate`: apply pending migrations to DATABASE_URL (or the embedded default) and exit.
import { ConfigError, loadConfig } from "../config.js";
import { errorFields, log } from "../log.js";
import { openDatabase } from "./database.js";

try {
  const database = await openDatabase(loadConfig(), log);
  await database.stop();
  log("info", "database is up to date");
} catch (err) {
  if (err instanceof ConfigError) process.stderr.write(`baton: ${err.message}\n`);
  else log("error", "migration failed", errorFields(err));
  process.exit(1);
}
