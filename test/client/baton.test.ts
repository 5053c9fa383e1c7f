// The baton/client SDK, imported as users import it ("baton/client", the
// compiled package that npm ci builds), against a real server: typed
// requests, errors with their codes, and lockChanges() resuming after its
// last seq when its connection is cut, each seq once and in order.
import { Baton, BatonError, Documents, UnauthenticatedError } from "baton/client";
import type { LockChange } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ADMIN_TOKEN, claimingAgent, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { cuttableProxy } from "../helpers/cuttableProxy.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

it("runs typed requests, and turns refusals and an unreachable server into BatonError with a code", async () => {
  const baton = new Baton({ url: h.url, token: ADMIN_TOKEN });
  const { me } = await baton.request(Documents.MeDocument, {});
  expect(me.role).toBe("ADMIN");
  const stranger = new Baton({ url: h.url, token: `baton_agent_${"x".repeat(43)}` });
  const refused = await stranger.request(Documents.MeDocument, {}).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(UnauthenticatedError); // a BatonError, as every refusal
  expect(refused).toBeInstanceOf(BatonError);
  expect(refused).toMatchObject({ name: "UnauthenticatedError", code: "UNAUTHENTICATED" });
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

it("lockChanges() ends with UnauthenticatedError when its key is revoked mid-stream (a board key rotated)", async () => {
  const { co, claim } = await claimingAgent(h, 1);
  await claim(1);
  const stream = new Baton({ url: h.url, token: co.board.token! }).lockChanges({ companyId: co.id, afterSeq: "0" });
  expect((await stream.next()).value).toMatchObject({ kind: "CLAIMED" }); // subscribed with the key that works
  const rotated = await h.admin.raw<{ rotateBoardKey: { apiKey: string } }>(`mutation($c: ID) { rotateBoardKey(companyId: $c) { apiKey } }`, { c: co.id });
  expect(rotated.errors).toBeUndefined();
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([
    stream.next().then(
      (r) => ({ yielded: r }),
      (err: unknown) => ({ err }),
    ),
    new Promise((resolve) => (timer = setTimeout(() => resolve("still open after 10 s"), 10_000))),
  ]);
  clearTimeout(timer);
  await stream.return?.();
  expect(ended).toMatchObject({ err: expect.any(UnauthenticatedError) });
  expect((ended as { err: BatonError }).err.code).toBe("UNAUTHENTICATED");
});

it("concurrency keys: a worker's issue carries its key, the limit documents set and read a key's cap, a claim by id of a full key is ConcurrencyLimitReached", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const board = new Baton({ url: h.url, token: co.board.token! });
  const agentBaton = new Baton({ url: h.url, token: agent.client.token! });
  const { createIssues } = await board.request(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "a1", concurrencyKey: "repo-a", assigneeAgentId: agent.id },
      { title: "a2", concurrencyKey: "repo-a", assigneeAgentId: agent.id },
      { title: "plain", assigneeAgentId: agent.id },
    ],
  });
  expect(createIssues.map((i) => i.concurrencyKey)).toEqual(["repo-a", "repo-a", null]);
  expect((await board.request(Documents.SetConcurrencyLimitDocument, { key: "repo-a", maxActive: 1 })).setConcurrencyLimit).toEqual({
    key: "repo-a",
    maxActive: 1,
    active: 0,
  });

  const seen: { title: string; key: string | null }[] = [];
  let refused: unknown = null;
  let during: unknown = null;
  const worker = agentBaton.work(
    async (issue) => {
      seen.push({ title: issue.title, key: issue.concurrencyKey });
      if (issue.concurrencyKey !== "repo-a" || refused) return;
      // While this one is active its key is full: the board sees it, and a claim by id of the other is refused.
      during = (await board.request(Documents.ConcurrencyLimitsDocument, { companyId: co.id })).concurrencyLimits;
      const other = createIssues.find((i) => i.concurrencyKey === "repo-a" && i.id !== issue.id)!;
      const { startRun } = await agentBaton.request(Ops.StartRunDocument, {});
      const { claimIssue } = await agentBaton.request(Ops.ClaimIssueDocument, { runId: startRun.id, issueId: other.id });
      refused = claimIssue;
      await agentBaton.request(Ops.FinishRunDocument, { runId: startRun.id, status: "SUCCEEDED" });
    },
    { once: true },
  );
  await worker.done;
  expect(seen.map((s) => s.key).sort()).toEqual([null, "repo-a", "repo-a"].sort());
  expect(during).toEqual([{ key: "repo-a", maxActive: 1, active: 1 }]);
  expect(refused).toEqual({ __typename: "ConcurrencyLimitReached", message: expect.stringContaining("repo-a"), key: "repo-a", maxActive: 1 });
  expect((await board.request(Documents.ConcurrencyLimitsDocument, { companyId: co.id })).concurrencyLimits).toEqual([
    { key: "repo-a", maxActive: 1, active: 0 },
  ]);
  expect((await board.request(Documents.SetConcurrencyLimitDocument, { key: "repo-a", maxActive: null })).setConcurrencyLimit).toBeNull();
  expect((await board.request(Documents.ConcurrencyLimitsDocument, { companyId: co.id })).concurrencyLimits).toEqual([]);
});
