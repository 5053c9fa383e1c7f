// baton.work() and the work graph (issue 29), against a real server: the
// issue a handler gets carries payload and the graph's fields; what it returns
// is the issue's result; Requeue({ retryAfterSeconds }) is "not now" (no
// attempt spent, not claimable for that long); job.createSubIssues splits an
// issue, and with parentWaits the parent comes back once its sub-issues are
// DONE; an execution past maxExecutionSeconds is a lost hold like any other.
import { Baton, Blocked, Failed, ProblemError, Requeue } from "baton/client";
import type { WorkIssue } from "baton/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const workerOf = (co: Company) => new Baton({ url: h.url, token: co.agents[0]!.client.token! });

async function issuesFor(co: Company, inputs: Record<string, unknown>[]): Promise<string[]> {
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: inputs.map((input, i) => ({ title: `job ${i}`, assigneeAgentId: co.agents[0]!.id, ...input })),
  });
  return createIssues.map((i) => i.id);
}

interface Row {
  status: string;
  attempt_count: number;
  result: unknown;
  /** Seconds from the issue's last change (its release, on the database clock) to not_before; null when there is none. */
  delay: number | null;
}
const row = (id: string) =>
  h.one<Row>("SELECT status, attempt_count, result, round(extract(epoch FROM not_before - updated_at))::int AS delay FROM issues WHERE id = $1", [id]);

describe("what a handler is given and gives back", () => {
  it("the claimed issue carries payload, parentId, blockedBy, waitingOn and notBefore; the handler's return value is the result of DONE", async () => {
    const co = await createCompany(h, 1);
    const [blocker] = await issuesFor(co, [{ title: "blocker", priority: "CRITICAL" }]);
    const [id] = await issuesFor(co, [{ title: "uses the payload", payload: { repo: "acme/web", n: [1, 2] }, blockedBy: [blocker] }]);
    const [plain] = await issuesFor(co, [{ title: "returns nothing", priority: "LOW" }]);
    const seen: WorkIssue[] = [];
    const worker = workerOf(co).work(
      (issue) => {
        seen.push(issue);
        if (issue.id === id) return { pr: "https://example.test/pr/7", sum: (issue.payload as { n: number[] }).n.reduce((a, b) => a + b) };
        return undefined;
      },
      { once: true },
    );
    await worker.done;
    const got = seen.find((i) => i.id === id)!;
    expect(got).toMatchObject({ payload: { repo: "acme/web", n: [1, 2] }, parentId: null, blockedBy: [blocker], waitingOn: [], notBefore: null });
    expect(seen.map((i) => i.id)).toEqual([blocker, id, plain]); // the blocker first: the other waited on it
    expect(await row(id!)).toMatchObject({ status: "DONE", result: { pr: "https://example.test/pr/7", sum: 3 } });
    expect(await row(plain!)).toMatchObject({ status: "DONE", result: null });
  });

  it("Requeue({ retryAfterSeconds }) is 'not now': OPEN, not claimable for that long, the attempt given back; plain Requeue(reason) still counts it", async () => {
    const co = await createCompany(h, 1);
    const [later, plain] = await issuesFor(co, [{ title: "later", priority: "HIGH" }, { title: "plain" }]);
    const handled: string[] = [];
    const worker = workerOf(co).work(
      (issue) => {
        handled.push(issue.id);
        if (issue.id === later) throw new Requeue({ retryAfterSeconds: 60, reason: "rate limited" });
        throw new Requeue("not now");
      },
      { once: true },
    );
    // `plain` comes back at once, so the worker takes it until its attempts are spent; `later` waits its minute.
    await worker.done;
    expect(handled.filter((i) => i === later)).toHaveLength(1);
    expect(await row(later!)).toEqual({ status: "OPEN", attempt_count: 0, result: null, delay: 60 });
    expect(await row(plain!)).toEqual({ status: "ESCALATED", attempt_count: 3, result: null, delay: null });
    const reasons = await h.sql<{ reason: string }>("SELECT reason FROM lock_events WHERE issue_id = $1 AND kind = 'RELEASED'", [later]);
    expect(reasons.map((r) => r.reason)).toEqual([expect.stringMatching(/^REQUEUE: rate limited$/)]);
  });

  it("Blocked, Failed and Requeue carry a result; Failed({ retryAfterSeconds }) delays instead of the backoff; a bad retryAfterSeconds fails the issue", async () => {
    const co = await createCompany(h, 1);
    const [blocked, failed, requeued, bad] = await issuesFor(co, [
      { title: "blocked", priority: "CRITICAL" },
      { title: "failed", priority: "HIGH", retryDelaySeconds: 3600 },
      { title: "requeued", priority: "MEDIUM" },
      { title: "bad", priority: "LOW", maxAttempts: 1 },
    ]);
    const worker = workerOf(co).work(
      (issue) => {
        if (issue.id === blocked) throw new Blocked({ reason: "needs a human", result: { asked: "who owns billing?" } });
        if (issue.id === failed) throw new Failed({ reason: "the build broke", result: { log: "…" }, retryAfterSeconds: 30 });
        if (issue.id === requeued) throw new Requeue({ retryAfterSeconds: 120, result: { partial: true } });
        throw new Requeue({ retryAfterSeconds: 86_401 });
      },
      { once: true },
    );
    await worker.done;
    expect(await row(blocked!)).toEqual({ status: "BLOCKED", attempt_count: 1, result: { asked: "who owns billing?" }, delay: null });
    // 30 s as asked, not the backoff's hour; the attempt stays spent.
    expect(await row(failed!)).toEqual({ status: "OPEN", attempt_count: 1, result: { log: "…" }, delay: 30 });
    expect(await row(requeued!)).toEqual({ status: "OPEN", attempt_count: 0, result: { partial: true }, delay: 120 });
    expect(await row(bad!)).toMatchObject({ status: "ESCALATED", attempt_count: 1 });
    const reason = await h.one<{ reason: string }>("SELECT reason FROM lock_events WHERE issue_id = $1 AND kind IN ('RELEASED', 'ESCALATED')", [bad]);
    expect(reason.reason).toMatch(/FAILED: retryAfterSeconds must be a whole number of seconds from 0 to 86400, not 86401/);
  });

  it("a result that cannot be kept (over 64 KB, not JSON, or refused by the API) is left out: the issue is still DONE, and the log says why", async () => {
    const co = await createCompany(h, 1);
    const [big, cyclic, deep, fits] = await issuesFor(co, [
      { title: "big", priority: "CRITICAL" },
      { title: "cyclic", priority: "HIGH" },
      { title: "deep", priority: "MEDIUM" },
      { title: "fits", priority: "LOW" },
    ]);
    const nested = (depth: number): unknown => (depth === 0 ? "x" : [nested(depth - 1)]);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const log: { message: string; fields?: Record<string, unknown> }[] = [];
    const worker = workerOf(co).work(
      (issue) => {
        if (issue.id === big) return { text: "x".repeat(70_000) };
        if (issue.id === cyclic) return circular;
        if (issue.id === deep) return nested(100); // within 64 KB, deeper than the API takes
        return { text: "x".repeat(65_000) };
      },
      { once: true, onLog: (message, fields) => log.push({ message, ...(fields ? { fields } : {}) }) },
    );
    await worker.done;
    for (const id of [big!, cyclic!, deep!]) expect(await row(id)).toMatchObject({ status: "DONE", result: null });
    expect(((await row(fits!)).result as { text: string }).text).toHaveLength(65_000);
    const notKept = log.filter((l) => l.message === "result not kept");
    expect(notKept.map((l) => [l.fields?.issueId, l.fields?.why])).toEqual([
      [big, expect.stringMatching(/^it is 70011 bytes of JSON, over the 65536 the API keeps$/)],
      [cyclic, expect.stringMatching(/^it is not JSON \(/)],
      [deep, expect.stringMatching(/^the API refused it: .*nested/)],
    ]);
  });
});

describe("job.createSubIssues", () => {
  it("with parentWaits: the parent, released with Requeue, comes back (same agent) once every sub-issue is DONE, and sees their results", async () => {
    const co = await createCompany(h, 1);
    const [parent] = await issuesFor(co, [{ title: "ship the billing page", priority: "HIGH" }]);
    const order: string[] = [];
    let created: WorkIssue[] = [];
    const baton = workerOf(co);
    const worker = baton.work(
      async (issue, job) => {
        order.push(issue.title);
        if (issue.id !== parent) return { did: issue.title };
        if (issue.blockedBy.length === 0) {
          created = await job.createSubIssues(
            ["write the migration", "run the backfill"].map((title) => ({ title, assigneeAgentId: co.agents[0]!.id })),
            { parentWaits: true },
          );
          throw new Requeue("split into two");
        }
        // Back after its sub-issues: each is DONE, with what it produced.
        const { issue: again } = await baton.request<{ issue: { subIssues: { edges: { node: { title: string; status: string; result: unknown } }[] } } }>(
          "query SubIssues($id: ID!) { issue(id: $id) { subIssues { edges { node { title status result } } } } }",
          { id: issue.id },
        );
        return { parts: again.subIssues.edges.map((e) => e.node).sort((a, b) => a.title.localeCompare(b.title)) };
      },
      { once: true },
    );
    await worker.done;
    expect(created.map((i) => [i.title, i.parentId, i.status])).toEqual([
      ["write the migration", parent, "OPEN"],
      ["run the backfill", parent, "OPEN"],
    ]);
    // The parent first, then its sub-issues (created in one transaction: either order), then the parent again.
    expect([order[0], order.slice(1, 3).sort(), order[3], order.length]).toEqual([
      "ship the billing page",
      ["run the backfill", "write the migration"],
      "ship the billing page",
      4,
    ]);
    const done = await row(parent!);
    expect(done).toMatchObject({ status: "DONE", attempt_count: 2 });
    expect(done.result).toEqual({
      parts: [
        { title: "run the backfill", status: "DONE", result: { did: "run the backfill" } },
        { title: "write the migration", status: "DONE", result: { did: "write the migration" } },
      ],
    });
  });

  it("without the hold (taken back by the board): a ProblemError NotLockOwner, and nothing is created", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issuesFor(co, [{ title: "split me" }]);
    let thrown: unknown = null;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const worker = workerOf(co).work(
      async (_issue, job) => {
        started();
        await new Promise<void>((resolve) => job.signal.addEventListener("abort", () => resolve()));
        void worker.stop(); // the issue is OPEN again: this worker must not take it back
        thrown = await job.createSubIssues([{ title: "too late" }]).catch((err: unknown) => err);
      },
      { idleWaitMs: 200 },
    );
    await running;
    expect((await co.board.ok(Ops.ForceReleaseDocument, { issueId: id!, reason: "taken back" })).forceReleaseIssue.__typename).toBe("IssueReleased");
    await worker.done;
    expect(thrown).toBeInstanceOf(ProblemError);
    expect(thrown).toMatchObject({ code: "PROBLEM", typename: "NotLockOwner", problem: { __typename: "NotLockOwner", issueId: id } });
    expect(await h.sql("SELECT 1 FROM issues WHERE parent_id = $1", [id])).toEqual([]);
  });
});

describe("an execution past maxExecutionSeconds is a lost hold", () => {
  it("the sweep takes it back (EXECUTION_TIMED_OUT) while the run heartbeats: job.signal is aborted with it, and the worker releases nothing", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issuesFor(co, [{ title: "loops for ever", maxExecutionSeconds: 60 }]);
    let reason: unknown = null;
    let runId = "";
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const worker = workerOf(co).work(
      async (_issue, job) => {
        runId = job.runId;
        started();
        await new Promise<void>((resolve) => job.signal.addEventListener("abort", () => resolve()));
        void worker.stop(); // the issue is OPEN again: this worker must not take it back
        reason = job.signal.reason;
      },
      { idleWaitMs: 200 },
    );
    await running;
    // A minute held, without waiting one; the run's lease is live throughout.
    await h.sql("UPDATE issues SET execution_locked_at = now() - interval '61 seconds' WHERE id = $1", [id]);
    await sweep(h.db.prisma, h.bus);
    await eventually(() => (reason ? true : undefined), "the handler to see its hold lost");
    expect(String((reason as Error).message)).toMatch(/^RECOVERED: EXECUTION_TIMED_OUT$/);
    await worker.done;
    expect(await h.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [runId])).toEqual({ status: "SUCCEEDED" });
    const events = await h.sql<{ kind: string; reason: string | null }>("SELECT kind, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq", [id]);
    expect(events.map((e) => `${e.kind}${e.reason ? ` ${e.reason}` : ""}`)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "RECOVERED EXECUTION_TIMED_OUT"]);
  });
});
