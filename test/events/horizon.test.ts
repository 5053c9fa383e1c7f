// The ledger's ordering, proved against open transactions (docs/events.md,
// "How seq is made"):
//   - a transaction that took its xid before later commits holds their events
//     back: no reader (lockEvents pages, a lockChanged subscription) sees past
//     it, and once it commits every reader gets everything, in seq order, its
//     event first, none skipped, none twice;
//   - such a transaction cannot write an event for an issue a younger
//     transaction has changed since (the stamp refuses; the statement is
//     retried with a newer xid), so one issue's events keep their real order;
//   - a statement that writes an event without stamping its issue fails;
//   - a long-open transaction is reported: a gauge, and a warning naming it.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createInProcessBus } from "../../src/events/bus.js";
import { appendEvents, raw, sql, stampEvent } from "../../src/db/sql.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { ADMIN_DATABASE_URL } from "../helpers/db.js";
import { eventually } from "../helpers/race.js";
import { Subscriber } from "../helpers/subscriber.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ ledgerPollMs: 100 });
});
afterAll(() => h?.close());

/** A session of its own, as an operator's psql or another service would hold one. */
async function session(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: h.database.url, application_name: "held-open" });
  await client.connect();
  return client;
}

/** Opens a transaction that writes one STATUS_CHANGED event for `issueId` (OPEN -> BLOCKED), the way every lock statement does, and leaves it open. */
async function openEventTransaction(client: pg.Client, issueId: string): Promise<void> {
  await client.query("BEGIN");
  await client.query(
    `WITH changed AS (
       UPDATE issues i SET status = 'BLOCKED', last_event_xid = baton_event_xid(i.last_event_xid), updated_at = now()
        WHERE i.id = $1
       RETURNING i.*, 'STATUS_CHANGED' AS ev_kind, NULL::uuid AS ev_run_id, NULL::uuid AS ev_agent_id, 'OPEN -> BLOCKED' AS ev_reason
     )
     INSERT INTO lock_events (company_id, seq, issue_id, kind, status, reason)
     SELECT c.company_id, baton_event_seq(c.last_event_xid, 0), c.id, 'STATUS_CHANGED', c.status, c.ev_reason FROM changed c`,
    [issueId],
  );
}

async function claimer(co: Company, n: number) {
  const agent = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: Array.from({ length: n + 1 }, (_, i) => ({ title: `t${i}`, assigneeAgentId: i === 0 ? null : agent.id })),
  });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const claim = async () => expect((await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id })).claimIssue.__typename).toBe("IssueClaimed");
  return { spare: createIssues[0]!, claim, agent, run };
}

const pageAll = async (co: Company, afterSeq = "0") => {
  const seen: string[] = [];
  for (;;) {
    const { lockEvents } = await co.board.ok(Ops.LockEventsDocument, { companyId: co.id, afterSeq: seen.at(-1) ?? afterSeq, first: 2 });
    seen.push(...lockEvents.map((e) => e.seq));
    if (lockEvents.length < 2) return seen;
  }
};

// docs/invariants.md #12: no reader is given a seq below which an event can still appear
it("a transaction open across later commits holds their events back from every reader; when it commits, readers get everything, in order, none skipped", async () => {
  const co = await createCompany(h, 1);
  const { spare, claim } = await claimer(co, 5);
  await claim();
  await h.settled(co.id);
  const before = await pageAll(co);
  expect(before).toHaveLength(1);

  const live = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq: before[0]! });
  const older = await session();
  try {
    await openEventTransaction(older, spare.id); // its xid is older than every claim below
    for (let i = 0; i < 4; i++) await claim(); // committed, answered, published
    const committed = await h.ledgerSeqs(co.id);
    expect(committed).toHaveLength(5); // the open transaction's row is not visible yet

    // A reader paging now stops at the open transaction: what it was given it will never have to revise.
    expect(await pageAll(co)).toEqual(before);
    // Nor does a subscriber get ahead of it, though four messages announced the
    // claims, and the watcher has polled since and seen them held back.
    await eventually(() => (h.app.services.watcher.heldBackMs > 0 ? true : undefined), "the watcher to see events held back");
    expect(live.messages).toHaveLength(0);

    await older.query("COMMIT");
  } finally {
    await older.end();
  }
  const all = await h.ledgerSeqs(co.id);
  expect(all).toHaveLength(6);
  // The open transaction's event sorts before the claims it was open across.
  const rows = await h.sql<{ kind: string }>("SELECT kind FROM lock_events WHERE company_id = $1 ORDER BY seq", [co.id]);
  expect(rows.map((r) => r.kind)).toEqual(["CLAIMED", "STATUS_CHANGED", "CLAIMED", "CLAIMED", "CLAIMED", "CLAIMED"]);
  // A reader resuming after what it had got gets the rest, nothing skipped.
  await eventually(async () => ((await pageAll(co, before[0]!)).length === 5 ? true : undefined), "the held events to be readable");
  expect([...before, ...(await pageAll(co, before[0]!))]).toEqual(all);
  // The subscriber, too, in order and once.
  await live.count(5);
  expect(live.messages.map((m) => m.data?.lockChanged.seq)).toEqual(all.slice(1));
  await live.close();
});

// docs/invariants.md #12: no reader is given a seq below which an event can still appear
it("a transaction cannot write an event for an issue a younger transaction changed since: the stamp refuses (40001), so one issue's events keep their order", async () => {
  const co = await createCompany(h, 1);
  const { spare } = await claimer(co, 0);
  const older = await session();
  try {
    await older.query("BEGIN");
    await older.query("SELECT pg_current_xact_id()"); // takes its xid now
    // A younger transaction changes the issue and commits: the board cancels it.
    const { updateIssue } = await co.board.ok(Ops.UpdateIssueDocument, { id: spare.id, input: { status: "CANCELLED" } });
    expect(updateIssue.__typename).toBe("IssueUpdated");
    const refused = await older
      .query("UPDATE issues i SET last_event_xid = baton_event_xid(i.last_event_xid) WHERE i.id = $1", [spare.id])
      .catch((err: { code?: string; message: string }) => err);
    expect(refused).toMatchObject({ code: "40001", message: expect.stringContaining("event order conflict") });
    await older.query("ROLLBACK");
    // Run again (a new transaction, a newer xid), the same change is accepted.
    await older.query("BEGIN");
    await older.query("UPDATE issues i SET last_event_xid = baton_event_xid(i.last_event_xid) WHERE i.id = $1", [spare.id]);
    await older.query("ROLLBACK");
  } finally {
    await older.end();
  }
});

// docs/invariants.md #12: no reader is given a seq below which an event can still appear
it("a statement that appends an event for an issue it did not stamp fails, and changes nothing", async () => {
  const co = await createCompany(h, 1);
  const { spare } = await claimer(co, 0);
  const before = await h.snapshot();
  const forgetful = sql`
    WITH changed AS (
      UPDATE issues i SET status = 'BLOCKED', updated_at = now() WHERE i.id = ${spare.id}::uuid
      RETURNING i.*, 'STATUS_CHANGED' AS ev_kind, NULL::uuid AS ev_run_id, NULL::uuid AS ev_agent_id, NULL::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT list FROM events) AS events`;
  await expect(h.db.prisma.$queryRaw(forgetful)).rejects.toThrow(/did not stamp/);
  expect(await h.snapshot()).toEqual(before);
});

it("a transaction that appends in two statements fails at the second, and changes nothing: the second would reuse the first's seqs", async () => {
  const co = await createCompany(h, 1);
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: [{ title: "one" }, { title: "two" }] });
  const before = await h.snapshot();
  const block = (issueId: string) => sql`
    WITH changed AS (
      UPDATE issues i SET status = 'BLOCKED', ${raw(stampEvent("i"))}, updated_at = now() WHERE i.id = ${issueId}::uuid
      RETURNING i.*, 'STATUS_CHANGED' AS ev_kind, NULL::uuid AS ev_run_id, NULL::uuid AS ev_agent_id, 'OPEN -> BLOCKED'::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT list FROM events) AS events`;
  // Two appending statements in one transaction: refused, and the whole transaction with them.
  await expect(
    h.db.prisma.$transaction(async (tx) => {
      await tx.$queryRaw(block(createIssues[0]!.id));
      await tx.$queryRaw(block(createIssues[1]!.id));
    }),
  ).rejects.toThrow(/appended lock events in two statements/);
  expect(await h.snapshot()).toEqual(before);
  // One statement for both is fine, and so is one per transaction.
  await h.db.prisma.$queryRaw(block(createIssues[0]!.id));
  await h.db.prisma.$queryRaw(block(createIssues[1]!.id));
  expect((await h.ledgerSeqs(co.id)).length).toBe(2);
});

it("a transaction open in another database of the cluster holds nothing back: it cannot write this ledger", async () => {
  const co = await createCompany(h, 1);
  const { claim } = await claimer(co, 1);
  const elsewhere = new pg.Client({ connectionString: ADMIN_DATABASE_URL, application_name: "another-app" });
  await elsewhere.connect();
  try {
    await elsewhere.query("BEGIN");
    await elsewhere.query("SELECT pg_current_xact_id()"); // an xid older than the claim's, in the admin database
    await claim();
    await h.settled(co.id); // final though that transaction is still open
    expect((await co.board.ok(Ops.LockEventsDocument, { companyId: co.id })).lockEvents.map((e) => e.kind)).toEqual(["CLAIMED"]);
  } finally {
    await elsewhere.query("ROLLBACK");
    await elsewhere.end();
  }
});

it("a long-open transaction that holds events back is reported: a gauge, and a warning naming it", async () => {
  const co = await createCompany(h, 1);
  const { spare, claim } = await claimer(co, 2);
  const logged: { msg: string; fields: Record<string, unknown> }[] = [];
  const { buildApp } = await import("../../src/app.js");
  const app = buildApp({
    db: h.db.prisma,
    bus: createInProcessBus(),
    adminToken: "w".repeat(20),
    leaseSeconds: 60,
    ledgerPollMs: 50,
    ledgerHoldWarningMs: 300,
    log: (_level, msg, fields) => void logged.push({ msg, fields: fields ?? {} }),
  });
  const { url } = await app.start(0);
  const live = new Subscriber<Ops.LockChangedSubscription>(url, co.board.token).start(Ops.LockChangedDocument, { companyId: co.id });
  const older = await session();
  try {
    await eventually(async () => ((await app.services.metrics.subscriptions.get()).values[0]?.value === 1 ? true : undefined), "the subscription");
    await openEventTransaction(older, spare.id);
    const { rows } = await older.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
    await claim(); // held back behind it
    const warning = await eventually(() => logged.find((l) => l.msg.startsWith("lock events are held back by an open transaction")), "the warning");
    expect(warning.fields).toMatchObject({ oldestTransaction: { pid: rows[0]!.pid, application: "held-open" } });
    const metrics = await (await fetch(new URL("/metrics", url))).text();
    const gauge = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1]);
    expect(gauge("baton_ledger_held_back_seconds")).toBeGreaterThan(0.2);
    expect(gauge("baton_oldest_open_transaction_seconds")).toBeGreaterThan(0.2);
    expect(live.messages).toHaveLength(0);
    await older.query("ROLLBACK");
    await live.count(1); // delivered once it ends
    expect(live.messages[0]!.data?.lockChanged.kind).toBe("CLAIMED");
  } finally {
    await older.end();
    await live.close();
    await app.stop();
  }
});
