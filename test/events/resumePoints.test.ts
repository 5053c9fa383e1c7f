// Where a reader may resume (docs/events.md, "When history has been pruned"
// and "A seq this database has not made"): EVENTS_PRUNED offers a point after
// which every kept event comes, once and in seq order, even when a kept day
// holds seqs below the newest dropped one (day partitions split by `at`, seqs
// by transaction id); and an afterSeq no transaction of this cluster has made
// yet (a restore, a failover) is refused with SEQ_AHEAD instead of skipping
// every event up to it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneLedger } from "../../src/retention/partitions.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { Subscriber } from "../helpers/subscriber.js";

let h: Harness;
let co: Company;

const X = 1n << 20n; // seq = xid × 2^20 + position
const DAY_MS = 86_400_000;
const utcDay = (daysAgo: number) => new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - daysAgo * DAY_MS);

/** A partition for a past UTC day holding `seqs` (xids far below any real one: made long ago). */
async function backdatedDay(daysAgo: number, seqs: bigint[]): Promise<void> {
  const day = utcDay(daysAgo);
  const name = `lock_events_${day.toISOString().slice(0, 10).replaceAll("-", "")}`;
  await h.sql(`CREATE TABLE ${name} (LIKE lock_events INCLUDING DEFAULTS)`);
  await h.sql(
    `ALTER TABLE lock_events ATTACH PARTITION ${name} FOR VALUES FROM ('${day.toISOString()}') TO ('${new Date(day.getTime() + DAY_MS).toISOString()}')`,
  );
  for (const seq of seqs) {
    await h.sql(`INSERT INTO lock_events (company_id, seq, issue_id, kind, status, at) VALUES ($1, $2, gen_random_uuid(), 'CLAIMED', 'CLAIMED', $3)`, [
      co.id,
      seq.toString(),
      new Date(day.getTime() + 60_000),
    ]);
  }
}

/** One claim by the company's first agent: a real event, today. */
async function claimOne(title: string): Promise<void> {
  const agent = co.agents[0]!;
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title, assigneeAgentId: agent.id } });
  expect((await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id })).claimIssue.__typename).toBe("IssueClaimed");
  await h.settled(co.id);
}

/** Every event after `afterSeq`, paged forward `first` at a time as a client does; the refusal if one comes. */
async function pageAll(afterSeq: string, first: number): Promise<{ seqs: string[]; refused?: Record<string, unknown> }> {
  const seqs: string[] = [];
  let after = afterSeq;
  for (let pages = 0; pages < 100; pages++) {
    const res = await co.board.request(Ops.LedgerPageDocument, { companyId: co.id, afterSeq: after, first });
    if (res.errors?.length) return { seqs, refused: res.errors[0]!.extensions };
    const page = res.data!.lockEvents.map((e) => e.seq);
    seqs.push(...page);
    if (page.length < first) return { seqs };
    after = page.at(-1)!;
  }
  throw new Error("paged 100 times without reaching the end");
}

beforeAll(async () => {
  h = await startHarness();
  co = await createCompany(h, 1);
});
afterAll(() => h?.close());

// docs/invariants.md #16: retention never skips a reader forward
describe("EVENTS_PRUNED's resume point when a kept day holds seqs below the newest dropped one", () => {
  // Dropped (40 days ago): transactions 10 and 13. Kept (29 days ago): 11 (two events), 12 and 15,
  // which began before that midnight and appended after it. Today: one real claim.
  const dropped = [10n * X, 13n * X];
  const zone = [11n * X, 11n * X + 1n, 12n * X];
  let kept: string[];

  beforeAll(async () => {
    await backdatedDay(40, dropped);
    await backdatedDay(29, [...zone, 15n * X]);
    await claimOne("today");
    const pass = await pruneLedger(h.database.url, 30);
    expect(pass.failures).toEqual([]);
    expect(await h.sql("SELECT through_seq::text AS t FROM lock_events_pruned WHERE company_id = $1", [co.id])).toEqual([{ t: (13n * X).toString() }]);
    kept = await h.ledgerSeqs(co.id);
    expect(kept.slice(0, 4)).toEqual([...zone, 15n * X].map(String));
  });

  it("offers the point just before the oldest kept event after afterSeq, which lockEvents accepts and answers with every kept event", async () => {
    for (const afterSeq of ["0", (10n * X).toString(), (11n * X - 1n - X).toString()]) {
      const res = await co.board.request(Ops.LedgerPageDocument, { companyId: co.id, afterSeq, first: 100 });
      expect(res.errors?.[0]?.extensions).toEqual({ code: "EVENTS_PRUNED", resumeAfterSeq: (11n * X - 1n).toString(), oldestAvailableSeq: kept[0] });
    }
    const resumed = await co.board.ok(Ops.LedgerPageDocument, { companyId: co.id, afterSeq: (11n * X - 1n).toString(), first: 1000 });
    expect(resumed.lockEvents.map((e) => e.seq)).toEqual(kept);
  });

  it("paged from it a few at a time, every kept event comes once, in seq order, and no page is refused", async () => {
    for (const first of [1, 2, 3]) expect(await pageAll((11n * X - 1n).toString(), first)).toEqual({ seqs: kept });
  });

  it("a reader that stopped between two kept events below the newest dropped seq is refused, and resumes with the rest", async () => {
    const res = await co.board.request(Ops.LedgerPageDocument, { companyId: co.id, afterSeq: (11n * X + 1n).toString(), first: 100 });
    expect(res.errors?.[0]?.extensions).toEqual({ code: "EVENTS_PRUNED", resumeAfterSeq: (12n * X - 1n).toString(), oldestAvailableSeq: (12n * X).toString() });
    expect(await pageAll((12n * X - 1n).toString(), 1000)).toEqual({ seqs: kept.slice(2) });
    // Inside one transaction's events: the offer starts that transaction again (seqs at or below afterSeq come twice).
    const inside = await co.board.request(Ops.LedgerPageDocument, { companyId: co.id, afterSeq: (11n * X).toString(), first: 100 });
    expect(inside.errors?.[0]?.extensions).toEqual({ code: "EVENTS_PRUNED", resumeAfterSeq: (11n * X - 1n).toString(), oldestAvailableSeq: kept[0] });
  });

  it("lockChanged from it replays every kept event once, in seq order, then goes on live", async () => {
    const refused = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq: "0" });
    try {
      const [message] = await refused.until((m) => m.length > 0, "the refusal");
      expect(message!.errors?.[0]?.extensions).toEqual({ code: "EVENTS_PRUNED", resumeAfterSeq: (11n * X - 1n).toString(), oldestAvailableSeq: kept[0] });
    } finally {
      await refused.close();
    }
    const live = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, {
      companyId: co.id,
      afterSeq: (11n * X - 1n).toString(),
    });
    try {
      await live.until((m) => m.length >= kept.length, "the kept events");
      await claimOne("after the resume");
      const after = await h.ledgerSeqs(co.id);
      const got = await live.until((m) => m.length >= after.length, "the new event");
      expect(got.map((m) => m.errors ?? m.data?.lockChanged.seq)).toEqual(after);
    } finally {
      await live.close();
    }
  });
});

describe("an afterSeq above every seq this database has made", () => {
  const ceiling = async () => BigInt((await h.one<{ c: string }>("SELECT baton_event_ceiling()::text AS c")).c);
  const ahead = (c: bigint) => (c + 1000n * X).toString();

  it("lockEvents refuses it with SEQ_AHEAD and the ceiling; a seq below the ceiling is taken", async () => {
    const before = await ceiling();
    const afterSeq = ahead(before);
    const snapshot = await h.snapshot();
    const res = await co.board.request(Ops.LedgerPageDocument, { companyId: co.id, afterSeq, first: 10 });
    expect(res.data).toBeFalsy();
    const error = res.errors![0]!;
    expect(error.extensions).toEqual({ code: "SEQ_AHEAD", afterSeq, ceilingSeq: expect.stringMatching(/^\d+$/) });
    const told = BigInt((error.extensions as { ceilingSeq: string }).ceilingSeq);
    expect(told >= before && told < BigInt(afterSeq)).toBe(true);
    expect(error.message).toBe(
      `afterSeq ${afterSeq} is ahead of every seq this database has made (all are below ${told}): it was restored or failed over ` +
        `to a copy from before that seq, or the seq is not from this ledger; read again without afterSeq (from now) or from "0"`,
    );
    expect(await h.snapshot()).toEqual(snapshot);
    // Below the ceiling: an ordinary resume point, answered (nothing after it yet).
    expect((await co.board.ok(Ops.LedgerPageDocument, { companyId: co.id, afterSeq: (told - 1n).toString(), first: 10 })).lockEvents).toEqual([]);
  });

  it("lockChanged over graphql-ws ends with SEQ_AHEAD", async () => {
    const afterSeq = ahead(await ceiling());
    const ws = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq });
    try {
      const [message] = await ws.until((m) => m.length > 0, "the refusal");
      expect(message!.errors?.[0]?.extensions).toEqual({ code: "SEQ_AHEAD", afterSeq, ceilingSeq: expect.stringMatching(/^\d+$/) });
    } finally {
      await ws.close();
    }
  });

  it("lockChanged over SSE ends with SEQ_AHEAD: a last result, then complete", async () => {
    const afterSeq = ahead(await ceiling());
    const response = await fetch(h.url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", authorization: `Bearer ${co.board.token}` },
      body: JSON.stringify({
        query: `subscription($c: ID!, $a: ID) { lockChanged(companyId: $c, afterSeq: $a) { seq } }`,
        variables: { c: co.id, a: afterSeq },
      }),
    });
    const messages = (await response.text()).split("\n\n").filter((m) => m.startsWith("event:"));
    expect(messages.map((m) => m.split("\n")[0])).toEqual(["event: next", "event: complete"]);
    const result = JSON.parse(messages[0]!.split("\n")[1]!.slice("data:".length)) as { errors: { extensions: Record<string, unknown> }[] };
    expect(result.errors[0]!.extensions).toEqual({ code: "SEQ_AHEAD", afterSeq, ceilingSeq: expect.stringMatching(/^\d+$/) });
  });
});
