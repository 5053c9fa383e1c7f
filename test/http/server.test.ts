// Stopping the server (src/http/server.ts owns the HTTP server's shutdown)
// does not hang on a client that will not cooperate.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createInProcessBus } from "../../src/events/bus.js";
import { silentLogger } from "../../src/log.js";
import { startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

it("stopping the server does not wait for a WebSocket client that never answers the close handshake", async () => {
  const { buildApp } = await import("../../src/app.js");
  const app = buildApp({ db: h.db.prisma, bus: createInProcessBus(), adminToken: "s".repeat(20), leaseSeconds: 60, log: silentLogger });
  const { url } = await app.start(0);
  const { default: WebSocket } = await import("ws");
  const socket = new WebSocket(url.replace(/^http/, "ws"), "graphql-transport-ws");
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  socket.send(JSON.stringify({ type: "connection_init", payload: {} }));
  await new Promise((resolve) => socket.once("message", resolve)); // connection_ack
  (socket as unknown as { _socket: { pause(): void } })._socket.pause(); // from now on it reads nothing, so never answers a close
  const stopped = await Promise.race([app.stop().then(() => "stopped"), new Promise((resolve) => setTimeout(() => resolve("still waiting"), 15_000))]);
  expect(stopped).toBe("stopped");
  socket.terminate();
});
