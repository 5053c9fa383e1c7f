// The database away, as a client sees it: UNAVAILABLE with what became of the
// request (NOT_APPLIED when no connection could be made, UNKNOWN when the
// connection was lost mid-statement), never INTERNAL_SERVER_ERROR, never a
// stack; and the log says it without one either.
import { afterAll, beforeAll, expect, it } from "vitest";
import { buildApp } from "../../src/app.js";
import type { App } from "../../src/app.js";
import { connectDb } from "../../src/db/client.js";
import type { DbHandle } from "../../src/db/client.js";
import { createInProcessBus } from "../../src/events/bus.js";
import { ADMIN_TOKEN, Client, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { startPgProxy } from "../helpers/pgProxy.js";
import type { PgProxy } from "../helpers/pgProxy.js";

let h: Harness;
let proxy: PgProxy;
const opened: { app: App; db: DbHandle }[] = [];
const logged: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];

async function apiOn(databaseUrl: string): Promise<Client> {
  const db = connectDb(databaseUrl, 1, "baton-unavailable");
  const app = buildApp({
    db: db.prisma,
    bus: createInProcessBus(),
    adminToken: ADMIN_TOKEN,
    leaseSeconds: 60,
    log: (level, msg, fields) => void logged.push({ level, msg, fields }),
  });
  opened.push({ app, db });
  return new Client((await app.start(0)).url, ADMIN_TOKEN);
}

beforeAll(async () => {
  h = await startHarness();
  proxy = await startPgProxy(new URL(h.database.url));
});
afterAll(async () => {
  for (const { app, db } of opened) {
    await app.stop();
    await db.close();
  }
  await proxy?.close();
  await h?.close();
});

const create = (client: Client, name: string) => client.raw<unknown>(`mutation { createCompany(name: "${name}") { company { id } } }`);

it("answers UNAVAILABLE / NOT_APPLIED when no connection can be made", async () => {
  const client = await apiOn("postgresql://postgres@127.0.0.1:1/nowhere");
  const res = await create(client, "never made");
  expect(res.errors?.[0]?.extensions).toMatchObject({ code: "UNAVAILABLE", outcome: "NOT_APPLIED" });
  expect(JSON.stringify(res)).not.toMatch(/\sat\s|stack/);
  const line = logged.find((l) => l.msg === "database unavailable");
  expect(line).toMatchObject({ level: "warn", fields: { kind: "unreachable" } });
  expect(JSON.stringify(line)).not.toContain("stack");
});

it("answers UNAVAILABLE / UNKNOWN when the connection is lost after the statement committed, and the change is there", async () => {
  const client = await apiOn(proxy.url(h.database.url));
  expect((await create(client, "warm-up")).errors).toBeUndefined();
  proxy.cutAfter(0);
  const res = await create(client, "made, answer lost");
  expect(proxy.cut()).toBe(true);
  expect(res.errors?.[0]?.extensions).toMatchObject({ code: "UNAVAILABLE", outcome: "UNKNOWN" });
  expect(res.errors?.[0]?.message).toMatch(/may or may not have taken effect/);
  // It had: the outcome was honestly unknown, not "failed".
  expect(await h.sql("SELECT 1 FROM companies WHERE name = 'made, answer lost'")).toHaveLength(1);
  // And the API recovers by itself.
  expect((await create(client, "after")).errors).toBeUndefined();
});
