// Ledger retention as the SDK shows it (baton/client, against a real server):
// a read that resumes after a seq whose following events were pruned ends
// with a typed EventsPrunedError, whether it asks once (request), starts a
// stream there (lockChanges), or falls behind the pruning while it streams,
// and never reconnects for ever. The pruned condition is made as retention
// makes it: a row in lock_events_pruned, the pruned events deleted.
import { Baton, BatonError, EventsPrunedError } from "baton/client";
import type { LockChange } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { claimingAgent, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { cuttableProxy } from "../helpers/cuttableProxy.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

/** Retention's work for a company: events through `throughSeq` dropped, and the mark readers are refused by. */
async function prune(companyId: string, throughSeq: string): Promise<void> {
  await h.sql("DELETE FROM lock_events WHERE company_id = $1 AND seq <= $2", [companyId, throughSeq]);
  await h.sql(
    "INSERT INTO lock_events_pruned (company_id, through_seq) VALUES ($1, $2) ON CONFLICT (company_id) DO UPDATE SET through_seq = excluded.through_seq, pruned_at = now()",
    [companyId, throughSeq],
  );
}

/** What a promise settles to (its rejection as a value), or `what` if it has not settled within ms. */
const within = (promise: Promise<unknown>, ms: number, what: string): Promise<unknown> =>
  Promise.race([promise.catch((err: unknown) => err), new Promise((resolve) => setTimeout(() => resolve(what), ms))]);

const LOCK_EVENTS = `query($c: ID!, $after: ID) { lockEvents(companyId: $c, afterSeq: $after, first: 1000) { seq } }`;

it("request() and lockChanges() with an afterSeq in pruned history end with EventsPrunedError: where to resume, the oldest event kept", async () => {
  const { co, claim } = await claimingAgent(h, 4);
  await claim(4);
  await h.settled(co.id);
  const seqs = await h.ledgerSeqs(co.id);
  await prune(co.id, seqs[1]!);
  const baton = new Baton({ url: h.url, token: co.board.token! });

  const asked = await baton.request(LOCK_EVENTS, { c: co.id, after: seqs[0]! }).catch((e: unknown) => e);
  expect(asked).toBeInstanceOf(EventsPrunedError);
  expect(asked).toBeInstanceOf(BatonError); // code-based handling of every BatonError still sees it
  expect(asked).toMatchObject({ code: "EVENTS_PRUNED", resumeAfterSeq: seqs[1], oldestAvailableSeq: seqs[2] });
  expect((asked as Error).message).toContain(`resume with afterSeq ${seqs[1]}`);

  // Resuming where it says misses nothing that is kept; without afterSeq, the oldest kept comes first.
  const resumed = await baton.request<{ lockEvents: { seq: string }[] }>(LOCK_EVENTS, { c: co.id, after: (asked as EventsPrunedError).resumeAfterSeq });
  expect(resumed.lockEvents.map((e) => e.seq)).toEqual(seqs.slice(2));
  const fromStart = await baton.request<{ lockEvents: { seq: string }[] }>(LOCK_EVENTS, { c: co.id, after: null });
  expect(fromStart.lockEvents.map((e) => e.seq)).toEqual(seqs.slice(2));

  const stream = baton.lockChanges({ companyId: co.id, afterSeq: "0" });
  const streamed = await within(stream.next(), 20_000, "still reconnecting after 20 s");
  expect(streamed).toBeInstanceOf(EventsPrunedError);
  expect(streamed).toMatchObject({ code: "EVENTS_PRUNED", resumeAfterSeq: seqs[1], oldestAvailableSeq: seqs[2] });
  expect(await stream.next()).toEqual({ done: true, value: undefined }); // ended: it does not try again
  const kept: string[] = [];
  for await (const event of baton.lockChanges({ companyId: co.id, afterSeq: (streamed as EventsPrunedError).resumeAfterSeq })) {
    kept.push(event.seq);
    if (kept.length === 2) break;
  }
  expect(kept).toEqual(seqs.slice(2));
});

it("lockChanges() that falls behind the pruning while cut off ends with EventsPrunedError instead of reconnecting for ever", async () => {
  const { co, claim } = await claimingAgent(h, 6);
  const proxy = await cuttableProxy(new URL(h.url));
  const seen: LockChange[] = [];
  const stream = new Baton({ url: proxy.url, token: co.board.token! }).lockChanges({ companyId: co.id, afterSeq: "0" });
  const reading = (async () => {
    for await (const event of stream) seen.push(event);
  })().then(
    () => null,
    (err: unknown) => err,
  );
  await claim(2);
  await eventually(() => (seen.length === 2 ? true : undefined), "the first two events");
  // Cut off (its reconnections refused) while two more events commit and retention drops all four.
  proxy.state.paused = true;
  proxy.cut();
  await claim(2);
  await h.settled(co.id);
  const seqs = await h.ledgerSeqs(co.id);
  await prune(co.id, seqs[3]!);
  await claim(1);
  await h.settled(co.id);
  await eventually(() => (proxy.state.refused > 0 ? true : undefined), "an attempt to reconnect");
  proxy.state.paused = false;
  const kept = await h.ledgerSeqs(co.id);
  const ended = await within(reading, 20_000, "still reconnecting after 20 s");
  expect(ended).toBeInstanceOf(EventsPrunedError);
  expect(ended).toMatchObject({ code: "EVENTS_PRUNED", oldestAvailableSeq: kept[0] });
  expect(BigInt((ended as EventsPrunedError).resumeAfterSeq)).toBeGreaterThan(BigInt(seen.at(-1)!.seq));
  expect(seen).toHaveLength(2); // nothing after the gap was yielded as if it followed on
  // It let go of its connection: nothing reconnects any more.
  await eventually(() => (proxy.connections() === 0 ? true : undefined), "the stream's socket to close");
  await proxy.close();
});

it("a live lockChanges() whose place is then pruned ends with EventsPrunedError at its next event", async () => {
  // Enough issues for every claim the wait for a first event may make (the stream starts "now", once subscribed), and one after.
  const { co, claim } = await claimingAgent(h, 50);
  const seen: LockChange[] = [];
  const stream = new Baton({ url: h.url, token: co.board.token! }).lockChanges({ companyId: co.id });
  const reading = (async () => {
    for await (const event of stream) seen.push(event);
  })().then(
    () => null,
    (err: unknown) => err,
  );
  let claimed = 0;
  await eventually(async () => {
    if (seen.length === 0 && claimed < 40) {
      await claim(1);
      claimed++;
    }
    return seen.length > 0 ? true : undefined;
  }, "a first event");
  await h.settled(co.id);
  const last = seen.at(-1)!.seq;
  // Retention passes the stream's place (as if it had stood still for the whole window), then an event commits.
  await h.sql("INSERT INTO lock_events_pruned (company_id, through_seq) VALUES ($1, $2)", [co.id, (BigInt(last) + 1n).toString()]);
  await claim(1);
  const ended = await within(reading, 20_000, "still streaming after 20 s");
  expect(ended).toBeInstanceOf(EventsPrunedError);
  expect(ended).toMatchObject({ code: "EVENTS_PRUNED", resumeAfterSeq: (BigInt(last) + 1n).toString() });
});

it("work(): a worker whose ledger watch falls behind the pruning watches again from now, and still notices a force-release", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const proxy = await cuttableProxy(new URL(h.url));
  const logged: string[] = [];
  const aborted = new Map<string, string>();
  const handled: string[] = [];
  const worker = new Baton({ url: proxy.url, token: agent.client.token! }).work(
    async (issue, job) => {
      handled.push(`${issue.title}@${job.lockEpoch}`);
      if (job.lockEpoch > 1) return; // taken again after its force-release: done
      // Runs until the board takes the issue back: only the worker's ledger watch can tell it.
      await new Promise<void>((resolve) => job.signal.addEventListener("abort", () => resolve()));
      aborted.set(issue.title, String(job.signal.reason));
    },
    { idleWaitMs: 200, onLog: (message) => logged.push(message) },
  );
  try {
    const forceReleased = async (title: string) => {
      const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title, assigneeAgentId: agent.id } });
      await eventually(() => (handled.includes(`${title}@1`) ? true : undefined), `${title} to be handled`);
      expect((await co.board.ok(Ops.ForceReleaseDocument, { issueId: createIssue.id, reason: "the board takes it back" })).forceReleaseIssue.__typename).toBe(
        "IssueReleased",
      );
      await eventually(() => aborted.get(title), `${title}'s job to be aborted`);
      expect(aborted.get(title)).toContain("FORCE_RELEASED");
      await eventually(
        async () => ((await h.one<{ status: string }>("SELECT status FROM issues WHERE id = $1", [createIssue.id])).status === "DONE" ? true : undefined),
        `${title} to be done`,
      );
    };
    // The watch has yielded events (it saw the force-release), so it resumes after a seq when cut off.
    await forceReleased("before");
    proxy.state.paused = true;
    proxy.cut();
    await h.settled(co.id);
    const newest = (await h.ledgerSeqs(co.id)).at(-1)!;
    await h.sql("INSERT INTO lock_events_pruned (company_id, through_seq) VALUES ($1, $2)", [co.id, (BigInt(newest) + 1n).toString()]);
    await eventually(() => (proxy.state.refused > 0 ? true : undefined), "an attempt to reconnect");
    proxy.state.paused = false;
    await eventually(() => (logged.some((m) => m.startsWith("live events resume from now")) ? true : undefined), "the watch to start again from now");
    // The new watch works: a force-release is noticed again.
    await forceReleased("after");
    expect(logged.filter((m) => m.startsWith("live events resume from now"))).toHaveLength(1);
    expect(logged).not.toContain("live events stopped; waiting by polling");
  } finally {
    await worker.stop();
    await proxy.close();
  }
});
