// `npm run migrate`: apply pending migrations to DATABASE_URL (or the embedded default) and exit.
import { loadConfig } from "../config.js";
import { log } from "../log.js";
import { openDatabase } from "./database.js";
import { startupFailure } from "./shutdown.js";

try {
  const database = await openDatabase(loadConfig(), log);
  await database.stop();
  log("info", "database is up to date");
} catch (err) {
  process.stderr.write(`${startupFailure("baton-migrate", err)}\n`);
  process.exit(1);
}
