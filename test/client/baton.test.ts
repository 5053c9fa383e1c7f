// The baton/client SDK, imported as users import it ("baton/client", the
// compiled package that npm ci builds), against a real server: typed
// requests, errors with their codes, and lockChanges() resuming after its
// last seq when its connection is cut, each seq once and in order.
import net from "node:net";
import { Baton, BatonError, Documents } from "baton/client";
import type { LockChange } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ADMIN_TOKEN, claimingAgent, createCompany, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

/** A TCP proxy in front of the server whose connections the test can cut. */
async function cuttableProxy(target: URL) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}${target.pathname}`,
    cut: () => {
      for (const s of sockets) s.destroy();
    },
    close: () => new Promise<void>((resolve) => (server.close(() => resolve()), sockets.forEach((s) => s.destroy()))),
  };
}

it("runs typed requests, and turns refusals and an unreachable server into BatonError with a code", async () => {
  const baton = new Baton({ url: h.url, token: ADMIN_TOKEN });
  const { me } = await baton.request(Documents.MeDocument, {});
  expect(me.role).toBe("ADMIN");
  const stranger = new Baton({ url: h.url, token: `baton_agent_${"x".repeat(43)}` });
  await expect(stranger.request(Documents.MeDocument, {})).rejects.toMatchObject({ name: "BatonError", code: "UNAUTHENTICATED" });
  const nowhere = new Baton({ url: "http://127.0.0.1:9/graphql", token: ADMIN_TOKEN });
  const error = await nowhere.request(Documents.MeDocument, {}).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(BatonError);
  expect(error).toMatchObject({ code: "UNREACHABLE" });
  expect((error as Error).message).not.toContain(ADMIN_TOKEN);
});

it("lockChanges() yields every seq once, in order, across a cut connection, resuming after the last one", async () => {
  const { co, claim } = await claimingAgent(h, 15);
  const proxy = await cuttableProxy(new URL(h.url));
  const seen: LockChange[] = [];
  const stream = new Baton({ url: proxy.url, token: co.board.token! }).lockChanges({ companyId: co.id, afterSeq: "0" });
  const reading = (async () => {
    for await (const event of stream) {
      seen.push(event);
      if (seen.length === 15) break;
    }
  })();
  await claim(5);
  await eventually(() => (seen.length === 5 ? true : undefined), "the first five events");
  proxy.cut(); // the connection drops; the SDK subscribes again after seq 5
  await claim(5);
  await eventually(() => (seen.length === 10 ? true : undefined), "the five committed while it was cut", 20_000);
  proxy.cut();
  await claim(5);
  await reading;
  expect(seen.map((e) => e.seq)).toEqual(await h.ledgerSeqs(co.id));
  expect(seen.every((e) => e.kind === "CLAIMED" && e.companyId === co.id)).toBe(true);
  await proxy.close();
});

it("lockChanges() throws the refusal of a token that may not read the company", async () => {
  const mine = await createCompany(h, 0);
  const theirs = await createCompany(h, 0);
  const stream = new Baton({ url: h.url, token: theirs.board.token! }).lockChanges({ companyId: mine.id });
  await expect(stream.next()).rejects.toMatchObject({ name: "BatonError", code: "FORBIDDEN" });
});
