// The stream behind lockChanged, without sockets: events whose publish never
// happened still arrive (the ledger watcher), and a consumer that stops
// reading is cut off with a resumable error instead of growing without bound.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createInProcessBus } from "../../src/events/bus.js";
import { lockEventStream, SubscriptionOverflowError } from "../../src/events/stream.js";
import { LedgerWatcher } from "../../src/events/watcher.js";
import { sweep } from "../../src/locks/sweep.js";
import { silentLogger } from "../../src/log.js";
import { Client, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { race } from "../helpers/race.js";
import { Subscriber } from "../helpers/subscriber.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ ledgerPollMs: 100 });
});
afterAll(() => h?.close());

it("delivers events written by another process that never published them (recovery without Redis)", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "t", assigneeAgentId: agent.id } });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
  const s = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq: "0" });
  try {
    await s.count(1);
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [run.id]);
    // A recovery process of its own, whose in-process bus reaches nobody.
    await sweep(h.db.prisma, createInProcessBus());
    await s.count(2);
    expect(s.messages[1]!.data?.lockChanged).toMatchObject({ seq: "2", kind: "RECOVERED", issueId: createIssue.id, reason: "LEASE_EXPIRED" });
  } finally {
    await s.close();
  }
});

it("a consumer paging lockEvents(afterSeq: last seen) during concurrent commits from two instances gets every event exactly once", async () => {
  const co = await createCompany(h, 8);
  const second = await h.startInstance();
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 120 }, (_, i) => ({ title: `job ${i}` })) });
  const runs = await Promise.all(co.agents.map(async (a) => (await a.client.ok(Ops.StartRunDocument)).startRun));
  const seen: string[] = [];
  let done = false;
  const page = async () => {
    const { lockEvents } = await co.board.ok(Ops.LockEventsDocument, { companyId: co.id, afterSeq: seen.at(-1) ?? "0", first: 7 });
    seen.push(...lockEvents.map((e) => e.seq));
    return lockEvents.length;
  };
  const reader = (async () => {
    while (!done) await page();
    while ((await page()) > 0);
  })();
  await race(co.agents.length, async (i) => {
    const client = i % 2 ? new Client(second.url, co.agents[i]!.client.token) : co.agents[i]!.client;
    for (;;) {
      const { claimIssue } = await client.ok(Ops.ClaimIssueDocument, { runId: runs[i]!.id, includeUnassigned: true });
      if (claimIssue.__typename !== "IssueClaimed") return;
      await client.ok(Ops.ReleaseIssueDocument, { runId: runs[i]!.id, issueId: claimIssue.issue.id, outcome: "BLOCKED" });
    }
  });
  done = true;
  await reader;
  expect(seen).toEqual(Array.from({ length: 240 }, (_, i) => String(i + 1)));
});

it("closes a stream whose consumer stops reading, with the seq to resume from", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 30 }, () => ({ title: "x", assigneeAgentId: agent.id })) });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const bus = createInProcessBus();
  const watcher = new LedgerWatcher(h.db.prisma, 60_000, silentLogger);
  const stream = lockEventStream(h.db.prisma, bus, watcher, { companyId: co.id }, { maxBuffered: 10 });
  const first = stream.next();
  // The stream is live once its first pull has subscribed; claim through a
  // server whose bus is this one, so that every event reaches the stream.
  const { buildApp } = await import("../../src/app.js");
  const app = buildApp({ db: h.db.prisma, bus, adminToken: "x".repeat(20), leaseSeconds: 60, log: silentLogger });
  const claim = async () => {
    const res = await app.fetch(
      new Request("http://local/graphql", {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${agent.client.token}` },
        body: JSON.stringify({ query: "mutation($r: ID!) { claimIssue(runId: $r) { __typename } }", variables: { r: run.id } }),
      }),
    );
    return ((await res.json()) as { data: { claimIssue: { __typename: string } } }).data.claimIssue.__typename;
  };
  expect(await claim()).toBe("IssueClaimed");
  expect((await first).value).toMatchObject({ kind: "CLAIMED" }); // live now; stop reading
  for (let i = 0; i < 20; i++) expect(await claim()).toBe("IssueClaimed"); // mutations never wait for the reader
  const drained: string[] = [];
  const error = await (async () => {
    try {
      for (;;) {
        const next = await stream.next();
        if (next.done) return null;
        drained.push(next.value.seq);
      }
    } catch (err) {
      return err;
    }
  })();
  expect(error).toBeInstanceOf(SubscriptionOverflowError);
  expect((error as Error).message).toContain(`afterSeq: "${drained.at(-1) ?? "1"}"`);
  watcher.stop();
  await app.stop();
});
