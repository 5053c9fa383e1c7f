// The worker's ledger watch starts after the company's newest event, so a
// stream that cannot connect at first (here: the key's one stream slot is
// taken, and the SDK keeps trying) still replays what happened meanwhile: a
// hold lost while the watch was down aborts its job once it connects.
import { Baton } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
let narrow: string;
beforeAll(async () => {
  h = await startHarness();
  narrow = (await h.startInstance({ limits: { connectionsPerKey: 1 } })).url;
});
afterAll(() => h?.close());

it("a watch that cannot connect at first replays what it missed: a hold lost meanwhile aborts its job, and the worker releases nothing", async () => {
  const co = await createCompany(h, 1);
  const token = co.agents[0]!.client.token!;
  // One event in the ledger, so that the other stream shows it is connected by replaying it.
  const { createIssue: before } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "before", assigneeAgentId: co.agents[0]!.id } });
  const run = (await co.agents[0]!.client.ok(Ops.StartRunDocument)).startRun;
  await co.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: before.id });
  await co.agents[0]!.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: before.id, outcome: "BLOCKED" });
  // Another stream of the same key holds the instance's one slot for it.
  const other = new Baton({ url: narrow, token }).lockChanges({ companyId: co.id, afterSeq: "0" });
  await other.next();
  const first = other.next();
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "long", assigneeAgentId: co.agents[0]!.id } });
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  let reason: unknown = null;
  let runId = "";
  const worker = new Baton({ url: narrow, token }).work(
    async (_issue, job) => {
      if (runId) return; // the issue claimed again after the board took it: nothing to see
      runId = job.runId;
      started();
      await new Promise<void>((resolve) => job.signal.addEventListener("abort", () => resolve()));
      reason = job.signal.reason;
    },
    { idleWaitMs: 200 },
  );
  await running;
  await co.board.ok(Ops.ForceReleaseDocument, { issueId: createIssue.id, reason: "operator took it" });
  // The slot frees: the worker's stream connects, replaying from where it started.
  await other.return?.();
  await first.catch(() => {});
  await eventually(() => (reason ? true : undefined), "the lost hold to abort the job");
  expect(String((reason as Error).message)).toMatch(/FORCE_RELEASED/);
  await worker.stop();
  // The first hold's events, up to the claim that took the issue again: the worker released nothing of it.
  const kinds = (await h.sql<{ kind: string }>("SELECT kind::text FROM lock_events WHERE issue_id = $1 ORDER BY seq", [createIssue.id])).map((e) => e.kind);
  expect(kinds.slice(0, kinds.indexOf("CLAIMED", 1) === -1 ? undefined : kinds.indexOf("CLAIMED", 1))).toEqual([
    "CLAIMED",
    "EXECUTION_ACQUIRED",
    "FORCE_RELEASED",
  ]);
});
