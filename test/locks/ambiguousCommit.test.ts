// A group whose statement committed but whose answer was lost. The API's
// connection to PostgreSQL goes through a proxy that speaks just enough of the
// wire protocol to let a statement run and commit, then drop its answer and
// the connection. The group's members must get an error, not a second run:
// run again alone, each claim would take another issue nobody was told about.
import { afterAll, beforeAll, expect, it } from "vitest";
import { connectDb } from "../../src/db/client.js";
import type { DbHandle } from "../../src/db/client.js";
import { changedNothing } from "../../src/db/sql.js";
import { claimNextForEach } from "../../src/locks/claim/claimNextForEach.js";
import type { ClaimAnswer, ClaimRequest } from "../../src/locks/shared/requests.js";
import { GroupCommit } from "../../src/locks/groupCommit/groupCommit.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import { startPgProxy } from "../helpers/pgProxy.js";
import type { PgProxy } from "../helpers/pgProxy.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
let proxy: PgProxy;
let db: DbHandle;

beforeAll(async () => {
  h = await startHarness();
  const target = new URL(h.database.url);
  proxy = await startPgProxy(target);
  // One connection: every statement of the test goes over it, in order.
  db = connectDb(proxy.url(h.database.url), 1, "baton-proxied");
});
afterAll(async () => {
  await db?.close();
  await proxy?.close();
  await h?.close();
});

it("tells a lost commit from a refused statement", () => {
  expect(changedNothing(Object.assign(new Error("Connection terminated unexpectedly"), {}))).toBe(false);
  expect(changedNothing({ code: "57P01" })).toBe(false);
  expect(changedNothing({ code: "08006" })).toBe(false);
  expect(changedNothing({ code: "57014" })).toBe(true);
  expect(changedNothing({ cause: { originalCode: "40P01" } })).toBe(true);
});

// docs/invariants.md #2: no attempt of an issue is worked by two runs
it("answers every member of a group whose commit lost its answer with an error, and runs none of them again", async () => {
  const co = await createCompany(h, 3);
  const runs = await Promise.all(co.agents.map(async (a) => (await a.client.ok(Ops.StartRunDocument)).startRun.id));
  await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: co.agents.flatMap((a) => Array.from({ length: 3 }, (_, i) => ({ title: `${a.name} ${i}`, assigneeAgentId: a.id }))),
  });
  const deps = { db: db.prisma, events: { publish: () => {} }, leaseSeconds: 60 };
  const group = new GroupCommit<ClaimRequest, ClaimAnswer>((companyId, requests) => claimNextForEach(deps, companyId, requests));
  const request = (i: number): ClaimRequest => ({
    actor: { companyId: co.id, agentId: co.agents[i]!.id, agentNameKey: co.agents[i]!.name.toLowerCase().replace(/ /g, "-") },
    runId: runs[i]!,
    includeUnassigned: false,
  });
  // The connection is open and the statement known before the proxy is armed.
  expect((await group.submit(co.id, request(0))).issue).not.toBeNull();

  // The first statement (agent 1, alone) answers; the second (agents 2 and 3, grouped while it ran) commits and loses its answer.
  proxy.cutAfter(1);
  const first = group.submit(co.id, request(0));
  const grouped = [group.submit(co.id, request(1)), group.submit(co.id, request(2))];
  expect((await first).issue).not.toBeNull();
  const outcomes = await Promise.allSettled(grouped);
  expect(proxy.cut()).toBe(true);
  expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected"]);

  // The grouped statement committed once: each of the two runs holds exactly one issue, not two.
  const held = await h.sql<{ run: string; n: number }>(
    "SELECT checkout_run_id AS run, count(*)::int AS n FROM issues WHERE company_id = $1 AND checkout_run_id IS NOT NULL GROUP BY 1",
    [co.id],
  );
  expect(Object.fromEntries(held.map((r) => [r.run, r.n]))).toEqual({ [runs[0]!]: 2, [runs[1]!]: 1, [runs[2]!]: 1 });
});
