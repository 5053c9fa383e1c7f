// lockChanges() (baton/client) while the API's database is away: the API
// answers the subscription UNAVAILABLE, which ends nothing for good (reads
// change nothing, and the ledger keeps every event), so the iterator
// subscribes again after its last seq with its growing delay and, once the
// database is back, goes on with every seq once, in order. The database goes
// away through a TCP proxy between the API and PostgreSQL that cuts its
// connections and refuses new ones while paused; another, between the SDK and
// the API, drops the stream's socket so that it must subscribe again then.
// The API sends UNAVAILABLE as graphql-ws's `error` message; a relay that
// turns an event into a `next` carrying UNAVAILABLE checks the other form.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import WebSocket, { WebSocketServer } from "ws";
import { Baton } from "baton/client";
import type { LockChange } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildApp } from "../../src/app.js";
import type { App } from "../../src/app.js";
import { connectDb } from "../../src/db/client.js";
import type { DbHandle } from "../../src/db/client.js";
import { createInProcessBus } from "../../src/events/bus.js";
import { ADMIN_TOKEN, claimingAgent, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { cuttableProxy } from "../helpers/cuttableProxy.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
let database: Awaited<ReturnType<typeof cuttableProxy>>;
let api: { app: App; db: DbHandle; url: string };
const logged: { level: string; msg: string }[] = [];

beforeAll(async () => {
  h = await startHarness();
  database = await cuttableProxy(new URL(h.database.url));
  const url = new URL(h.database.url);
  url.port = new URL(database.url).port;
  const db = connectDb(url.toString(), 2, "baton-client-unavailable");
  const app = buildApp({
    db: db.prisma,
    bus: createInProcessBus(),
    adminToken: ADMIN_TOKEN,
    leaseSeconds: 60,
    log: (level, msg) => void logged.push({ level, msg }),
    ledgerPollMs: 100,
  });
  api = { app, db, url: (await app.start(0)).url };
});
afterAll(async () => {
  await api?.app.stop();
  await api?.db.close();
  await database?.close();
  await h?.close();
});

/** What a promise settles to (its rejection as a value), or `what` if it has not settled within ms. */
const within = (promise: Promise<unknown>, ms: number, what: string): Promise<unknown> =>
  Promise.race([promise.catch((err: unknown) => err), new Promise((resolve) => setTimeout(() => resolve(what), ms))]);

it("lockChanges() answered UNAVAILABLE subscribes again after its last seq, and yields every seq once, in order, once the database is back", async () => {
  const { co, claim } = await claimingAgent(h, 4);
  await claim(2);
  await h.settled(co.id);
  const seen: LockChange[] = [];
  const link = await cuttableProxy(new URL(api.url)); // between the SDK and the API
  const stream = new Baton({ url: link.url, token: co.board.token! }).lockChanges({ companyId: co.id, afterSeq: "0" });
  const reading = (async () => {
    for await (const event of stream) {
      seen.push(event);
      if (seen.length === 4) break;
    }
  })().then(
    () => null,
    (err: unknown) => err,
  );
  await eventually(() => (seen.length === 2 ? true : undefined), "the first two events");
  // The API loses its database; two more events commit meanwhile (through the harness's own instance),
  // and the SDK's connection drops: it subscribes again after seq 2, and the API cannot replay.
  database.state.paused = true;
  database.cut();
  await claim(2);
  await h.settled(co.id);
  link.cut();
  await eventually(
    () => (logged.filter((l) => l.msg === "database unavailable").length >= 2 ? true : undefined),
    "the API to answer UNAVAILABLE to the stream twice (it subscribed again)",
    20_000,
  );
  expect(await within(reading, 0, "reading")).toBe("reading"); // still reading: UNAVAILABLE ended nothing
  database.state.paused = false;
  expect(await within(reading, 20_000, "still waiting after 20 s")).toBeNull();
  expect(seen.map((e) => e.seq)).toEqual(await h.ledgerSeqs(co.id));
  await link.close();
});

/**
 * A graphql-transport-ws relay to the API that, on its first connection, passes
 * `pass` events of the subscription and then answers a `next` whose payload is
 * UNAVAILABLE's errors instead of the following one (and drops the rest);
 * later connections pass everything. `connections` counts them.
 */
async function unavailableRelay(apiUrl: string, pass: number) {
  const server = createServer();
  const wss = new WebSocketServer({ server, handleProtocols: (protocols) => [...protocols][0] ?? false });
  const relay = { connections: 0, url: "", close: async () => {} };
  wss.on("connection", (client, req) => {
    const n = ++relay.connections;
    const upstream = new WebSocket(
      apiUrl.replace(/^http/, "ws"),
      req.headers["sec-websocket-protocol"]?.split(",").map((p) => p.trim()),
    );
    const pending: WebSocket.RawData[] = [];
    let passed = 0;
    upstream.on("open", () => {
      for (const m of pending.splice(0)) upstream.send(m.toString());
    });
    client.on("message", (m) => (upstream.readyState === WebSocket.OPEN ? upstream.send(m.toString()) : pending.push(m)));
    upstream.on("message", (m) => {
      const message = JSON.parse(m.toString()) as { id?: string; type: string };
      if (n === 1 && message.type === "next" && passed++ >= pass) {
        if (passed === pass + 1) {
          const errors = [{ message: "the database is unreachable; nothing was changed: retry", extensions: { code: "UNAVAILABLE", outcome: "NOT_APPLIED" } }];
          client.send(JSON.stringify({ id: message.id, type: "next", payload: { errors } }));
        }
        return;
      }
      client.send(m.toString());
    });
    client.on("close", () => upstream.close());
    upstream.on("close", () => client.close());
    for (const s of [client, upstream]) s.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  relay.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
  relay.close = async () => {
    for (const c of wss.clients) c.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return relay;
}

it("lockChanges() given a next carrying UNAVAILABLE subscribes again after its last seq instead of throwing", async () => {
  const { co, claim } = await claimingAgent(h, 4);
  await claim(4);
  await h.settled(co.id);
  const relay = await unavailableRelay(h.url, 2);
  const seen: string[] = [];
  const reading = (async () => {
    for await (const event of new Baton({ url: relay.url, token: co.board.token! }).lockChanges({ companyId: co.id, afterSeq: "0" })) {
      seen.push(event.seq);
      if (seen.length === 4) break;
    }
  })().then(
    () => null,
    (err: unknown) => err,
  );
  expect(await within(reading, 20_000, "still waiting after 20 s")).toBeNull();
  expect(seen).toEqual(await h.ledgerSeqs(co.id));
  expect(relay.connections).toBe(2);
  await relay.close();
});
