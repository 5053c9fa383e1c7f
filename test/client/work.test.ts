// baton.work(): the agent's life cycle in process, against a real server.
import { Baton, Blocked, Requeue } from "baton/client";
import type { Job, WorkIssue } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const statuses = async (ids: string[]) =>
  Object.fromEntries((await h.sql<{ id: string; status: string }>("SELECT id, status FROM issues WHERE id = ANY($1)", [ids])).map((r) => [r.id, r.status]));

async function issuesFor(co: Company, n: number, input: Record<string, unknown> = {}) {
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: Array.from({ length: n }, (_, i) => ({ title: `job ${i}`, assigneeAgentId: co.agents[0]!.id, ...input })),
  });
  return createIssues.map((i) => i.id);
}

it("with once, drains the queue: each issue handled once, every one DONE, the run finished", async () => {
  const co = await createCompany(h, 1);
  const ids = await issuesFor(co, 20);
  const handled: string[] = [];
  const jobs: Job[] = [];
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async (issue, job) => {
      handled.push(issue.id);
      jobs.push(job);
      await new Promise((r) => setTimeout(r, 5));
    },
    { concurrency: 4, once: true },
  );
  await worker.done;
  expect(handled.sort()).toEqual([...ids].sort());
  expect(Object.values(await statuses(ids))).toEqual(Array(20).fill("DONE"));
  expect(jobs.every((j) => j.attempt === 1 && j.lockEpoch >= 1 && !j.signal.aborted)).toBe(true);
  const run = await h.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [jobs[0]!.runId]);
  expect(run.status).toBe("SUCCEEDED");
});

it("a handler that throws Requeue leaves the issue OPEN with the attempt counted once", async () => {
  const co = await createCompany(h, 1);
  const [id] = await issuesFor(co, 1);
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    () => {
      void worker.stop(); // so that it is not taken again
      throw new Requeue("not now");
    },
    { concurrency: 1, idleWaitMs: 200 },
  );
  await worker.done;
  expect(await h.one("SELECT status, attempt_count FROM issues WHERE id = $1", [id])).toEqual({ status: "OPEN", attempt_count: 1 });
  const released = await h.one<{ reason: string }>("SELECT reason FROM lock_events WHERE issue_id = $1 AND kind = 'RELEASED'", [id]);
  expect(released.reason).toMatch(/REQUEUE.*not now/);
});

it("Blocked ends in BLOCKED and any other throw in FAILED, each with its message as the reason", async () => {
  const co = await createCompany(h, 1);
  const [blocked] = await issuesFor(co, 1);
  const [failed] = await issuesFor(co, 1, { maxAttempts: 1 }); // FAILED with no attempt left: ESCALATED, not claimed again
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    (issue: WorkIssue) => {
      if (issue.id === blocked) throw new Blocked("waiting on a review");
      throw new Error("the build broke");
    },
    { concurrency: 2, once: true },
  );
  await worker.done;
  expect(await statuses([blocked!, failed!])).toEqual({ [blocked!]: "BLOCKED", [failed!]: "ESCALATED" });
  const reasons = await h.sql<{ issue_id: string; reason: string }>("SELECT issue_id, reason FROM lock_events WHERE kind = 'RELEASED' AND issue_id = ANY($1)", [[blocked, failed]]);
  expect(reasons.find((r) => r.issue_id === blocked)?.reason).toMatch(/BLOCKED.*waiting on a review/);
  expect(reasons.find((r) => r.issue_id === failed)?.reason).toMatch(/FAILED.*the build broke/);
});

it("aborts job.signal with a reason the moment the hold is lost, and does not release the issue again", async () => {
  const co = await createCompany(h, 1);
  const [id] = await issuesFor(co, 1);
  let aborted: unknown = null;
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async (_issue, job) => {
      started();
      await new Promise<void>((resolve) =>
        job.signal.addEventListener("abort", () => {
          void worker.stop(); // the issue is OPEN again: this test's worker must not take it back
          resolve();
        }),
      );
      aborted = job.signal.reason;
    },
    { concurrency: 1, idleWaitMs: 200 },
  );
  await running;
  const { forceReleaseIssue } = await co.board.ok(Ops.ForceReleaseDocument, { issueId: id!, reason: "taken back by the board" });
  expect(forceReleaseIssue.__typename).toBe("IssueReleased");
  await eventually(() => (aborted ? true : undefined), "the handler to see its hold lost");
  expect(String((aborted as Error).message)).toMatch(/FORCE_RELEASED/);
  await worker.stop();
  const events = await h.sql<{ kind: string }>("SELECT kind FROM lock_events WHERE issue_id = $1 AND kind IN ('RELEASED', 'FORCE_RELEASED') ORDER BY seq", [id]);
  expect(events.map((e) => e.kind)).toEqual(["FORCE_RELEASED"]);
});

it("stop() lets a running handler finish, releases it, and finishes the run", async () => {
  const co = await createCompany(h, 1);
  const [id] = await issuesFor(co, 1);
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  let finish!: () => void;
  const gate = new Promise<void>((resolve) => (finish = resolve));
  let runId = "";
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async (_issue, job) => {
      runId = job.runId;
      started();
      await gate;
    },
    { concurrency: 1, idleWaitMs: 200 },
  );
  await running;
  const stopping = worker.stop();
  finish();
  await stopping;
  expect((await statuses([id!]))[id!]).toBe("DONE");
  expect((await h.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [runId])).status).toBe("SUCCEEDED");
});

it("refuses a key that is not an agent's", async () => {
  const co = await createCompany(h, 0);
  const worker = new Baton({ url: h.url, token: co.board.token! }).work(() => {});
  await expect(worker.done).rejects.toMatchObject({ name: "BatonError", code: "FORBIDDEN" });
});
