// `npm test` brings what the suite needs (scripts/test-prerequisites.sh, its
// pretest): it starts what is down where it can, and where it cannot says
// what is missing in one line each and exits 1. The shared PostgreSQL and
// Redis are never touched: each case points the script at a private port.
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterEach, expect, it } from "vitest";
import { freePort } from "../helpers/redis.js";

const SCRIPT = path.resolve(import.meta.dirname, "../../scripts/test-prerequisites.sh");
const NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"];
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string[], env: Record<string, string | undefined> = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const merged = Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, v]) => v !== undefined));
    const child = spawn(command[0]!, command.slice(1), { env: merged, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const prepare = (env: Record<string, string | undefined> = {}, prefix: string[] = []) => run([...prefix, "/bin/bash", SCRIPT], env);

/** A PATH of only these programs (and what the script itself uses), so everything else is "not installed". */
function pathWith(programs: string[], fakes: Record<string, string> = {}): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "baton-prereq-bin-"));
  chmodSync(dir, 0o755);
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  for (const program of ["id", "tr", "awk", "tail", "grep", "sleep", "mktemp", "rm", "perl", ...programs])
    symlinkSync(`/usr/bin/${program}`, path.join(dir, program));
  for (const [name, body] of Object.entries(fakes)) writeFileSync(path.join(dir, name), `#!/bin/bash\n${body}\n`, { mode: 0o755 });
  return dir;
}

async function redisPing(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write("PING\r\n"));
    socket.on("data", (d) => {
      socket.destroy();
      resolve(String(d).trim());
    });
    socket.on("error", (err) => resolve(String(err)));
  });
}

it("with everything present, prints nothing and exits 0", async () => {
  expect(await prepare()).toEqual({ code: 0, stdout: "", stderr: "" });
});

it("starts a redis-server on the local port TEST_REDIS_URL names when nothing answers there, and once only", async () => {
  const port = await freePort();
  const env = { TEST_REDIS_URL: `redis://127.0.0.1:${port}` };
  cleanups.push(() => run(["redis-cli", "-p", String(port), "shutdown", "nosave"]));
  expect(await prepare(env)).toEqual({ code: 0, stdout: `test: starting Redis on 127.0.0.1:${port}…\n`, stderr: "" });
  expect(await redisPing(port)).toBe("+PONG");
  expect(await prepare(env)).toEqual({ code: 0, stdout: "", stderr: "" });
});

it("says in one line each what is missing and cannot be brought, and exits 1", async () => {
  const [pgPort, redisPort] = [await freePort(), await freePort()];
  const result = await prepare({
    PATH: pathWith(["pg_isready"]), // no redis-server, no pg_lsclusters
    TEST_DATABASE_URL: `postgresql://postgres@127.0.0.1:${pgPort}/postgres`,
    TEST_REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    CHROMIUM_PATH: "/nonexistent/chromium",
  });
  expect(result.code).toBe(1);
  expect(result.stdout).toBe("");
  expect(result.stderr.split("\n")).toEqual([
    `test: no PostgreSQL answers at 127.0.0.1:${pgPort} (TEST_DATABASE_URL), and this machine has no stopped Debian cluster on port ${pgPort} to start: apt-get install postgresql, or set TEST_DATABASE_URL to a running server`,
    `test: no Redis answers at 127.0.0.1:${redisPort} (TEST_REDIS_URL), and there is no redis-server to start: apt-get install redis-server, or set TEST_REDIS_URL`,
    "test: no Chromium at /nonexistent/chromium (CHROMIUM_PATH): point it at a Chromium, or unset it to use Debian's",
    "",
  ]);
  expect(await redisPing(redisPort)).toMatch(/ECONNREFUSED/); // nothing was started
});

it("installs Debian's chromium only where it can: not without apt-get, not as another user, and says why when apt-get fails", async () => {
  const env = { CHROMIUM_PATH: undefined, TEST_PREREQUISITES_DEBIAN_CHROMIUM: "/nonexistent/usr/bin/chromium" };
  expect(await prepare({ ...env, PATH: pathWith(["pg_isready"]) })).toEqual({
    code: 1,
    stdout: "",
    stderr: "test: no Chromium at /nonexistent/usr/bin/chromium, and no apt-get to install Debian's: install Chromium and set CHROMIUM_PATH to it\n",
  });
  expect(await prepare(env, NOBODY)).toEqual({
    code: 1,
    stdout: "",
    stderr: "test: no Chromium at /nonexistent/usr/bin/chromium, and installing it needs root: sudo apt-get install chromium, or set CHROMIUM_PATH\n",
  });
  const aptGet = 'if [ "$1" = update ]; then exit 0; fi\necho "E: Unable to locate package chromium" >&2; exit 100';
  expect(await prepare({ ...env, PATH: pathWith(["pg_isready"], { "apt-get": aptGet }) })).toEqual({
    code: 1,
    stdout: "test: installing Debian's chromium (apt-get install chromium)…\n",
    stderr: "test: apt-get install chromium failed: E: Unable to locate package chromium\n",
  });
});

it("starts the stopped Debian cluster on the port TEST_DATABASE_URL names, as root only", async () => {
  const version = (await run(["ls", "/usr/lib/postgresql"])).stdout.trim().split("\n").at(-1)!;
  const cluster = `baton_prereq_${process.pid}`;
  const port = await freePort();
  const created = await run(["pg_createcluster", version, cluster, "-p", String(port), "--", "-A", "trust"]);
  expect(created.code, created.stderr).toBe(0);
  cleanups.push(() => run(["pg_dropcluster", version, cluster, "--stop"]));
  const env = { TEST_DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/postgres` };
  expect(await prepare(env, NOBODY)).toEqual({
    code: 1,
    stdout: "",
    stderr: `test: PostgreSQL ${version}/${cluster} (port ${port}) is down, and starting it needs root: sudo pg_ctlcluster ${version} ${cluster} start, or set TEST_DATABASE_URL\n`,
  });
  expect(await prepare(env)).toEqual({ code: 0, stdout: `test: starting PostgreSQL ${version}/${cluster} on port ${port}…\n`, stderr: "" });
  expect((await run(["pg_isready", "-d", env.TEST_DATABASE_URL])).code).toBe(0);
  expect(await prepare(env)).toEqual({ code: 0, stdout: "", stderr: "" });
});
