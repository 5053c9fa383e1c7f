// Group commit: requests made while a statement is in flight go out together
// in the next one, and each gets what running them one after another in
// arrival order would have given it.
import { afterAll, beforeAll, expect, it } from "vitest";
import { claimNextForEach } from "../../src/locks/claim/claimNextForEach.js";
import type { ClaimRequest } from "../../src/locks/shared/requests.js";
import type { LockGroups } from "../../src/locks/shared/deps.js";
import { createLockGroups } from "../../src/locks/groupCommit/groups.js";
import { GroupCommit } from "../../src/locks/groupCommit/groupCommit.js";
import type { LockEvent } from "../../src/domain/types.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
const published: LockEvent[] = [];
/** The events of each publish call: one call per statement, so a group shows as one batch. */
const batches: LockEvent[][] = [];
let groups: LockGroups;
const claim = (r: ClaimRequest) => groups.claim.submit(r.actor.companyId, r);

beforeAll(async () => {
  h = await startHarness();
  groups = createLockGroups({
    db: h.db.prisma,
    events: {
      publish: (e) => {
        published.push(...e);
        batches.push([...e]);
      },
    },
  });
});
afterAll(() => h?.close());

async function setup(agents: number) {
  const co = await createCompany(h, agents);
  const runs = await Promise.all(co.agents.map(async (a) => (await a.client.ok(Ops.StartRunDocument)).startRun));
  const actor = (i: number) => ({ companyId: co.id, agentId: co.agents[i]!.id, agentNameKey: `agent-${i + 1}` });
  return { co, runs, actor };
}

// docs/invariants.md #1: at most one run holds an issue's checkout
it("a group hands out distinct issues in claim order, as sequential claims in arrival order would", async () => {
  const { co, runs, actor } = await setup(1);
  const a = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: (["LOW", "CRITICAL", "MEDIUM", "HIGH", "CRITICAL", "LOW"] as const).map((priority, i) => ({ title: `t${i}`, priority, assigneeAgentId: a.id })),
  });
  const byId = new Map(createIssues.map((i) => [i.id, i.priority]));
  // All in one tick: the first goes alone, the other six wait and go out as one group.
  const answers = await Promise.all(Array.from({ length: 7 }, () => claim({ actor: actor(0), runId: runs[0]!.id, includeUnassigned: false })));
  const got = answers.map((x) => (x.issue ? byId.get(x.issue.id) : null));
  expect(got).toEqual(["CRITICAL", "CRITICAL", "HIGH", "MEDIUM", "LOW", "LOW", null]);
  expect(new Set(answers.flatMap((x) => (x.issue ? [x.issue.id] : []))).size).toBe(6);
  const events = published.filter((e) => e.companyId === co.id);
  expect(events.map((e) => e.seq)).toEqual(await h.ledgerSeqs(co.id)); // published in seq order
  expect(events).toHaveLength(6);
  // And they were grouped: the first claim's statement alone, then one statement for the other six (the seventh found nothing).
  const ours = batches.filter((b) => b.some((e) => e.companyId === co.id));
  expect(ours.map((b) => b.length)).toEqual([1, 5]);
});

// docs/invariants.md #4: only the checkout holder releases, and DONE needs the execution lock
it("two releases of one issue never share a statement: the first releases it, the second is told it no longer holds it", async () => {
  const { co, runs, actor } = await setup(1);
  const a = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "x", assigneeAgentId: a.id },
      { title: "y", assigneeAgentId: a.id },
    ],
  });
  const [x, y] = [createIssues[0]!.id, createIssues[1]!.id];
  for (const id of [x, y]) {
    await a.client.ok(Ops.ClaimIssueDocument, { runId: runs[0]!.id, issueId: id });
    await a.client.ok(Ops.AcquireExecutionDocument, { runId: runs[0]!.id, issueId: id });
  }
  const release = (issueId: string) => groups.release.submit(co.id, { actor: actor(0), runId: runs[0]!.id, issueId, outcome: "DONE", reason: "DONE" });
  // y goes alone; both releases of x queue behind it, and must not go out together.
  const [, first, second] = await Promise.all([release(y), release(x), release(x)]);
  expect([first.verdict, second.verdict]).toEqual(["RELEASE", "NOT_OWNER"]);
  const released = await h.sql<{ n: number }>("SELECT count(*)::int AS n FROM lock_events WHERE issue_id = $1 AND kind = 'RELEASED'", [x]);
  expect(released[0]!.n).toBe(1);
});

// docs/invariants.md #5: a dead run can never take a lock or act
it("each request keeps to its own eligibility, and a dead or foreign run gets nothing", async () => {
  const { co, runs, actor } = await setup(3);
  const [a, b] = [co.agents[0]!, co.agents[1]!];
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "a's", assigneeAgentId: a.id, priority: "LOW" },
      { title: "pool 1", priority: "CRITICAL" },
      { title: "pool 2", priority: "HIGH" },
      { title: "b's", assigneeAgentId: b.id, priority: "CRITICAL" },
    ],
  });
  const [aIssue, pool1, pool2, bIssue] = createIssues.map((i) => i.id) as [string, string, string, string];
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [runs[2]!.id]);
  const requests: ClaimRequest[] = [
    { actor: actor(0), runId: runs[0]!.id, includeUnassigned: false }, // goes alone, first
    { actor: actor(0), runId: runs[0]!.id, includeUnassigned: false }, // a has nothing more of its own
    { actor: actor(1), runId: runs[1]!.id, includeUnassigned: true }, // b: its own CRITICAL first (own work leads within a priority)
    { actor: actor(1), runId: runs[1]!.id, includeUnassigned: true }, // then the pool's CRITICAL
    { actor: actor(2), runId: runs[2]!.id, includeUnassigned: true }, // dead run
    { actor: actor(0), runId: runs[1]!.id, includeUnassigned: true }, // a naming b's run
    { actor: actor(0), runId: runs[0]!.id, includeUnassigned: true }, // a, now with the pool
  ];
  const answers = await Promise.all(requests.map((r) => claim(r)));
  expect(answers.map((x) => x.issue?.id ?? null)).toEqual([aIssue, null, bIssue, pool1, null, null, pool2]);
  expect(answers[4]!.run).toMatchObject({ live: false });
  expect(answers[5]!.run).toMatchObject({ agentId: b.id }); // claimIssue turns this into FORBIDDEN
  const held = await h.sql<{ id: string; checkout_run_id: string }>("SELECT id, checkout_run_id FROM issues WHERE company_id = $1 AND status = 'CLAIMED'", [
    co.id,
  ]);
  expect(Object.fromEntries(held.map((r) => [r.id, r.checkout_run_id]))).toEqual({
    [aIssue]: runs[0]!.id,
    [bIssue]: runs[1]!.id,
    [pool1]: runs[1]!.id,
    [pool2]: runs[0]!.id,
  });
});

it("a group locks only the issues it could hand out, so a claimer elsewhere still finds the rest", async () => {
  const { co, runs, actor } = await setup(2);
  const [a, b] = [co.agents[0]!, co.agents[1]!];
  await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      ...Array.from({ length: 4 }, (_, i) => ({ title: `a${i}`, assigneeAgentId: a.id })),
      ...Array.from({ length: 3 }, (_, i) => ({ title: `b${i}`, assigneeAgentId: b.id })),
      ...Array.from({ length: 3 }, (_, i) => ({ title: `pool${i}` })),
    ],
  });
  const requests: ClaimRequest[] = [
    { actor: actor(0), runId: runs[0]!.id, includeUnassigned: false },
    { actor: actor(0), runId: runs[0]!.id, includeUnassigned: false },
    { actor: actor(1), runId: runs[1]!.id, includeUnassigned: true },
  ];
  // Hold the group's transaction open and look from another connection, as a
  // claim statement on another instance would: every row this group did not
  // hand out must still be there for it (not skipped as locked), but one: b's
  // request could have taken a pool issue (had its own been taken), so one
  // pool issue is locked for it while it takes its own.
  const unlockedWhileHeld = await h.db.prisma
    .$transaction(async (tx) => {
      const answers = await claimNextForEach({ db: tx, events: { publish: () => {} } }, co.id, requests);
      expect(answers.filter((x) => x.issue)).toHaveLength(3);
      const free = await h.sql<{ id: string }>("SELECT id FROM issues WHERE company_id = $1 AND status = 'OPEN' FOR UPDATE SKIP LOCKED", [co.id]);
      throw Object.assign(new Error("roll back"), { free: free.length });
    })
    .catch((e: { free?: number }) => e.free);
  expect(unlockedWhileHeld).toBe(10 - 3 - 1);
});

// docs/invariants.md #2: no attempt of an issue is worked by two runs
it("acquisitions and releases of different issues share a statement; the same issue waits for the next", async () => {
  const { co, runs, actor } = await setup(2);
  const [a, b] = [co.agents[0]!, co.agents[1]!];
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "x", assigneeAgentId: a.id },
      { title: "y", assigneeAgentId: a.id },
      { title: "z", assigneeAgentId: b.id },
    ],
  });
  const [x, y, z] = createIssues.map((i) => i.id) as [string, string, string];
  for (const id of [x, y]) await a.client.ok(Ops.ClaimIssueDocument, { runId: runs[0]!.id, issueId: id });
  await b.client.ok(Ops.ClaimIssueDocument, { runId: runs[1]!.id, issueId: z });
  const acq = (i: number, issueId: string) => groups.acquire.submit(co.id, { actor: actor(i), runId: runs[i]!.id, issueId });
  // One tick: x goes alone; then y, z and b's attempt on x share a statement; x again (a) waits for the next.
  const acquired = await Promise.all([acq(0, x), acq(0, y), acq(1, z), acq(1, x), acq(0, x)]);
  expect(acquired.map((r) => r.verdict)).toEqual(["ACQUIRE", "ACQUIRE", "ACQUIRE", "EXECUTION_CONFLICT", "ALREADY_HELD"]);
  expect(acquired[3]!.ownerAgentId).toBe(a.id);
  const rel = (i: number, issueId: string, outcome: "DONE" | "REQUEUE") =>
    groups.release.submit(co.id, { actor: actor(i), runId: runs[i]!.id, issueId, outcome, reason: outcome });
  const released = await Promise.all([rel(0, x, "DONE"), rel(0, y, "REQUEUE"), rel(1, z, "DONE"), rel(0, z, "DONE"), rel(0, x, "DONE")]);
  expect(released.map((r) => r.verdict)).toEqual(["RELEASE", "RELEASE", "RELEASE", "NOT_OWNER", "NOT_OWNER"]);
  expect(released.map((r) => r.issue?.status ?? null)).toEqual(["DONE", "OPEN", "DONE", null, null]);
  const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
  expect(lockAudit).toMatchObject({ doubleClaims: 0, halfReleasedLocks: 0, locksHeldByDeadRuns: 0 });
  const kinds = await h.sql<{ kind: string }>("SELECT kind FROM lock_events WHERE company_id = $1 ORDER BY seq", [co.id]);
  expect(kinds.map((k) => k.kind)).toEqual([...Array(3).fill("CLAIMED"), ...Array(3).fill("EXECUTION_ACQUIRED"), ...Array(3).fill("RELEASED")]);
});

// docs/invariants.md #2: no attempt of an issue is worked by two runs
it("when PostgreSQL refuses a group's statement, each request goes again alone: only the one at fault gets the error", async () => {
  // The queueing alone, with a statement that fails whenever "poison" is in its group, as a statement timeout would (it rolled back).
  const statements: string[][] = [];
  const commit = new GroupCommit<string, string>(async (_company, group) => {
    statements.push(group);
    await new Promise((resolve) => setImmediate(resolve));
    if (group.includes("poison")) throw Object.assign(new Error("the poisoned statement failed"), { code: "57014" });
    return group.map((r) => `ok ${r}`);
  });
  const results = await Promise.allSettled(["first", "a", "poison", "b"].map((r) => commit.submit("co", r)));
  expect(results.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message))).toEqual([
    "ok first",
    "ok a",
    "the poisoned statement failed",
    "ok b",
  ]);
  // "first" alone, then a, poison and b together (which failed), then each of those alone.
  expect(statements).toEqual([["first"], ["a", "poison", "b"], ["a"], ["poison"], ["b"]]);
});

// docs/invariants.md #2: no attempt of an issue is worked by two runs
it("when a group's statement fails without PostgreSQL's answer (it may have committed), every member gets the error and none runs again", async () => {
  const statements: string[][] = [];
  const commit = new GroupCommit<string, string>(async (_company, group) => {
    statements.push(group);
    await new Promise((resolve) => setImmediate(resolve));
    if (group.includes("lost")) throw new Error("Connection terminated unexpectedly");
    return group.map((r) => `ok ${r}`);
  });
  const results = await Promise.allSettled(["first", "a", "lost", "b"].map((r) => commit.submit("co", r)));
  expect(results.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message))).toEqual([
    "ok first",
    "Connection terminated unexpectedly",
    "Connection terminated unexpectedly",
    "Connection terminated unexpectedly",
  ]);
  expect(statements).toEqual([["first"], ["a", "lost", "b"]]);
});

it("a backlog on one key drains one request per statement, in order, and a request queued behind it is still answered", async () => {
  const statements: number[] = [];
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  const commit = new GroupCommit<{ id: number; key: string }, number>(
    async (_company, group) => {
      await gate;
      statements.push(group.length);
      return group.map((r) => r.id);
    },
    (r) => r.key,
  );
  const same = Array.from({ length: 2000 }, (_, id) => commit.submit("co", { id, key: "one issue" }));
  const other = commit.submit("co", { id: -1, key: "another issue" });
  release();
  expect(await Promise.all(same)).toEqual(Array.from({ length: 2000 }, (_, id) => id));
  expect(await other).toBe(-1);
  expect(statements.reduce((a, b) => a + b, 0)).toBe(2001);
  expect(Math.max(...statements)).toBeLessThanOrEqual(2); // requests on one key never share a statement
});
