// The stream behind lockChanged, without sockets: events whose publish never
// happened still arrive (the ledger watcher), and a consumer that stops
// reading costs the server nothing and later catches up from the ledger;
// the reads streams make are shared by all the subscriptions of an instance.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createInProcessBus } from "../../src/events/bus.js";
import { lockEventStream } from "../../src/events/stream.js";
import { IssueLoader } from "../../src/graphql/issueLoader.js";
import { LedgerReader } from "../../src/events/history.js";
import { LedgerWatcher } from "../../src/events/watcher.js";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { silentLogger } from "../../src/log.js";
import { Client, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually, race } from "../helpers/race.js";
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
    const seqs = await h.ledgerSeqs(co.id);
    expect(s.messages[1]!.data?.lockChanged).toMatchObject({ seq: seqs[1], kind: "RECOVERED", issueId: createIssue.id, reason: "LEASE_EXPIRED" });
  } finally {
    await s.close();
  }
});

// docs/invariants.md #12: no reader is given a seq below which an event can still appear
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
    // Everything is committed; once it is final too, one more pass reads the rest.
    await h.settled(co.id);
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
  expect(seen).toHaveLength(240);
  expect(seen).toEqual(await h.ledgerSeqs(co.id));
});

it("a consumer that stops reading holds nothing back: it catches up from the ledger, every event once, in order", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 30 }, () => ({ title: "x", assigneeAgentId: agent.id })) });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const bus = createInProcessBus();
  const ledger = new CountingReader(h.db.prisma);
  const watcher = new LedgerWatcher(h.db.prisma, 100, silentLogger); // for events held back past the stream's retries
  const stream = lockEventStream(ledger, bus, watcher, { companyId: co.id }, { pageSize: 7 });
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
  const got = [(await first).value.seq]; // live now; stop reading
  const readsWhenStopped = ledger.pages;
  for (let i = 0; i < 20; i++) expect(await claim()).toBe("IssueClaimed"); // mutations never wait for the reader
  await h.settled(co.id);
  expect(ledger.pages).toBe(readsWhenStopped); // a stream nobody reads does not read either
  while (got.length < 21) got.push((await stream.next()).value.seq);
  expect(got).toEqual(await h.ledgerSeqs(co.id));
  expect(ledger.pages).toBeLessThanOrEqual(readsWhenStopped + 5); // in pages of 7, not one read per event
  await stream.return!();
  watcher.stop();
  await app.stop();
});

/**
 * The real database behind a counter, with a gate that can hold answers back
 * after PostgreSQL has given them (as a slow or busy event loop would).
 */
function gatedDb() {
  let held: Promise<void> | null = null;
  let open = () => {};
  const counts = { started: 0, answered: 0 };
  const db = {
    $queryRaw: (async (query: Parameters<typeof h.db.prisma.$queryRaw>[0]) => {
      counts.started++;
      const rows = await h.db.prisma.$queryRaw(query);
      counts.answered++;
      if (held) await held;
      return rows;
    }) as typeof h.db.prisma.$queryRaw,
  };
  return {
    db,
    counts,
    hold: () => {
      held = new Promise<void>((resolve) => {
        open = resolve;
      });
    },
    release: () => {
      held = null;
      open();
    },
  };
}

class CountingReader extends LedgerReader {
  pages = 0;
  override page(companyId: string, afterSeq: bigint, first: number) {
    this.pages++;
    return super.page(companyId, afterSeq, first);
  }
}

async function claimsOf(n: number) {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: n }, () => ({ title: "x", assigneeAgentId: agent.id })) });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const claim = async () => expect((await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id })).claimIssue.__typename).toBe("IssueClaimed");
  return { co, claim };
}

it("streams of one instance that need the same ledger page share one read", async () => {
  const { co, claim } = await claimsOf(3);
  for (let i = 0; i < 3; i++) await claim();
  await h.settled(co.id);
  const gated = gatedDb();
  const ledger = new LedgerReader(gated.db);
  const bus = createInProcessBus();
  const streams = Array.from({ length: 50 }, () => lockEventStream(ledger, bus, null, { companyId: co.id, afterSeq: "0" }));
  const got = await Promise.all(streams.map(async (s) => [(await s.next()).value.seq, (await s.next()).value.seq, (await s.next()).value.seq]));
  const ledgerSeqs = await h.ledgerSeqs(co.id);
  for (const seqs of got) expect(seqs).toEqual(ledgerSeqs);
  expect(gated.counts.started).toBe(1);
  await Promise.all(streams.map((s) => s.return!()));
});

it("an announced event missing from a shared read that began before it committed is read again, and nothing is missed", async () => {
  const { co, claim } = await claimsOf(3);
  await claim();
  const [s1] = await h.ledgerSeqs(co.id);
  const gated = gatedDb();
  const ledger = new CountingReader(gated.db);
  const bus = createInProcessBus(); // reaches this stream only: the harness's server publishes elsewhere
  const stream = lockEventStream(ledger, bus, null, { companyId: co.id, afterSeq: s1! });
  const next = [stream.next(), stream.next()];
  await eventually(() => (gated.counts.answered === 1 ? true : undefined), "the stream's replay read");
  // Another stream's read of the same page, answered by PostgreSQL now (nothing after s1) but held back.
  gated.hold();
  const stale = ledger.page(co.id, BigInt(s1!), 500);
  await eventually(() => (gated.counts.answered === 2 ? true : undefined), "the early read");
  await claim(); // committed, never published to this stream
  await claim(); // published: the stream reads, and joins the early read
  const [third] = await h.sql<{ event: unknown }>(
    "SELECT json_build_object('seq', seq::text, 'companyId', company_id, 'issueId', issue_id, 'kind', kind) AS event FROM lock_events WHERE company_id = $1 ORDER BY seq DESC LIMIT 1",
    [co.id],
  );
  await h.settled(co.id); // final, so the stream's second read finds both
  bus.publish([third!.event as never]);
  await eventually(() => (ledger.pages === 3 ? true : undefined), "the stream to ask for the announced event");
  gated.release();
  expect((await stale).events).toEqual([]);
  const [a, b] = await Promise.all(next);
  expect([a!.value.seq, b!.value.seq]).toEqual((await h.ledgerSeqs(co.id)).slice(1));
  expect(ledger.pages).toBeGreaterThanOrEqual(4); // read again after the stale page
  await stream.return!();
});

it("LockEvent.issue lookups of many subscriptions share one read per company scope, and never cross scopes", async () => {
  const acme = await createCompany(h, 1);
  const globex = await createCompany(h, 1);
  const { createIssue: a } = await acme.board.ok(Ops.CreateIssueDocument, { input: { title: "acme's" } });
  const { createIssue: g } = await globex.board.ok(Ops.CreateIssueDocument, { input: { title: "globex's" } });
  const gated = gatedDb();
  const issues = new IssueLoader(gated.db);
  // As a tick in which one event reaches 100 subscriptions of acme, one admin's, and one of globex's asking for acme's issue.
  const [acmeViews, adminView, globexView, globexOwn] = await Promise.all([
    Promise.all(Array.from({ length: 100 }, () => issues.load(acme.id, a.id))),
    issues.load(null, a.id),
    issues.load(globex.id, a.id),
    issues.load(globex.id, g.id),
  ]);
  for (const view of acmeViews) expect(view).toMatchObject({ id: a.id, title: "acme's" });
  expect(adminView).toMatchObject({ id: a.id });
  expect(globexView).toBeNull();
  expect(globexOwn).toMatchObject({ id: g.id });
  expect(gated.counts.started).toBe(3); // acme, the admin (any company), globex
});
