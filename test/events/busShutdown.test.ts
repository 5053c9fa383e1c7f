// The Redis bus shutting down while a re-subscription is in flight. After a
// reconnect the subscriber sends SUBSCRIBE again; if the process shuts down
// (or Redis dies) before Redis answers, that command fails, and its promise
// must have been handled: Node ends a process on an unhandled rejection. A
// proxy in front of Redis lets the reconnect through and withholds the answer
// to the SUBSCRIBE, so the failure happens every time.
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, expect, it } from "vitest";
import { createRedisBus } from "../../src/events/bus.js";
import { eventually } from "../helpers/race.js";

const REDIS = new URL(process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379");
const sockets = new Set<net.Socket>();
const state = { armed: false, held: 0 };
const proxy = net.createServer((client) => {
  const upstream = net.connect(Number(REDIS.port || 6379), REDIS.hostname);
  let holding = false;
  for (const s of [client, upstream]) {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
  }
  client.on("data", (chunk: Buffer) => {
    if (state.armed && /subscribe/i.test(chunk.toString())) {
      holding = true;
      state.held++;
    }
    upstream.write(chunk);
  });
  upstream.on("data", (chunk: Buffer) => {
    if (!holding) client.write(chunk);
  });
  client.on("close", () => upstream.destroy());
  upstream.on("close", () => client.destroy());
});
afterAll(() => new Promise<void>((resolve) => proxy.close(() => resolve())));

it("closes with a re-SUBSCRIBE unanswered, and leaves no rejection unhandled", async () => {
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const unhandled: unknown[] = [];
  const record = (reason: unknown) => void unhandled.push(reason);
  process.on("unhandledRejection", record);
  try {
    const bus = createRedisBus(`redis://127.0.0.1:${(proxy.address() as AddressInfo).port}`, () => {});
    await bus.subscribe("00000000-0000-4000-8000-000000000001", () => {});
    // Cut every connection: the subscriber reconnects, and its SUBSCRIBE goes unanswered.
    state.armed = true;
    for (const s of sockets) s.destroy();
    await eventually(() => (state.held > 0 ? true : undefined), "the re-SUBSCRIBE to be sent");
    await bus.close();
    // Rejections are reported after the microtasks that could still handle them.
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(unhandled.map(String)).toEqual([]);
  } finally {
    process.off("unhandledRejection", record);
    for (const s of sockets) s.destroy();
  }
});
