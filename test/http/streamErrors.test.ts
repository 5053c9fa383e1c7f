// A subscription whose stream fails part-way (here: its first ledger read, the
// database being unreachable) ends with a typed, masked error on both
// transports, SSE and graphql-ws: no driver message, address or stack reaches
// the client, and the operator's log says what happened.
import { expect, it } from "vitest";
import { connectDb } from "../../src/db/client.js";
import { createInProcessBus } from "../../src/events/bus.js";
import { Ops } from "../helpers/harness.js";
import { Subscriber } from "../helpers/subscriber.js";

it("a stream that fails mid-way ends with a typed error: a last result then complete over SSE, an error message over graphql-ws", async () => {
  // A server whose PostgreSQL is gone (nothing listens on that port): the
  // admin token needs no database, so the subscription starts, and its first
  // ledger read fails.
  const gone = connectDb("postgresql://postgres@127.0.0.1:1/baton", 1);
  const logged: string[] = [];
  const { buildApp } = await import("../../src/app.js");
  const app = buildApp({
    db: gone.prisma,
    bus: createInProcessBus(),
    adminToken: "a".repeat(20),
    leaseSeconds: 60,
    log: (_level, msg) => void logged.push(msg),
  });
  const { url } = await app.start(0);
  const companyId = "00000000-0000-4000-8000-000000000001";
  const query = `subscription { lockChanged(companyId: "${companyId}", afterSeq: "0") { seq } }`;
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", authorization: `Bearer ${"a".repeat(20)}` },
      body: JSON.stringify({ query }),
    });
    const text = await response.text(); // ends: the stream completes
    const messages = text.split("\n\n").filter((m) => m.startsWith("event:"));
    expect(messages.map((m) => m.split("\n")[0])).toEqual(["event: next", "event: complete"]);
    const result = JSON.parse(messages[0]!.split("\n")[1]!.slice("data:".length)) as { errors: { message: string; extensions: { code: string } }[] };
    const away = { message: "the database is unreachable; nothing was changed: retry", extensions: { code: "UNAVAILABLE", outcome: "NOT_APPLIED" } };
    expect(result.errors).toEqual([expect.objectContaining(away)]);

    const ws = new Subscriber<unknown>(url, "a".repeat(20)).start(Ops.LockChangedDocument, { companyId, afterSeq: "0" });
    await ws.count(1);
    expect(ws.messages[0]!.errors).toEqual([expect.objectContaining(away)]);
    await ws.close();
    expect(text + JSON.stringify(ws.messages)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1:1|at .*\.ts/);
    expect(logged.filter((m) => m === "database unavailable")).toHaveLength(2); // told to the client, logged for the operator
  } finally {
    await app.stop();
    await gone.close();
  }
});
