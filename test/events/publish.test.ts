// Every verb that changes a lock publishes its events itself, after commit.
// The ledger watcher (which refills subscribers from the ledger whatever the
// bus did) is switched off here, so an event arrives only if its verb
// published it; and each event's issue, read as it is delivered, must already
// show the change: an event published before its transaction committed would
// show the issue as it was.
import { afterAll, beforeAll, expect, it } from "vitest";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";
import { Subscriber } from "../helpers/subscriber.js";

type Event = Ops.LockChangedWithIssueSubscription["lockChanged"];
let h: Harness;
let co: Company;
let s: Subscriber<Ops.LockChangedWithIssueSubscription>;
let runId: string;

beforeAll(async () => {
  h = await startHarness({ ledgerPollMs: 3_600_000 });
  co = await createCompany(h, 1);
  runId = (await co.agents[0]!.client.ok(Ops.StartRunDocument)).startRun.id;
  s = new Subscriber<Ops.LockChangedWithIssueSubscription>(h.url, co.board.token).start(Ops.LockChangedWithIssueDocument, { companyId: co.id });
  // Live: the subscription has no acknowledgement, so claim and release until an event comes through.
  await eventually(async () => {
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "warm-up" } });
    await co.board.ok(Ops.UpdateIssueDocument, { id: createIssue.id, input: { status: "CANCELLED" } });
    return s.messages.length > 0 ? true : undefined;
  }, "the subscription to be live");
});
afterAll(async () => {
  await s?.close();
  await h?.close();
});

/** Runs `act`, then waits for the events it committed (by the ledger) to arrive live, and checks each against its issue. */
async function published(act: () => Promise<unknown>): Promise<Event[]> {
  const seqOf = async () => Number((await h.one<{ seq: string }>("SELECT coalesce(max(seq), 0) AS seq FROM lock_events WHERE company_id = $1", [co.id])).seq);
  const before = await seqOf();
  await act();
  const after = await seqOf();
  expect(after, "the verb committed no event").toBeGreaterThan(before);
  await s.until((m) => m.some((x) => Number(x.data?.lockChanged.seq ?? 0) >= after), `events ${before + 1}..${after} to be published`, 5000);
  const events = s.messages.map((m) => m.data!.lockChanged).filter((e) => Number(e.seq) > before);
  // One statement may write several events of one issue (claim, then acquire): its last is the issue's state now.
  const last = new Map(events.map((e) => [e.issueId, e]));
  for (const e of last.values()) expect(e.issue.status, `${e.kind} #${e.seq} published before its commit`).toBe(e.status);
  return events;
}

const agent = () => co.agents[0]!.client;
const issue = async (title: string, extra: Record<string, unknown> = {}) =>
  (await co.board.ok(Ops.CreateIssueDocument, { input: { title, assigneeAgentId: co.agents[0]!.id, ...extra } })).createIssue.id;

it("claimIssue (named and next), acquireExecution and releaseIssue publish their events, after commit", async () => {
  const named = await issue("named");
  expect((await published(() => agent().ok(Ops.ClaimIssueDocument, { runId, issueId: named }))).map((e) => e.kind)).toEqual(["CLAIMED"]);
  expect((await published(() => agent().ok(Ops.AcquireExecutionDocument, { runId, issueId: named }))).map((e) => e.kind)).toEqual(["EXECUTION_ACQUIRED"]);
  expect((await published(() => agent().ok(Ops.ReleaseIssueDocument, { runId, issueId: named, outcome: "DONE" }))).map((e) => e.kind)).toEqual(["RELEASED"]);
  await issue("next");
  expect((await published(() => agent().ok(Ops.ClaimIssueDocument, { runId }))).map((e) => e.kind)).toEqual(["CLAIMED"]);
});

it("claimIssues and releaseIssues (the batches) publish their events, after commit", async () => {
  const ids = [await issue("b1"), await issue("b2")];
  const claimed = await published(() => agent().ok(Ops.ClaimIssuesDocument, { runId, limit: 2, acquireExecution: true }));
  expect(new Set(claimed.map((e) => e.issueId))).toEqual(new Set(ids));
  expect(claimed.map((e) => e.kind).sort()).toEqual(["CLAIMED", "CLAIMED", "EXECUTION_ACQUIRED", "EXECUTION_ACQUIRED"]);
  const released = await published(() => agent().ok(Ops.ReleaseIssuesDocument, { runId, issueIds: ids, outcome: "DONE" }));
  expect(released.map((e) => e.kind)).toEqual(["RELEASED", "RELEASED"]);
});

it("forceReleaseIssue and updateIssue (the board) publish their events, after commit", async () => {
  const held = await issue("forced");
  await agent().ok(Ops.ClaimIssueDocument, { runId, issueId: held });
  await s.until((m) => m.some((x) => x.data?.lockChanged.issueId === held), "the claim");
  expect((await published(() => co.board.ok(Ops.ForceReleaseDocument, { issueId: held, reason: "stuck" }))).map((e) => e.kind)).toEqual(["FORCE_RELEASED"]);
  expect((await published(() => co.board.ok(Ops.UpdateIssueDocument, { id: held, input: { status: "CANCELLED" } }))).map((e) => e.kind)).toEqual([
    "STATUS_CHANGED",
  ]);
});

it("finishRun releasing what the run still holds, and runHeartbeat (the scheduler's claims), publish their events, after commit", async () => {
  const held = await issue("held at finish");
  await agent().ok(Ops.ClaimIssueDocument, { runId, issueId: held });
  await s.until((m) => m.some((x) => x.data?.lockChanged.issueId === held), "the claim");
  const finished = await published(() => agent().ok(Ops.FinishRunDocument, { runId, status: "SUCCEEDED" }));
  expect(finished.filter((e) => e.issueId === held).map((e) => e.kind)).toEqual(["RELEASED"]);
  expect(new Set(finished.map((e) => e.kind))).toEqual(new Set(["RELEASED"]));
  await issue("for the scheduler");
  const ticked = await published(() => co.board.ok(Ops.RunHeartbeatDocument, {}));
  expect(ticked.map((e) => e.kind)).toEqual(["CLAIMED"]);
});

it("the recovery sweep publishes its events, after commit, through the bus it is given", async () => {
  const held = await issue("dies with its run");
  runId = (await agent().ok(Ops.StartRunDocument)).startRun.id;
  await agent().ok(Ops.ClaimIssueDocument, { runId, issueId: held });
  await s.until((m) => m.some((x) => x.data?.lockChanged.issueId === held), "the claim");
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [runId]);
  const recovered = await published(() => sweep(h.db.prisma, h.bus));
  expect(recovered.filter((e) => e.issueId === held).map((e) => e.kind)).toEqual(["RECOVERED"]);
});

it("publishes from one place: every verb commits its change through commitChange, commitTransaction or answerEach", async () => {
  const { readdirSync, readFileSync } = await import("node:fs");
  const dir = new URL("../../src/locks/", import.meta.url);
  const offenders: string[] = [];
  // shared/commit.ts is the one place that publishes (it defines the three)
  const files = (readdirSync(dir, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts") && f !== "shared/commit.ts");
  expect(files.length).toBeGreaterThan(15); // every verb's file, in its room
  for (const file of files) {
    const text = readFileSync(new URL(file, dir), "utf8");
    if (/\.publish\(/.test(text)) offenders.push(`${file} publishes by hand`);
    if (/appendEvents\(/.test(text) && !/commitChange|commitTransaction|answerEach|ForEach\(/.test(text))
      offenders.push(`${file} appends events but commits them another way`);
  }
  expect(offenders).toEqual([]);
});
