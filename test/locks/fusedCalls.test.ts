// One request per job: claimIssue(startExecution) takes both locks, and
// releaseIssue(next) releases and then claims the caller's next issue. Each
// answers exactly what the calls it stands for would, one after the other,
// and the ledger reads the same either way.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setRetryBudget } from "../../src/db/sql.js";
import { checkHistory } from "../../support/history.js";
import type { Told } from "../../support/history.js";
import { Client, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { race } from "../helpers/race.js";

let h: Harness;
let secondUrl: string;

beforeAll(async () => {
  h = await startHarness();
  secondUrl = (await h.startInstance()).url;
});
afterAll(() => h?.close());

async function issues(co: Company, n: number, input: Record<string, unknown> = {}): Promise<string[]> {
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: Array.from({ length: n }, (_, i) => ({ title: `job ${i}`, assigneeAgentId: co.agents[0]!.id, ...input })),
  });
  return createIssues.map((i) => i.id);
}

async function issuesTitled(co: Company, titles: string[]): Promise<string[]> {
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: titles.map((title) => ({ title, assigneeAgentId: co.agents[0]!.id })) });
  return createIssues.map((i) => i.id);
}

const kindsOf = async (issueId: string) =>
  (await h.sql<{ kind: string }>("SELECT kind::text FROM lock_events WHERE issue_id = $1 ORDER BY seq", [issueId])).map((e) => e.kind);

describe("one request per job", () => {
  it("claimIssue(startExecution) answers the issue IN_PROGRESS with its attempt counted, CLAIMED then EXECUTION_ACQUIRED", async () => {
    const co = await createCompany(h, 1);
    const [first, second] = await issues(co, 2);
    const agent = co.agents[0]!.client;
    const run = (await agent.ok(Ops.StartRunDocument)).startRun;
    const { claimIssue: next } = await agent.ok(Ops.ClaimIssueDocument, { runId: run.id, startExecution: true });
    if (next.__typename !== "IssueClaimed") throw new Error(next.__typename);
    expect(next.issue).toMatchObject({ id: first, status: "IN_PROGRESS", checkoutRunId: run.id, executionRunId: run.id, attemptCount: 1, lockEpoch: 1 });
    expect(await kindsOf(first!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED"]);

    // By id, the same.
    const { claimIssue: named } = await agent.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: second, startExecution: true });
    if (named.__typename !== "IssueClaimed") throw new Error(named.__typename);
    expect(named.issue).toMatchObject({ id: second, status: "IN_PROGRESS", executionRunId: run.id, attemptCount: 1 });
    expect(await kindsOf(second!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED"]);
    // Again by the holder: idempotent, nothing new in the ledger, the attempt not counted twice.
    const { claimIssue: again } = await agent.ok(Ops.ClaimIssueDocument, {
      runId: run.id,
      issueId: second,
      expectedStatuses: ["OPEN", "IN_PROGRESS"],
      startExecution: true,
    });
    expect(again).toMatchObject({ __typename: "IssueClaimed", alreadyHeld: true, issue: { status: "IN_PROGRESS", attemptCount: 1 } });
    expect(await kindsOf(second!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED"]);
  });

  it("releaseIssue(next) releases, then claims the next issue; null when nothing is claimable; a refused release claims nothing", async () => {
    const co = await createCompany(h, 1);
    const [a, b] = await issues(co, 2);
    const agent = co.agents[0]!.client;
    const run = (await agent.ok(Ops.StartRunDocument)).startRun;
    await agent.ok(Ops.ClaimIssueDocument, { runId: run.id, startExecution: true });
    const { releaseIssue: done } = await agent.ok(Ops.ReleaseAndClaimNextDocument, { runId: run.id, issueId: a!, outcome: "DONE", next: {} });
    if (done.__typename !== "IssueReleased") throw new Error(done.__typename);
    expect(done.issue).toMatchObject({ id: a, status: "DONE" });
    expect(done.next).toMatchObject({ issue: { id: b, status: "IN_PROGRESS", executionRunId: run.id, attemptCount: 1 }, run: { id: run.id } });
    expect(await kindsOf(a!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "RELEASED"]);

    // startExecution: false in next: the checkout only.
    const { releaseIssue: requeued } = await agent.ok(Ops.ReleaseAndClaimNextDocument, {
      runId: run.id,
      issueId: b!,
      outcome: "REQUEUE",
      next: { startExecution: false },
    });
    if (requeued.__typename !== "IssueReleased") throw new Error(requeued.__typename);
    // The claim sees the release: the requeued issue is the next one, taken again (a new epoch).
    expect(requeued.next).toMatchObject({ issue: { id: b, status: "CLAIMED", executionRunId: null, lockEpoch: 2 } });

    const { releaseIssue: last } = await agent.ok(Ops.ReleaseAndClaimNextDocument, { runId: run.id, issueId: b!, outcome: "BLOCKED", next: {} });
    expect(last).toMatchObject({ __typename: "IssueReleased", issue: { status: "BLOCKED" }, next: null });

    // Not the holder: the refusal, and nothing claimed.
    const [c] = await issues(co, 1);
    const before = await h.snapshot();
    const { releaseIssue: refused } = await agent.ok(Ops.ReleaseAndClaimNextDocument, { runId: run.id, issueId: c!, outcome: "DONE", next: {} });
    expect(refused.__typename).toBe("NotLockOwner");
    expect(await h.snapshot()).toEqual(before);
  });

  // docs/invariants.md #1: at most one run holds an issue's checkout
  it("16 agents on two instances drain 400 issues one request per job: each done once, the history clean", async () => {
    const co = await createCompany(h, 16);
    for (let i = 0; i < 400; i += 200) {
      await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 200 }, (_, n) => ({ title: `job ${i + n}` })) });
    }
    const told: Told[] = [];
    const done = await race(16, async (w) => {
      const client = w % 2 ? new Client(secondUrl, co.agents[w]!.client.token) : co.agents[w]!.client;
      const run = (await client.ok(Ops.StartRunDocument)).startRun;
      const mine: string[] = [];
      const { claimIssue } = await client.ok(Ops.ClaimIssueDocument, { runId: run.id, includeUnassigned: true, startExecution: true });
      let held = claimIssue.__typename === "IssueClaimed" ? claimIssue.issue : null;
      while (held) {
        expect(held).toMatchObject({ status: "IN_PROGRESS", executionRunId: run.id });
        told.push({ kind: "claimed", runId: run.id, issueId: held.id, lockEpoch: held.lockEpoch });
        const { releaseIssue } = await client.ok(Ops.ReleaseAndClaimNextDocument, {
          runId: run.id,
          issueId: held.id,
          outcome: "DONE",
          next: { includeUnassigned: true },
        });
        if (releaseIssue.__typename !== "IssueReleased") throw new Error(releaseIssue.__typename);
        told.push({ kind: "released", runId: run.id, issueId: held.id });
        mine.push(held.id);
        held = releaseIssue.next?.issue ?? null;
      }
      return mine;
    });
    const all = done.flat();
    expect(all).toHaveLength(400);
    expect(new Set(all).size).toBe(400);
    const { n } = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM issues WHERE company_id = $1 AND status = 'DONE' AND attempt_count = 1", [co.id]);
    expect(n).toBe(400);
    await h.settled(co.id);
    expect(await checkHistory(h.database.url, co.id, told)).toEqual([]);
  });
});

describe("a fused call whose second step fails answers what its first step did", () => {
  // A serialization failure (40001) whenever an issue titled "poison" gets a holder, as the keys' trigger raises at a
  // key's last slot, with one try only: the second step's retries are spent, and it changed nothing.
  async function poisoned<T>(work: () => Promise<T>): Promise<T> {
    await h.sql(`CREATE OR REPLACE FUNCTION zz_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
       IF NEW.title = 'poison' AND NEW.execution_run_id IS NOT NULL THEN RAISE EXCEPTION 'poison' USING ERRCODE = '40001'; END IF; RETURN NEW; END $$`);
    await h.sql("CREATE TRIGGER zz_poison BEFORE UPDATE ON issues FOR EACH ROW EXECUTE FUNCTION zz_poison()");
    const restore = setRetryBudget({ tries: 1, baseMs: 0, capMs: 0, totalMs: 0 });
    try {
      return await work();
    } finally {
      restore();
      await h.sql("DROP TRIGGER zz_poison ON issues");
    }
  }

  it("releaseIssue(next): released, next null, when the claim after it changed nothing", async () => {
    const co = await createCompany(h, 1);
    const [a, poison] = await issuesTitled(co, ["a", "poison"]);
    const agent = co.agents[0]!.client;
    const run = (await agent.ok(Ops.StartRunDocument)).startRun;
    await agent.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: a, startExecution: true });
    const { releaseIssue } = await poisoned(() => agent.ok(Ops.ReleaseAndClaimNextDocument, { runId: run.id, issueId: a!, outcome: "DONE", next: {} }));
    expect(releaseIssue).toMatchObject({ __typename: "IssueReleased", issue: { id: a, status: "DONE" }, next: null });
    expect(await h.one("SELECT status::text, checkout_run_id FROM issues WHERE id = $1", [poison])).toEqual({ status: "OPEN", checkout_run_id: null });
  });

  it("claimIssue(startExecution) by id: the checkout, CLAIMED, when the acquisition after it changed nothing", async () => {
    const co = await createCompany(h, 1);
    const [poison] = await issuesTitled(co, ["poison"]);
    const agent = co.agents[0]!.client;
    const run = (await agent.ok(Ops.StartRunDocument)).startRun;
    const { claimIssue } = await poisoned(() => agent.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: poison, startExecution: true }));
    expect(claimIssue).toMatchObject({ __typename: "IssueClaimed", issue: { id: poison, status: "CLAIMED", checkoutRunId: run.id, executionRunId: null } });
  });
});
