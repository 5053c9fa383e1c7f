// The worker's one request per job: it claims with startExecution and takes
// its next issue in each release. An issue it requeues can come straight back
// as that next one: the new job is a new hold (a new epoch), and the ledger's
// RELEASED of the old one must not be taken for its loss. A hold this run
// loses and claims again ends the earlier job's hold, never the new one's.
import { Baton, Requeue } from "baton/client";
import type { LockChange, LockChangesFilter } from "baton/client";
import { BatonError } from "../../src/client/errors.js";
import { work } from "../../src/client/work.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const operations = async (agentId: string) =>
  (await h.sql<{ kind: string }>("SELECT e.kind::text FROM lock_events e WHERE e.agent_id = $1 ORDER BY e.seq", [agentId])).map((e) => e.kind);

/** The worker's live events, held back until `gate` opens: they reach it late, as over a slow link. Ends when the worker ends it. */
function heldBack(events: AsyncIterableIterator<LockChange>, gate: Promise<void>): AsyncIterableIterator<LockChange> {
  return {
    async next() {
      const next = await events.next();
      await gate;
      return next;
    },
    return: async () => (await events.return?.()) ?? { done: true, value: undefined },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

it("a requeued issue that comes straight back as the release's next is worked again, not taken for lost", async () => {
  const co = await createCompany(h, 1);
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "twice", assigneeAgentId: co.agents[0]!.id } });
  const baton = new Baton({ url: h.url, token: co.agents[0]!.client.token! });
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const delivered: string[] = [];
  const seen: { epoch: number; aborted: boolean }[] = [];
  const worker = work(
    {
      request: (document, variables, options) => baton.request(document, variables, options),
      lockChanges: (filter: LockChangesFilter) => heldBack(baton.lockChanges(filter), gate),
    },
    async (_issue, job) => {
      seen.push({ epoch: job.lockEpoch, aborted: false });
      if (seen.length === 1) throw new Requeue("not yet");
      // The second hold has started: now the first hold's events arrive, RELEASED among them.
      open();
      await eventually(() => (delivered.includes("RELEASED") ? true : undefined), "the first hold's RELEASED to reach the worker");
      await eventually(() => (job.signal.aborted ? true : undefined), "a loss", 1_000).catch(() => {});
      seen[1]!.aborted = job.signal.aborted;
    },
    { once: true, idleWaitMs: 100, onLog: () => {} },
  );
  // What the worker's stream delivers, seen from a stream of our own held back by the same gate.
  const ours = heldBack(baton.lockChanges({ companyId: co.id, afterSeq: "0" }), gate);
  const watcher = (async () => {
    for await (const e of ours) delivered.push(e.kind);
  })();
  await worker.done;
  expect(seen).toEqual([
    { epoch: 1, aborted: false },
    { epoch: 2, aborted: false },
  ]);
  const issue = await h.one<{ status: string; attempt_count: number }>("SELECT status, attempt_count FROM issues WHERE id = $1", [createIssue.id]);
  expect(issue).toEqual({ status: "DONE", attempt_count: 2 });
  // One request per job: no acquireExecution at all, each claim with its execution lock.
  expect(await operations(co.agents[0]!.id)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "RELEASED", "CLAIMED", "EXECUTION_ACQUIRED", "RELEASED"]);
  await ours.return?.();
  await watcher;
});

it("an issue the release's next claims as the worker stops is given back unworked, its attempt with it", async () => {
  const co = await createCompany(h, 1);
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: ["first", "second"].map((title) => ({ title, assigneeAgentId: co.agents[0]!.id })),
  });
  const [first, second] = createIssues.map((i) => i.id);
  const baton = new Baton({ url: h.url, token: co.agents[0]!.client.token! });
  const handled: string[] = [];
  let stopWorker: () => Promise<void> = async () => {};
  let stopped: Promise<void> | null = null;
  const worker = work(
    {
      // The worker is told to stop while the release that asks for the next issue is on its way.
      request: (document, variables, options) => {
        if ((variables as { next?: unknown }).next && !stopped) stopped = stopWorker();
        return baton.request(document, variables, options);
      },
      lockChanges: (filter: LockChangesFilter) => baton.lockChanges(filter),
    },
    async (issue) => {
      handled.push(issue.title);
    },
    { idleWaitMs: 100, onLog: () => {} },
  );
  stopWorker = () => worker.stop();
  await worker.done;
  await stopped;
  expect(handled).toEqual(["first"]);
  const rows = await h.sql<{ id: string; status: string; attempt_count: number }>(
    "SELECT id, status::text, attempt_count FROM issues WHERE id = ANY($1) ORDER BY title",
    [[first, second]],
  );
  expect(rows).toEqual([
    { id: first, status: "DONE", attempt_count: 1 },
    { id: second, status: "OPEN", attempt_count: 0 },
  ]);
  const reasons = (await h.sql<{ reason: string }>("SELECT reason FROM lock_events WHERE issue_id = $1 AND kind = 'RELEASED'", [second])).map((e) => e.reason);
  expect(reasons).toEqual(["REQUEUE: the worker is stopping: not started"]);
});

it("a worker that cannot read where its watch starts watches from now, and leaves no run behind", async () => {
  const co = await createCompany(h, 1);
  await co.board.ok(Ops.CreateIssueDocument, { input: { title: "one", assigneeAgentId: co.agents[0]!.id } });
  const baton = new Baton({ url: h.url, token: co.agents[0]!.client.token! });
  const handled: string[] = [];
  const worker = work(
    {
      request: (document, variables, options) => {
        const name = (document as unknown as { definitions?: readonly { name?: { value: string } }[] }).definitions?.[0]?.name?.value;
        if (name === "WorkNewestSeq") return Promise.reject(new BatonError("cannot reach the API", "UNREACHABLE"));
        return baton.request(document, variables, options);
      },
      lockChanges: (filter: LockChangesFilter) => baton.lockChanges(filter),
    },
    async (issue) => {
      handled.push(issue.title);
    },
    { once: true, idleWaitMs: 100, onLog: () => {} },
  );
  await worker.done;
  expect(handled).toEqual(["one"]);
  expect(await h.sql("SELECT status::text FROM heartbeat_runs WHERE agent_id = $1", [co.agents[0]!.id])).toEqual([{ status: "SUCCEEDED" }]);
});

it("a job whose issue the run claims again while it still runs counts against the concurrency until its handler returns", async () => {
  const co = await createCompany(h, 1);
  const agentId = co.agents[0]!.id;
  const { createIssue: x } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "x", priority: "CRITICAL", assigneeAgentId: agentId } });
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: ["y", "z"].map((title) => ({ title, priority: "LOW" as const, assigneeAgentId: agentId })) });
  const baton = new Baton({ url: h.url, token: co.agents[0]!.client.token! });
  let now = 0;
  let most = 0;
  const started: string[] = [];
  let letGo!: () => void;
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  let letY!: () => void;
  const yGate = new Promise<void>((resolve) => (letY = resolve));
  const worker = baton.work(
    async (issue, job) => {
      started.push(`${issue.title}@${job.lockEpoch}`);
      most = Math.max(most, ++now);
      try {
        // The first hold of x runs on after its hold ends (a handler slow to stop), and the second with it, until the test lets them go.
        if (issue.title === "x") await gate;
        // y ends once x is back in the queue: its release's next claim takes x again (CRITICAL), for this same run.
        if (issue.title === "y") await yGate;
      } finally {
        now--;
      }
    },
    { concurrency: 2, idleWaitMs: 100, once: true, onLog: () => {} },
  );
  await eventually(() => (started.includes("x@1") && started.includes("y@1") ? true : undefined), "x and y to start");
  await co.board.ok(Ops.ForceReleaseDocument, { issueId: x.id, reason: "the board takes it back" });
  letY();
  await eventually(() => (started.includes("x@2") ? true : undefined), "x to be claimed again");
  // x@1 still runs: with x@2 that is the whole concurrency, so z waits for one of them.
  await eventually(() => (started.includes("z@1") ? true : undefined), "z to start too soon", 1_000).catch(() => {});
  expect(most).toBeLessThanOrEqual(2);
  expect(started).not.toContain("z@1");
  letGo();
  await worker.done;
  expect(started).toContain("z@1");
  expect(most).toBeLessThanOrEqual(2);
});

it("a worker whose new run cannot start for a moment (the API away) tries again after the wait, and goes on", async () => {
  const co = await createCompany(h, 1);
  await co.board.ok(Ops.CreateIssueDocument, { input: { title: "one", assigneeAgentId: co.agents[0]!.id } });
  const baton = new Baton({ url: h.url, token: co.agents[0]!.client.token! });
  const handled: string[] = [];
  const failing = new Set(["WorkClaim", "WorkStartRun"]);
  let starts = 0;
  const worker = work(
    {
      // The first claim gets no answer (so its run is finished and a new one started), and that new run's start fails once.
      request: (document, variables, options) => {
        const name = (document as unknown as { definitions?: readonly { name?: { value: string } }[] }).definitions?.[0]?.name?.value ?? "";
        if (name === "WorkStartRun" && ++starts === 1) return baton.request(document, variables, options);
        if (failing.delete(name)) return Promise.reject(new BatonError("cannot reach the API: other side closed", "UNREACHABLE"));
        return baton.request(document, variables, options);
      },
      lockChanges: (filter: LockChangesFilter) => baton.lockChanges(filter),
    },
    async (issue) => {
      handled.push(issue.title);
    },
    { once: true, idleWaitMs: 50, onLog: () => {} },
  );
  await worker.done;
  expect(handled).toEqual(["one"]);
  expect(starts).toBe(3);
});
