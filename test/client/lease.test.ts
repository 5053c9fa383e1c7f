// A worker whose run dies under it (its lease lapsed and something timed it
// out) hears it at its next heartbeat: the running job's signal is aborted
// with the reason, the issue is not released by it, and it goes on with a new run.
import { Baton } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ leaseSeconds: 3 }); // a heartbeat every second
});
afterAll(() => h?.close());

it("a heartbeat answering RunNotActive aborts job.signal with the reason, and the worker starts a new run", async () => {
  const co = await createCompany(h, 1);
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "long job", assigneeAgentId: co.agents[0]!.id } });
  let reason: unknown = null;
  let firstRun = "";
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async (_issue, job) => {
      firstRun ||= job.runId;
      started();
      await new Promise<void>((resolve) => job.signal.addEventListener("abort", () => resolve()));
      reason = job.signal.reason;
    },
    { idleWaitMs: 200 },
  );
  await running;
  await h.sql("UPDATE heartbeat_runs SET status = 'TIMED_OUT', finished_at = now() WHERE id = $1", [firstRun]);
  await eventually(() => (reason ? true : undefined), "the next heartbeat to find the run dead", 10_000);
  expect(String((reason as Error).message)).toMatch(new RegExp(`run ${firstRun} is no longer active`));
  await eventually(
    async () => ((await h.sql("SELECT 1 FROM heartbeat_runs WHERE agent_id = $1 AND status = 'RUNNING'", [co.agents[0]!.id])).length === 1 ? true : undefined),
    "a new run",
  );
  await worker.stop();
  // The dead run's hold is recovery's (or an adopter's) to end, not this worker's.
  const released = await h.sql("SELECT 1 FROM lock_events WHERE issue_id = $1 AND kind = 'RELEASED' AND run_id = $2", [createIssue.id, firstRun]);
  expect(released).toEqual([]);
});
