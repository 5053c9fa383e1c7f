// Redis dies mid-test: mutations keep committing, /readyz says so, delivery
// resumes on existing subscriptions when Redis is back, and nothing is lost.
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";
import { PrivateRedis } from "../helpers/redis.js";
import { Subscriber } from "../helpers/subscriber.js";

let h: Harness;
let redis: PrivateRedis;
let urlB: string;
const subscribers: Subscriber<Ops.LockChangedSubscription>[] = [];

beforeAll(async () => {
  redis = await PrivateRedis.start();
  // The ledger watcher would also fill the gap (stream.test.ts); switch it off
  // here to prove the Redis reconnect path on its own.
  h = await startHarness({ redisUrl: redis.url, ledgerPollMs: 600_000 });
  urlB = (await h.startInstance()).url;
});
afterAll(async () => {
  for (const s of subscribers) await s.close();
  await h?.close();
  await redis?.kill();
});

const readyz = async (url: string) => {
  const res = await fetch(url.replace("/graphql", "/readyz"));
  return { status: res.status, body: (await res.json()) as Record<string, string> };
};

it("survives a Redis restart without losing or repeating an event", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: Array.from({ length: 30 }, (_, i) => ({ title: `job ${i}`, assigneeAgentId: agent.id })),
  });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const live = new Subscriber<Ops.LockChangedSubscription>(urlB, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq: "0" });
  subscribers.push(live);
  const claim = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
      expect(claimIssue.__typename).toBe("IssueClaimed");
    }
  };

  await claim(5);
  await live.count(5);

  await redis.kill();
  await eventually(async () => ((await readyz(h.url)).status === 503 ? true : undefined), "/readyz to report Redis down");
  expect((await readyz(h.url)).body).toMatchObject({ database: "up", pubsub: "down" });
  await claim(10); // mutations keep succeeding while Redis is down
  await eventually(() => (h.bus.stats.publishFailures > 0 ? true : undefined), "publish failures to be counted");
  expect(live.messages).toHaveLength(5);

  await redis.restart();
  await eventually(async () => ((await readyz(h.url)).status === 200 ? true : undefined), "/readyz to recover");
  await eventually(async () => ((await readyz(urlB)).status === 200 ? true : undefined), "instance B to reconnect");
  await claim(5);
  // The same subscription, never reconnected, receives everything, once, in order.
  await live.count(20);
  const all = await h.ledgerSeqs(co.id);
  expect(all).toHaveLength(20);
  expect(live.messages.map((m) => m.data?.lockChanged.seq)).toEqual(all);
  expect(live.closed).toBeNull();

  // A client that does reconnect, resuming from its last seq, loses nothing either.
  const resumed = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, {
    companyId: co.id,
    afterSeq: all[11]!,
  });
  subscribers.push(resumed);
  await resumed.count(8);
  expect(resumed.messages.map((m) => m.data?.lockChanged.seq)).toEqual(all.slice(12));
  expect(createIssues).toHaveLength(30);
});

it("a message on a company's channel that is not one of its committed events is dropped: no crash, no skipped event", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 4 }, () => ({ title: "x", assigneeAgentId: agent.id })) });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const live = new Subscriber<Ops.LockChangedSubscription>(urlB, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq: "0" });
  subscribers.push(live);
  const claim = async () => expect((await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id })).claimIssue.__typename).toBe("IssueClaimed");
  await claim();
  await live.count(1);
  await h.settled(co.id);
  const { issue } = (await co.board.ok(Ops.LockEventsDocument, { companyId: co.id })).lockEvents[0]!;
  const real = {
    seq: (await h.ledgerSeqs(co.id))[0]!,
    companyId: co.id,
    issueId: issue.id,
    kind: "CLAIMED",
    status: "CLAIMED",
    runId: run.id,
    agentId: agent.id,
  };
  const publisher = new Redis(redis.url);
  try {
    const channel = `baton:lock-events:${co.id}`;
    for (const junk of [
      "null",
      "42",
      "not json",
      JSON.stringify({ ...real, seq: "abc" }),
      JSON.stringify({ ...real, companyId: "x" }),
      JSON.stringify({ ...real, seq: "9000000000000000000" }),
    ]) {
      expect(await publisher.publish(channel, junk)).toBe(1); // instance B, which has the subscriber, hears it
    }
  } finally {
    publisher.disconnect();
  }
  await claim();
  await claim();
  await live.count(3);
  expect(live.messages.map((m) => m.data?.lockChanged.seq)).toEqual(await h.ledgerSeqs(co.id));
  expect(live.messages.every((m) => !m.errors)).toBe(true);
});

it("subscriptions opened and abandoned while Redis is down let go at once, not when Redis is back", async () => {
  const co = await createCompany(h, 1);
  const gauge = async () => (await h.app.services.metrics.subscriptions.get()).values[0]?.value ?? 0;
  const before = await gauge();
  await redis.kill();
  try {
    await eventually(async () => ((await readyz(h.url)).status === 503 ? true : undefined), "/readyz to report Redis down");
    const waiting = Array.from({ length: 5 }, () =>
      new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id }),
    );
    await eventually(async () => ((await gauge()) === before + 5 ? true : undefined), "the five subscriptions to be open");
    for (const s of waiting) await s.close();
    await eventually(async () => ((await gauge()) === before ? true : undefined), "the abandoned subscriptions to be let go");
  } finally {
    await redis.restart();
  }
});

it("ends issuesChanged subscriptions when Redis comes back (notices may have been lost), so that clients read the issues again", async () => {
  const co = await createCompany(h, 0);
  // Both instances back on Redis after the test before (a reconnect would end this subscription at once).
  for (const url of [h.url, urlB]) await eventually(async () => ((await readyz(url)).status === 200 ? true : undefined), "Redis seen again");
  const s = new Subscriber<Ops.IssuesChangedSubscription>(urlB, co.board.token).start(Ops.IssuesChangedDocument, { companyId: co.id });
  subscribers.push(s as unknown as Subscriber<Ops.LockChangedSubscription>);
  // Live first: a notice arrives (retried: the subscription has no acknowledgement over graphql-ws).
  await eventually(async () => {
    await co.board.ok(Ops.CreateIssueDocument, { input: { title: "before" } });
    return s.messages.some((m) => m.data?.issuesChanged.length) ? true : undefined;
  }, "a notice before the outage");
  await redis.kill();
  await co.board.ok(Ops.CreateIssueDocument, { input: { title: "during" } });
  await redis.restart();
  await s.until((messages) => messages.some((m) => m.errors?.[0]?.extensions?.code === "SUBSCRIPTION_OVERFLOW"), "the subscription to end", 20_000);
  expect(s.messages.flatMap((m) => m.data?.issuesChanged ?? []).map((i) => i.title)).not.toContain("during");
});
