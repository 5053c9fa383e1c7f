// The database a process uses: DATABASE_URL, or the embedded PostgreSQL in
// dataDir; migrated before use (under Prisma's advisory lock), with the
// ledger's partitions ready for today and the week ahead.
import type { Config } from "../config.js";
import { startEmbeddedPostgres } from "../db/embedded.js";
import { migrate } from "../db/migrate.js";
import { ensureLedgerPartitions } from "../retention/partitions.js";
import type { Logger } from "../log.js";

export async function openDatabase(config: Config, log: Logger): Promise<{ url: string; stop(): Promise<void> }> {
  let url = config.databaseUrl;
  let stop = async () => {};
  if (!url) {
    const embedded = await startEmbeddedPostgres(config.dataDir, log);
    url = embedded.url;
    stop = () => embedded.stop();
    log("info", "using the embedded PostgreSQL (set DATABASE_URL to use your own)", { dataDir: config.dataDir });
  }
  try {
    const applied = await migrate(url);
    if (applied.length) log("info", "applied migrations", { migrations: applied });
    // Every process that opens the database makes sure appends find a partition.
    await ensureLedgerPartitions(url);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, stop };
}
