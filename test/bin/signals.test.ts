// What a user starts stops cleanly with one signal: Ctrl-C in a terminal on
// `npm start` (SIGINT to the whole process group, which npm also forwards),
// SIGTERM from a process manager to npm itself, and the plain-node entrypoint
// that `npm run build` makes for process managers and the Docker image. And
// what cannot start says why in one line.
import { execFileSync, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createTestDatabase } from "../helpers/db.js";
import type { TestDatabase } from "../helpers/db.js";
import { eventually } from "../helpers/race.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
let database: TestDatabase;
const started: ChildProcess[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  execFileSync("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: "ignore" });
});

afterAll(async () => {
  for (const child of started) {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
  await database?.drop();
});

/** Starts `command` as the leader of a process group of its own, as a terminal would. */
async function start(command: string, args: string[]) {
  const child = spawn(command, args, {
    cwd: ROOT,
    detached: true,
    env: { ...process.env, DATABASE_URL: database.url, PORT: "0", REDIS_URL: "", BATON_ADMIN_TOKEN: "processes-admin-token-0123" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  started.push(child);
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = await eventually(() => /Baton API\s+(http:\S+)/.exec(output)?.[1], "the server to start", 30_000);
  return { child, url, exited, output: () => output };
}

/** Whether any process of the group is left. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A WebSocket that never answers the close handshake: it keeps the server's drain waiting (up to 2 s). */
async function holdDrainOpen(url: string): Promise<WebSocket> {
  const socket = new WebSocket(url.replace(/^http/, "ws"), "graphql-transport-ws");
  await new Promise((resolve) => socket.once("open", resolve));
  socket.send(JSON.stringify({ type: "connection_init", payload: {} }));
  await new Promise((resolve) => socket.once("message", resolve));
  (socket as unknown as { _socket: { pause(): void } })._socket.pause(); // stop reading: the close frame is never answered
  return socket;
}

const answers = (url: string) =>
  fetch(url.replace(/\/graphql$/, "/healthz"), { signal: AbortSignal.timeout(2_000) }).then(
    () => true,
    () => false,
  );

describe("stopping", () => {
  it("one Ctrl-C on npm start (SIGINT to the process group, which npm forwards again) drains and exits 0, with nothing left running", async () => {
    const server = await start("npm", ["start"]);
    expect(await answers(server.url)).toBe(true);
    process.kill(-server.child.pid!, "SIGINT");
    await server.exited; // npm itself ends as a shell expects of Ctrl-C, by the signal
    expect(server.output()).toContain('"msg":"stopping"');
    expect(server.output()).not.toContain("second signal");
    // The server exited 0: npm reports any other status as a failed script.
    expect(server.output()).not.toMatch(/npm error|Lifecycle script/);
    await eventually(() => (groupAlive(server.child.pid!) ? undefined : true), "every process of the group to exit");
    expect(await answers(server.url)).toBe(false);
  });

  it("SIGTERM to npm start itself (a process manager) stops the server behind it too", async () => {
    const server = await start("npm", ["start"]);
    process.kill(server.child.pid!, "SIGTERM");
    await server.exited;
    await eventually(() => (groupAlive(server.child.pid!) ? undefined : true), "the server behind npm to exit", 20_000);
    expect(await answers(server.url)).toBe(false);
  });

  it("the plain-node entrypoint (node dist/bin/server.js) stops on one SIGTERM with exit 0", async () => {
    const server = await start(process.execPath, ["dist/bin/server.js"]);
    expect(await answers(server.url)).toBe(true);
    process.kill(server.child.pid!, "SIGTERM");
    expect(await server.exited).toBe(0);
    expect(server.output()).not.toMatch(/\n\s+at /);
  });

  it("the same signal delivered twice (the terminal's, then a wrapper's forwarding it) is one request: exit 0", async () => {
    const server = await start(process.execPath, ["dist/bin/server.js"]);
    const socket = await holdDrainOpen(server.url);
    process.kill(server.child.pid!, "SIGINT");
    await eventually(() => (server.output().includes('"msg":"stopping"') ? true : undefined), "the first to be handled");
    process.kill(server.child.pid!, "SIGINT");
    expect(await server.exited).toBe(0);
    expect(server.output()).not.toContain("second signal");
    socket.terminate();
  });

  it("a second, later signal still forces the exit", async () => {
    const server = await start(process.execPath, ["dist/bin/server.js"]);
    const socket = await holdDrainOpen(server.url);
    process.kill(server.child.pid!, "SIGTERM");
    await eventually(() => (server.output().includes('"msg":"stopping"') ? true : undefined), "the drain to begin");
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // past the window in which a repeat is the same signal
    process.kill(server.child.pid!, "SIGINT");
    expect(await server.exited).toBe(1);
    expect(server.output()).toContain("second signal: exiting now");
    socket.terminate();
  });
});

describe("starting", () => {
  it("a port already in use: one line that says so and names PORT, exit 1, no stack", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    try {
      const taken = (holder.address() as AddressInfo).port;
      const child = spawn(process.execPath, ["dist/bin/server.js"], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: database.url, PORT: String(taken), REDIS_URL: "", BATON_ADMIN_TOKEN: "processes-admin-token-0123" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      started.push(child);
      let stderr = "";
      child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
      // The log's JSON lines aside, what a person reads.
      const lines = stderr
        .trim()
        .split("\n")
        .filter((line) => !line.startsWith("{"));
      expect(lines).toEqual([
        `baton: could not start: port ${taken} on 127.0.0.1 is in use by another program: stop it, or set PORT to a free port (PORT=0 picks one)`,
      ]);
      expect(code).toBe(1);
    } finally {
      holder.close();
    }
  });

  it("a port already in use with the embedded PostgreSQL: the one line, and the PostgreSQL it started is stopped, not left running", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const dataDir = mkdtempSync(path.join(tmpdir(), "baton-busy-port-"));
    chmodSync(dataDir, 0o755); // reachable by the postgres OS user: the data stays here
    const pidFile = path.join(dataDir, "pg", "postmaster.pid");
    try {
      const taken = (holder.address() as AddressInfo).port;
      const child = spawn(process.execPath, ["dist/bin/server.js"], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: "", BATON_DATA_DIR: dataDir, PORT: String(taken), REDIS_URL: "", BATON_ADMIN_TOKEN: "processes-admin-token-0123" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      started.push(child);
      let stderr = "";
      child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
      expect(stderr).toContain('"msg":"using the embedded PostgreSQL');
      expect(
        stderr
          .trim()
          .split("\n")
          .filter((line) => !line.startsWith("{")),
      ).toEqual([expect.stringMatching(new RegExp(`^baton: could not start: port ${taken} on 127\\.0\\.0\\.1 is in use`))]);
      expect(code).toBe(1);
      expect(existsSync(pidFile)).toBe(false); // a PostgreSQL that shut down removes it
    } finally {
      holder.close();
      if (existsSync(pidFile)) process.kill(Number(readFileSync(pidFile, "utf8").split("\n")[0]), "SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
