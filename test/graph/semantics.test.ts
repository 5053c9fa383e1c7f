// The work graph's rules one at a time (docs/lifecycle.md, "The work graph"),
// through GraphQL against a real server and database. Time is the database's:
// delays are backdated, never slept through. The races are in races.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { wakeDueIssues } from "../../src/locks/recovery/wakeDueIssues.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const none = { publish: () => {} };

async function issue(co: Company, input: Partial<Ops.CreateIssueInput> = {}) {
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "work", assigneeAgentId: co.agents[0]!.id, ...input } });
  return createIssue;
}

async function run(co: Company, agent = 0) {
  return (await co.agents[agent]!.client.ok(Ops.StartRunDocument)).startRun.id;
}

async function claimNext(co: Company, runId: string, agent = 0) {
  return (await co.agents[agent]!.client.ok(Ops.ClaimIssueDocument, { runId })).claimIssue;
}

async function claimById(co: Company, runId: string, issueId: string, agent = 0) {
  return (await co.agents[agent]!.client.ok(Ops.ClaimIssueDocument, { runId, issueId })).claimIssue;
}

/** Claim, start and release `issueId` as agent 0 with `outcome`. */
async function finish(co: Company, runId: string, issueId: string, outcome: Ops.ReleaseOutcome = "DONE") {
  const agent = co.agents[0]!.client;
  expect((await claimById(co, runId, issueId)).__typename).toBe("IssueClaimed");
  await agent.ok(Ops.AcquireExecutionDocument, { runId, issueId });
  const { releaseIssue } = await agent.ok(Ops.ReleaseIssueDocument, { runId, issueId, outcome });
  expect(releaseIssue.__typename).toBe("IssueReleased");
}

const read = async (co: Company, id: string) => (await co.board.ok(Ops.IssueGraphDocument, { id })).issue!;

/** Seconds from now to the issue's not_before, on the database clock. */
const delaySeconds = async (id: string) =>
  Number((await h.one<{ s: string }>("SELECT extract(epoch FROM not_before - now()) AS s FROM issues WHERE id = $1", [id])).s);

describe("dependencies", () => {
  it("claim-next passes an issue until every blocker is DONE; a claim by id answers IssueWaiting and changes nothing", async () => {
    const co = await createCompany(h, 1);
    const first = await issue(co, { title: "write the migration", priority: "LOW" });
    const second = await issue(co, { title: "run the backfill", priority: "CRITICAL", blockedBy: [first.id] });
    expect(second).toMatchObject({ blockedBy: [first.id], waitingOn: [first.id], ready: false });
    const r = await run(co);

    const before = await h.snapshot();
    const waiting = await claimById(co, r, second.id);
    expect(waiting).toMatchObject({ __typename: "IssueWaiting", issueId: second.id, waitingOn: [first.id], notBefore: null });
    expect(await h.snapshot()).toEqual(before);

    // CRITICAL but waiting: claim-next takes the LOW one
    const next = await claimNext(co, r);
    expect(next.__typename === "IssueClaimed" && next.issue.id).toBe(first.id);
    expect((await claimNext(co, r)).__typename).toBe("NoIssueAvailable");
    await co.agents[0]!.client.ok(Ops.AcquireExecutionDocument, { runId: r, issueId: first.id });
    await co.agents[0]!.client.ok(Ops.ReleaseIssueDocument, { runId: r, issueId: first.id, outcome: "DONE" });

    expect(await read(co, second.id)).toMatchObject({ waitingOn: [], blockedBy: [first.id], ready: true });
    const now = await claimNext(co, r);
    expect(now.__typename === "IssueClaimed" && now.issue.id).toBe(second.id);
  });

  it("a CANCELLED blocker keeps its dependent waiting (counted by the audit) until the dependency is removed", async () => {
    const co = await createCompany(h, 1);
    const blocker = await issue(co);
    const dependent = await issue(co, { blockedBy: [blocker.id] });
    await co.board.ok(Ops.UpdateIssueDocument, { id: blocker.id, input: { status: "CANCELLED" } });
    const audit = async () => (await co.board.ok(Ops.GraphAuditDocument, { companyId: co.id })).lockAudit;
    expect(await audit()).toMatchObject({ waitingOnCancelled: 1, miscountedWaits: 0 });
    expect(await read(co, dependent.id)).toMatchObject({ waitingOn: [blocker.id], ready: false });

    const { removeDependency } = await co.board.ok(Ops.RemoveDependencyDocument, { issueId: dependent.id, blockedById: blocker.id });
    expect(removeDependency).toMatchObject({ __typename: "DependencyRemoved", issue: { blockedBy: [], waitingOn: [], ready: true } });
    expect(await audit()).toMatchObject({ waitingOnCancelled: 0, miscountedWaits: 0 });
    const r = await run(co);
    const claimed = await claimNext(co, r);
    expect(claimed.__typename === "IssueClaimed" && claimed.issue.id).toBe(dependent.id);
  });

  it("a claim by id checks waiting after alreadyHeld and before a full key; adopting a dead holder's issue ignores its blockers", async () => {
    const co = await createCompany(h, 2);
    await co.board.ok(Ops.SetConcurrencyLimitDocument, { key: "repo", maxActive: 1 });
    const filler = await issue(co, { concurrencyKey: "repo" });
    const blocker = await issue(co, { assigneeAgentId: null });
    const waiting = await issue(co, { concurrencyKey: "repo", blockedBy: [blocker.id] });
    const r = await run(co);
    await claimById(co, r, filler.id);
    // the key is full, and the issue waits: waiting is said first
    expect((await claimById(co, r, waiting.id)).__typename).toBe("IssueWaiting");

    const held = await issue(co, { assigneeAgentId: null });
    const dead = await run(co);
    expect((await claimById(co, dead, held.id)).__typename).toBe("IssueClaimed");
    await co.board.ok(Ops.AddDependencyDocument, { issueId: held.id, blockedById: blocker.id });
    // held by its own run: alreadyHeld comes before waiting
    expect(await claimById(co, dead, held.id)).toMatchObject({ __typename: "IssueClaimed", alreadyHeld: true });
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [dead]);
    const other = await run(co, 1);
    const adopted = await co.agents[1]!.client.ok(Ops.ClaimIssueDocument, { runId: other, issueId: held.id, expectedStatuses: ["CLAIMED"] });
    expect(adopted.claimIssue).toMatchObject({ __typename: "IssueClaimed", adopted: true, issue: { waitingOn: [blocker.id] } });
  });

  it("refuses an edge that would close a cycle, with the cycle's path; a self-edge is a cycle of one", async () => {
    const co = await createCompany(h, 1);
    const a = await issue(co);
    const b = await issue(co, { blockedBy: [a.id] });
    const c = await issue(co, { blockedBy: [b.id] });
    const before = await h.snapshot();
    const cycle = await co.board.ok(Ops.AddDependencyDocument, { issueId: a.id, blockedById: c.id });
    // c waits on b, which waits on a: a waiting on c closes c → b → a
    expect(cycle.addDependency).toMatchObject({ __typename: "DependencyCycle", path: [c.id, b.id, a.id] });
    const self = await co.board.ok(Ops.AddDependencyDocument, { issueId: a.id, blockedById: a.id });
    expect(self.addDependency).toMatchObject({ __typename: "DependencyCycle", path: [a.id] });
    expect(await h.snapshot()).toEqual(before);
  });

  it("a blocker of another company is not found: addDependency answers IssueNotFound, createIssue creates nothing", async () => {
    const co = await createCompany(h, 1);
    const other = await createCompany(h, 1);
    const theirs = await issue(other);
    const mine = await issue(co);
    const added = await co.board.ok(Ops.AddDependencyDocument, { issueId: mine.id, blockedById: theirs.id });
    expect(added.addDependency).toMatchObject({ __typename: "IssueNotFound", issueId: theirs.id });
    const before = await h.snapshot();
    expect(await co.board.errorCode(Ops.CreateIssueDocument, { input: { title: "x", blockedBy: [theirs.id] } })).toBe("NOT_FOUND");
    expect(await h.snapshot()).toEqual(before);
  });

  it("an agent changes the dependencies of an issue its run holds, and of no other; the hold is kept", async () => {
    const co = await createCompany(h, 1);
    const held = await issue(co);
    const free = await issue(co);
    const blocker = await issue(co, { assigneeAgentId: null });
    const r = await run(co);
    expect((await claimById(co, r, held.id)).__typename).toBe("IssueClaimed");
    const agent = co.agents[0]!.client;
    const added = await agent.ok(Ops.AddDependencyDocument, { issueId: held.id, blockedById: blocker.id, runId: r });
    expect(added.addDependency).toMatchObject({
      __typename: "DependencyAdded",
      issue: { status: "CLAIMED", checkoutRunId: r, waitingOn: [blocker.id] },
    });
    const refused = await agent.ok(Ops.AddDependencyDocument, { issueId: free.id, blockedById: blocker.id, runId: r });
    expect(refused.addDependency).toMatchObject({ __typename: "NotLockOwner", issueId: free.id, ownerRunId: null });
    expect(await agent.errorCode(Ops.AddDependencyDocument, { issueId: held.id, blockedById: blocker.id })).toBe("BAD_USER_INPUT");
    // released, it waits: the edge matters from the next claim
    await agent.ok(Ops.ReleaseIssueDocument, { runId: r, issueId: held.id, outcome: "REQUEUE" });
    expect((await claimById(co, r, held.id)).__typename).toBe("IssueWaiting");
    const removed = await co.board.ok(Ops.RemoveDependencyDocument, { issueId: held.id, blockedById: blocker.id });
    expect(removed.removeDependency).toMatchObject({ __typename: "DependencyRemoved", issue: { ready: true } });
  });
});

describe("sub-issues", () => {
  it("an agent splits its issue; with parentWaits the parent comes back to it once every sub-issue is DONE", async () => {
    const co = await createCompany(h, 2);
    const parent = await issue(co, { title: "ship the billing page" });
    const r = await run(co);
    expect((await claimById(co, r, parent.id)).__typename).toBe("IssueClaimed");
    const agent = co.agents[0]!.client;
    const { createSubIssues } = await agent.ok(Ops.CreateSubIssuesDocument, {
      runId: r,
      parentId: parent.id,
      parentWaits: true,
      inputs: [{ title: "api" }, { title: "page", assigneeAgentId: co.agents[1]!.id }],
    });
    if (createSubIssues.__typename !== "SubIssuesCreated") throw new Error(createSubIssues.__typename);
    const subs = createSubIssues.issues;
    expect(subs.map((s) => [s.title, s.parentId, s.assigneeAgentId])).toEqual([
      ["api", parent.id, null],
      ["page", parent.id, co.agents[1]!.id],
    ]);
    expect(createSubIssues.parent).toMatchObject({ status: "CLAIMED", waitingOn: subs.map((s) => s.id) });
    const page = (await co.board.ok(Ops.IssueGraphDocument, { id: parent.id, first: 1 })).issue!.subIssues;
    expect(page.edges.map((e) => e.node.id)).toEqual([subs[0]!.id]);
    expect(page.pageInfo.hasNextPage).toBe(true);

    await agent.ok(Ops.ReleaseIssueDocument, { runId: r, issueId: parent.id, outcome: "REQUEUE" });
    expect((await claimNext(co, r)).__typename).toBe("NoIssueAvailable");
    // the pool's sub-issue, then the other agent's
    await co.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: r, issueId: subs[0]!.id });
    await agent.ok(Ops.AcquireExecutionDocument, { runId: r, issueId: subs[0]!.id });
    await agent.ok(Ops.ReleaseIssueDocument, { runId: r, issueId: subs[0]!.id, outcome: "DONE" });
    expect((await claimNext(co, r)).__typename).toBe("NoIssueAvailable");
    const r2 = await run(co, 1);
    const other = co.agents[1]!.client;
    await other.ok(Ops.ClaimIssueDocument, { runId: r2, issueId: subs[1]!.id });
    await other.ok(Ops.AcquireExecutionDocument, { runId: r2, issueId: subs[1]!.id });
    await other.ok(Ops.ReleaseIssueDocument, { runId: r2, issueId: subs[1]!.id, outcome: "DONE" });
    const back = await claimNext(co, r);
    expect(back.__typename === "IssueClaimed" && back.issue.id).toBe(parent.id);
    const { issues } = await co.board.ok(Ops.IssuesFilteredDocument, { companyId: co.id, parentId: parent.id });
    expect(issues.edges.map((e) => e.node.status)).toEqual(["DONE", "DONE"]);
  });

  it("only the run holding the parent creates sub-issues; a sub-issue may not wait on a parent that waits on it", async () => {
    const co = await createCompany(h, 1);
    const parent = await issue(co);
    const r = await run(co);
    const agent = co.agents[0]!.client;
    const before = await h.snapshot();
    const refused = await agent.ok(Ops.CreateSubIssuesDocument, { runId: r, parentId: parent.id, inputs: [{ title: "x" }] });
    expect(refused.createSubIssues).toMatchObject({ __typename: "NotLockOwner", issueId: parent.id });
    await claimById(co, r, parent.id);
    expect(
      await agent.errorCode(Ops.CreateSubIssuesDocument, {
        runId: r,
        parentId: parent.id,
        parentWaits: true,
        inputs: [{ title: "x", blockedBy: [parent.id] }],
      }),
    ).toBe("BAD_USER_INPUT");
    await agent.ok(Ops.FinishRunDocument, { runId: r, status: "SUCCEEDED" });
    const dead = await agent.ok(Ops.CreateSubIssuesDocument, { runId: r, parentId: parent.id, inputs: [{ title: "x" }] });
    expect(dead.createSubIssues.__typename).toBe("RunNotActive");
    // finishing the run released the parent; no sub-issue or edge was ever made
    expect(await h.one("SELECT count(*)::int AS n FROM issues WHERE parent_id = $1", [parent.id])).toEqual({ n: 0 });
    expect(before.issue_dependencies).toEqual((await h.snapshot()).issue_dependencies);
  });
});

describe("delays and backoff", () => {
  it("a notBefore ahead keeps an issue from claim-next and answers IssueWaiting by id; once past and woken, it is claimed", async () => {
    const co = await createCompany(h, 1);
    const later = await issue(co, { notBefore: new Date(Date.now() + 3_600_000).toISOString() });
    expect(later).toMatchObject({ ready: false, waitingOn: [] });
    const r = await run(co);
    expect((await claimNext(co, r)).__typename).toBe("NoIssueAvailable");
    expect(await claimById(co, r, later.id)).toMatchObject({ __typename: "IssueWaiting", waitingOn: [], notBefore: later.notBefore });
    await h.sql("UPDATE issues SET not_before = now() - interval '1 second' WHERE id = $1", [later.id]);
    // ready on the clock at once; claim-next's index once the wake-up has seen it
    expect((await read(co, later.id)).ready).toBe(true);
    await wakeDueIssues(h.db.prisma);
    const claimed = await claimNext(co, r);
    expect(claimed.__typename === "IssueClaimed" && claimed.issue.id).toBe(later.id);
  });

  it("a FAILED attempt waits retryDelaySeconds × 2^(attempts − 1); the last one escalates without a delay", async () => {
    const co = await createCompany(h, 1);
    const flaky = await issue(co, { retryDelaySeconds: 60, maxAttempts: 3 });
    const r = await run(co);
    await finish(co, r, flaky.id, "FAILED");
    expect((await read(co, flaky.id)).status).toBe("OPEN");
    expect(await delaySeconds(flaky.id)).toBeGreaterThan(59);
    expect(await delaySeconds(flaky.id)).toBeLessThanOrEqual(60);
    expect((await claimNext(co, r)).__typename).toBe("NoIssueAvailable");
    await h.sql("UPDATE issues SET not_before = now() WHERE id = $1", [flaky.id]);
    await wakeDueIssues(h.db.prisma);
    await finish(co, r, flaky.id, "FAILED");
    expect(await delaySeconds(flaky.id)).toBeGreaterThan(119);
    expect(await delaySeconds(flaky.id)).toBeLessThanOrEqual(120);
    await h.sql("UPDATE issues SET not_before = now() WHERE id = $1", [flaky.id]);
    await wakeDueIssues(h.db.prisma);
    const before = Number((await h.one<{ s: string }>("SELECT extract(epoch FROM not_before) AS s FROM issues WHERE id = $1", [flaky.id])).s);
    await finish(co, r, flaky.id, "FAILED");
    expect(await read(co, flaky.id)).toMatchObject({ status: "ESCALATED", attemptCount: 3 });
    expect(Number((await h.one<{ s: string }>("SELECT extract(epoch FROM not_before) AS s FROM issues WHERE id = $1", [flaky.id])).s)).toBe(before);
  });

  it("retryAfterSeconds: REQUEUE from IN_PROGRESS gives the attempt back and waits; with DONE it is refused and changes nothing", async () => {
    const co = await createCompany(h, 1);
    const limited = await issue(co, { maxAttempts: 1 });
    const r = await run(co);
    const agent = co.agents[0]!.client;
    for (let round = 0; round < 3; round++) {
      await claimById(co, r, limited.id);
      await agent.ok(Ops.AcquireExecutionDocument, { runId: r, issueId: limited.id });
      if (round === 0) {
        const before = await h.snapshot();
        expect(await agent.errorCode(Ops.ReleaseIssueLaterDocument, { runId: r, issueId: limited.id, outcome: "DONE", retryAfterSeconds: 5 })).toBe(
          "BAD_USER_INPUT",
        );
        expect(await agent.errorCode(Ops.ReleaseIssueLaterDocument, { runId: r, issueId: limited.id, outcome: "REQUEUE", retryAfterSeconds: 86_401 })).toBe(
          "BAD_USER_INPUT",
        );
        expect(await h.snapshot()).toEqual(before);
      }
      const { releaseIssue } = await agent.ok(Ops.ReleaseIssueLaterDocument, { runId: r, issueId: limited.id, outcome: "REQUEUE", retryAfterSeconds: 30 });
      // its only attempt, given back each time: rate-limited three times, never escalated
      expect(releaseIssue).toMatchObject({ __typename: "IssueReleased", issue: { status: "OPEN", attemptCount: 0, ready: false } });
      expect(await delaySeconds(limited.id)).toBeGreaterThan(29);
      await h.sql("UPDATE issues SET not_before = now() WHERE id = $1", [limited.id]);
    }
    expect((await read(co, limited.id)).lockEpoch).toBe(3);
  });

  it("the sweep charges a dead run's attempt and applies the backoff; finishRun and forceRelease add no delay", async () => {
    const co = await createCompany(h, 1);
    const a = await issue(co, { retryDelaySeconds: 10 });
    const b = await issue(co, { retryDelaySeconds: 10 });
    const r = await run(co);
    await claimById(co, r, a.id);
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [r]);
    await sweep(h.db.prisma, none);
    expect(await read(co, a.id)).toMatchObject({ status: "OPEN", attemptCount: 1, ready: false });
    expect(await delaySeconds(a.id)).toBeGreaterThan(9);
    const r2 = await run(co);
    await claimById(co, r2, b.id);
    await co.agents[0]!.client.ok(Ops.FinishRunDocument, { runId: r2, status: "SUCCEEDED" });
    expect(await read(co, b.id)).toMatchObject({ status: "OPEN", notBefore: null, ready: true });
  });
});

describe("runaway executions", () => {
  it("an execution held past maxExecutionSeconds is taken back by the sweep while its run heartbeats: EXECUTION_TIMED_OUT, attempt charged", async () => {
    const co = await createCompany(h, 1);
    const runaway = await issue(co, { maxExecutionSeconds: 60, retryDelaySeconds: 5 });
    const calm = await issue(co, { maxExecutionSeconds: 3600 });
    const r = await run(co);
    const agent = co.agents[0]!.client;
    for (const i of [runaway, calm]) {
      await claimById(co, r, i.id);
      await agent.ok(Ops.AcquireExecutionDocument, { runId: r, issueId: i.id });
    }
    await h.sql("UPDATE issues SET execution_locked_at = now() - interval '61 seconds', claimed_at = now() - interval '61 seconds' WHERE id = ANY($1)", [
      [runaway.id, calm.id],
    ]);
    await agent.ok(Ops.HeartbeatRunDocument, { runId: r });
    const counts = await sweep(h.db.prisma, none);
    expect(counts.recoveredIssues).toBe(1);
    expect(await read(co, runaway.id)).toMatchObject({ status: "OPEN", attemptCount: 1, checkoutRunId: null, ready: false });
    expect(await read(co, calm.id)).toMatchObject({ status: "IN_PROGRESS", checkoutRunId: r });
    await h.settled(co.id);
    const { lockEvents } = await co.board.ok(Ops.LockEventsDocument, { companyId: co.id, issueId: runaway.id });
    expect(lockEvents.at(-1)).toMatchObject({ kind: "RECOVERED", reason: "EXECUTION_TIMED_OUT", runId: r });
    // the old holder learns it as any lost hold
    const late = await agent.ok(Ops.ReleaseIssueDocument, { runId: r, issueId: runaway.id, outcome: "DONE" });
    expect(late.releaseIssue.__typename).toBe("NotLockOwner");
  });
});

describe("idempotent creation, payload and result", () => {
  it("a create whose key exists answers that issue and creates nothing; within one call the first input wins", async () => {
    const co = await createCompany(h, 1);
    const first = await issue(co, { idempotencyKey: "deploy-42", title: "deploy" });
    const again = await issue(co, { idempotencyKey: "deploy-42", title: "something else", priority: "CRITICAL" });
    expect(again).toMatchObject({ id: first.id, title: "deploy", idempotencyKey: "deploy-42" });
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: [{ title: "a", idempotencyKey: "k" }, { title: "b", idempotencyKey: "k" }, { title: "c", idempotencyKey: "deploy-42" }, { title: "d" }],
    });
    expect(createIssues[0]!.id).toBe(createIssues[1]!.id);
    expect((await read(co, createIssues[1]!.id)).title).toBe("a");
    expect(createIssues[2]!.id).toBe(first.id);
    expect(await h.one("SELECT count(*)::int AS n FROM issues WHERE company_id = $1", [co.id])).toEqual({ n: 3 });
    // another company's key is its own
    const other = await createCompany(h, 1);
    expect((await issue(other, { idempotencyKey: "deploy-42" })).id).not.toBe(first.id);
  });

  it("keeps the payload given at creation and the result given at release, on any outcome", async () => {
    const co = await createCompany(h, 1);
    const payload = { repo: "acme/web", files: ["a.ts", "b.ts"], depth: { n: 1 } };
    const job = await issue(co, { payload });
    expect(job.payload).toEqual(payload);
    const r = await run(co);
    await claimById(co, r, job.id);
    await co.agents[0]!.client.ok(Ops.AcquireExecutionDocument, { runId: r, issueId: job.id });
    const result = { pr: "https://example.com/pr/1", summary: "done" };
    const { releaseIssue } = await co.agents[0]!.client.ok(Ops.ReleaseIssueLaterDocument, { runId: r, issueId: job.id, outcome: "BLOCKED", result });
    expect(releaseIssue).toMatchObject({ __typename: "IssueReleased", issue: { status: "BLOCKED", result, payload } });
    const big = { blob: "x".repeat(70_000) };
    expect(await co.board.errorCode(Ops.CreateIssueDocument, { input: { title: "big", payload: big } })).toBe("BAD_USER_INPUT");
    // strings are checked as they are: a backslash and "u0000" is text, a NUL or half a surrogate pair is refused
    expect((await issue(co, { payload: { path: "C:\\u0000dir" } })).payload).toEqual({ path: "C:\\u0000dir" });
    for (const bad of [{ s: "a\u0000b" }, { "\ud800": 1 }, ["\udc00"]]) {
      expect(await co.board.errorCode(Ops.CreateIssueDocument, { input: { title: "bad", payload: bad } }), JSON.stringify(bad)).toBe("BAD_USER_INPUT");
    }
    let deep: unknown = 1;
    for (let i = 0; i < 100; i++) deep = [deep];
    expect(await co.board.errorCode(Ops.CreateIssueDocument, { input: { title: "deep", payload: deep } })).toBe("BAD_USER_INPUT");
  });

  it("checks the new inputs before anything runs", async () => {
    const co = await createCompany(h, 1);
    const before = await h.snapshot();
    for (const input of [
      { title: "x", retryDelaySeconds: -1 },
      { title: "x", retryDelaySeconds: 86_401 },
      { title: "x", maxExecutionSeconds: 0 },
      { title: "x", idempotencyKey: "" },
      { title: "x", idempotencyKey: "k".repeat(201) },
      { title: "x", blockedBy: Array.from({ length: 101 }, (_, n) => `00000000-0000-0000-0000-${String(n).padStart(12, "0")}`) },
      { title: "x", blockedBy: ["not-a-uuid"] },
    ]) {
      expect(await co.board.errorCode(Ops.CreateIssueDocument, { input }), JSON.stringify(input).slice(0, 80)).toBe("BAD_USER_INPUT");
    }
    expect(await h.snapshot()).toEqual(before);
  });
});
