// Concurrency claims, proven by races: calls released together from one
// barrier, against real PostgreSQL, through two API instances sharing it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { checkHistory } from "../../support/history.js";
import type { Told } from "../../support/history.js";
import { race } from "../helpers/race.js";

let h: Harness;
let secondUrl: string;

beforeAll(async () => {
  h = await startHarness();
  secondUrl = (await h.startInstance()).url;
});
afterAll(() => h?.close());

/** The same agent, talking to the second instance. */
const onSecond = (client: Client) => new Client(secondUrl, client.token);

async function runsFor(co: Company) {
  return Promise.all(
    co.agents.map(async (a, i) => ({
      agent: a,
      client: i % 2 ? onSecond(a.client) : a.client,
      run: (await a.client.ok(Ops.StartRunDocument)).startRun,
    })),
  );
}

/** The audit's zeros, and the history checker's verdict on the ledger and on what clients were told. */
async function auditIsClean(co: Company, told: Told[] = []) {
  const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
  expect(lockAudit).toMatchObject({ doubleClaims: 0, locksHeldByDeadRuns: 0, halfReleasedLocks: 0, unescalatedExhausted: 0 });
  expect(await checkHistory(h.database.url, co.id, told)).toEqual([]);
}

describe("races", () => {
  // docs/invariants.md #1: at most one run holds an issue's checkout
  // docs/invariants.md #13: lockEpoch goes up by one per change of hands and never goes down
  it("32 claimers drain 500 issues across two instances with zero duplicates", async () => {
    const co = await createCompany(h, 32);
    for (let i = 0; i < 500; i += 250) {
      await co.board.ok(Ops.CreateIssuesDocument, {
        inputs: Array.from({ length: 250 }, (_, n) => ({ title: `job ${i + n}`, priority: (["CRITICAL", "HIGH", "MEDIUM", "LOW"] as const)[n % 4] })),
      });
    }
    const workers = await runsFor(co);
    const told: Told[] = [];
    const claimedBy = await race(workers.length, async (w) => {
      const { client, run } = workers[w]!;
      const mine: string[] = [];
      for (;;) {
        const { claimIssue } = await client.ok(Ops.ClaimIssueDocument, { runId: run.id, includeUnassigned: true });
        if (claimIssue.__typename === "NoIssueAvailable") return mine;
        if (claimIssue.__typename !== "IssueClaimed") throw new Error(`unexpected ${claimIssue.__typename}`);
        expect(claimIssue.issue.checkoutRunId).toBe(run.id);
        mine.push(claimIssue.issue.id);
        told.push({ kind: "claimed", runId: run.id, issueId: claimIssue.issue.id, lockEpoch: claimIssue.issue.lockEpoch });
      }
    });
    const all = claimedBy.flat();
    expect(all).toHaveLength(500);
    expect(new Set(all).size).toBe(500);
    expect(claimedBy.filter((c) => c.length > 0).length).toBeGreaterThan(8); // the work really was shared
    const { n } = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM lock_events WHERE company_id = $1 AND kind = 'CLAIMED'", [co.id]);
    expect(n).toBe(500);
    const { seqs } = await h.one<{ seqs: number }>("SELECT count(DISTINCT seq)::int AS seqs FROM lock_events WHERE company_id = $1", [co.id]);
    expect(seqs).toBe(500); // one seq per event
    await auditIsClean(co, told);
  });

  // docs/invariants.md #1: at most one run holds an issue's checkout
  // docs/invariants.md #13: lockEpoch goes up by one per change of hands and never goes down
  it("30 runs check out one issue: exactly one wins and every loser is told who", async () => {
    const co = await createCompany(h, 30);
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "the one" } });
    const workers = await runsFor(co);
    const results = await race(workers.length, (w) =>
      workers[w]!.client.ok(Ops.ClaimIssueDocument, {
        runId: workers[w]!.run.id,
        issueId: createIssue.id,
        expectedStatuses: ["OPEN", "CLAIMED", "IN_PROGRESS"],
      }).then((r) => r.claimIssue),
    );
    const winners = results.filter((r) => r.__typename === "IssueClaimed");
    expect(winners).toHaveLength(1);
    const winner = winners[0]!;
    if (winner.__typename !== "IssueClaimed") throw new Error("unreachable");
    const winnerAgent = workers.find((w) => w.run.id === winner.issue.checkoutRunId)!.agent.id;
    for (const loser of results.filter((r) => r !== winner)) {
      expect(loser).toMatchObject({
        __typename: "CheckoutConflict",
        ownerRunId: winner.issue.checkoutRunId,
        ownerAgentId: winnerAgent,
        holderRunIsLive: true,
      });
    }
    await h.settled(co.id);
    const { lockEvents } = await co.board.ok(Ops.LockEventsDocument, { companyId: co.id });
    expect(lockEvents.map((e) => e.kind)).toEqual(["CLAIMED"]);
    await auditIsClean(co, [{ kind: "claimed", runId: winner.issue.checkoutRunId!, issueId: createIssue.id, lockEpoch: winner.issue.lockEpoch }]);
  });

  // docs/invariants.md #1: at most one run holds an issue's checkout
  it("three runHeartbeat ticks at once never claim one issue twice", { repeats: 10 }, async () => {
    const co = await createCompany(h, 6);
    for (const agent of co.agents) {
      await co.board.ok(Ops.CreateIssuesDocument, {
        inputs: [
          { title: "a", assigneeAgentId: agent.id },
          { title: "b", assigneeAgentId: agent.id },
        ],
      });
    }
    const ticks = await race(3, (i) => new Client(i === 1 ? secondUrl : h.url, co.board.token).ok(Ops.RunHeartbeatDocument));
    const claimed = ticks.flatMap((t) => t.runHeartbeat.claims.map((c) => c.issue.id));
    expect(new Set(claimed).size).toBe(claimed.length);
    expect(claimed).toHaveLength(12);
    // Runs that claimed nothing were finished before their tick returned.
    const idle = ticks.flatMap((t) => t.runHeartbeat.runs).filter((r) => !claimed.length || r.status !== "RUNNING");
    for (const run of idle) expect(run.status).toBe("SUCCEEDED");
    const { running } = await h.one<{ running: number }>(
      "SELECT count(*)::int AS running FROM heartbeat_runs r WHERE company_id = $1 AND status = 'RUNNING' AND NOT EXISTS (SELECT 1 FROM issues i WHERE i.checkout_run_id = r.id)",
      [co.id],
    );
    expect(running).toBe(0);
    await auditIsClean(co);
  });

  // docs/invariants.md #3: the two locks change together with the status, in one row update
  // docs/invariants.md #4: only the checkout holder releases, and DONE needs the execution lock
  it("a release racing re-claims: the issue changes hands cleanly, never held twice", async () => {
    const co = await createCompany(h, 9);
    const workers = await runsFor(co);
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "hot potato", maxAttempts: 100 } });
    const holder = workers[0]!;
    await holder.client.ok(Ops.ClaimIssueDocument, { runId: holder.run.id, issueId: createIssue.id });
    for (let round = 0; round < 5; round++) {
      const results = await race(workers.length, async (w) => {
        const { client, run } = workers[w]!;
        const current = (await co.board.ok(Ops.IssueDocument, { id: createIssue.id })).issue!;
        if (current.checkoutRunId === run.id) {
          return (await client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: createIssue.id, outcome: "REQUEUE" })).releaseIssue.__typename;
        }
        return (await client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id })).claimIssue.__typename;
      });
      // The holder always sees itself holding, so exactly one release; the others race for the re-claim, at most one wins.
      expect(results.filter((r) => r === "IssueReleased").length).toBe(1);
      expect(results.filter((r) => r === "IssueClaimed").length).toBeLessThanOrEqual(1);
      const { issue } = await co.board.ok(Ops.IssueDocument, { id: createIssue.id });
      if (issue!.status === "OPEN") {
        // nobody won the re-claim this round: hand it to someone for the next
        await holder.client.ok(Ops.ClaimIssueDocument, { runId: holder.run.id, issueId: createIssue.id });
      }
    }
    await h.settled(co.id);
    const { lockEvents } = await co.board.ok(Ops.LockEventsDocument, { companyId: co.id, first: 1000 });
    // It changed hands every round: the first claim, then per round one release and one claim (a racer's, or the hand-over).
    expect(lockEvents.map((e) => e.kind)).toEqual(["CLAIMED", ...Array.from({ length: 5 }, () => ["RELEASED", "CLAIMED"]).flat()]);
    // Replaying the ledger: a claim only ever follows a release.
    let holderRun: string | null = null;
    for (const e of lockEvents) {
      if (e.kind === "CLAIMED") expect(holderRun).toBeNull();
      if (e.kind === "RELEASED") expect(holderRun).toBe(e.runId);
      holderRun = e.checkoutRunId ?? null;
    }
    await auditIsClean(co);
  });

  // docs/invariants.md #1: at most one run holds an issue's checkout
  it("adopting a dead run's lock: one adopter wins; a live run's lock is never adopted", async () => {
    const co = await createCompany(h, 12);
    const workers = await runsFor(co);
    const [dead, live] = [workers[0]!, workers[1]!];
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: [{ title: "orphan" }, { title: "busy" }] });
    const [orphan, busy] = [createIssues[0]!, createIssues[1]!];
    await dead.client.ok(Ops.ClaimIssueDocument, { runId: dead.run.id, issueId: orphan.id });
    await live.client.ok(Ops.ClaimIssueDocument, { runId: live.run.id, issueId: busy.id });
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [dead.run.id]);
    const adopters = workers.slice(2);
    const outcomes = await race(adopters.length * 2, async (i) => {
      const { client, run } = adopters[i % adopters.length]!;
      const issueId = i < adopters.length ? orphan.id : busy.id;
      const { claimIssue } = await client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId, expectedStatuses: ["CLAIMED"] });
      return { issueId, claimIssue };
    });
    const onOrphan = outcomes.filter((o) => o.issueId === orphan.id).map((o) => o.claimIssue);
    const adopted = onOrphan.filter((r) => r.__typename === "IssueClaimed");
    expect(adopted).toHaveLength(1);
    expect(adopted[0]).toMatchObject({ adopted: true });
    const newOwner = adopted[0]!.__typename === "IssueClaimed" ? adopted[0]!.issue.checkoutRunId : null;
    for (const r of onOrphan.filter((r) => r.__typename !== "IssueClaimed")) {
      expect(r).toMatchObject({ __typename: "CheckoutConflict", ownerRunId: newOwner, holderRunIsLive: true });
    }
    for (const o of outcomes.filter((o) => o.issueId === busy.id)) {
      expect(o.claimIssue).toMatchObject({ __typename: "CheckoutConflict", ownerRunId: live.run.id, holderRunIsLive: true });
    }
    const events = await h.sql<{ kind: string }>("SELECT kind FROM lock_events WHERE issue_id = $1 ORDER BY seq", [orphan.id]);
    expect(events.map((e) => e.kind)).toEqual(["CLAIMED", "ADOPTED"]);
  });

  // docs/invariants.md #5: a dead run can never take a lock or act
  // docs/invariants.md #7: finishRun releases everything the run held, atomically with ending it
  it("a run finished while it claims never ends up holding a lock", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    for (let round = 0; round < 10; round++) {
      await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 8 }, () => ({ title: "x", assigneeAgentId: agent.id })) });
      const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
      await race(
        9,
        async (i): Promise<unknown> =>
          i === 4
            ? agent.client.ok(Ops.FinishRunDocument, { runId: run.id, status: "CANCELLED" })
            : (i % 2 ? onSecond(agent.client) : agent.client).ok(Ops.ClaimIssueDocument, { runId: run.id }),
      );
      const held = await h.sql("SELECT id FROM issues WHERE checkout_run_id = $1", [run.id]);
      expect(held).toEqual([]);
    }
    await auditIsClean(co);
  });

  // docs/invariants.md #9: an exhausted issue is never claimed and never returns to OPEN
  it("attempts run out: three failed executions escalate the issue and it is never claimed again", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "poison", assigneeAgentId: agent.id, maxAttempts: 3 } });
    const seen: string[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
      const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
      if (claimIssue.__typename !== "IssueClaimed") {
        seen.push(claimIssue.__typename);
        break;
      }
      await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: createIssue.id });
      const { releaseIssue } = await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: createIssue.id, outcome: "FAILED" });
      seen.push(releaseIssue.__typename === "IssueReleased" ? releaseIssue.issue.status : releaseIssue.__typename);
    }
    expect(seen).toEqual(["OPEN", "OPEN", "ESCALATED", "NoIssueAvailable"]);
    const { issue } = await co.board.ok(Ops.IssueDocument, { id: createIssue.id });
    expect(issue).toMatchObject({ status: "ESCALATED", attemptCount: 3 });
    await auditIsClean(co);
  });
});
