// The work graph's concurrency claims (docs/lifecycle.md, "The work graph"),
// proven by races: calls released together from one barrier, against real
// PostgreSQL, through two API instances sharing it. The ledger is judged by
// the history checker (support/history.ts), which holds every CLAIMED to its
// blockers' DONE. The rules one at a time are in semantics.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHistory, judge } from "../../support/history.js";
import type { Told } from "../../support/history.js";
import { Client, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually, race } from "../helpers/race.js";
import { between, findCycle, planDag, prng, somePriority } from "./dag.js";

let h: Harness;
let secondUrl: string;

beforeAll(async () => {
  h = await startHarness();
  secondUrl = (await h.startInstance()).url;
});
afterAll(() => h?.close());

/** The DAG's seed: BATON_GRAPH_SEED replays a run's graph (the interleaving is the database's). */
const SEED = Number(process.env.BATON_GRAPH_SEED ?? Math.floor(Math.random() * 2 ** 31));

/** Client i of a race talks to the second instance when i is odd. */
const alternate = (client: Client, i: number) => (i % 2 ? new Client(secondUrl, client.token) : client);

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every agent of `co` with a run, half of them on the second instance. */
async function workersOf(co: Company) {
  return Promise.all(
    co.agents.map(async (a, i) => ({ agent: a, client: alternate(a.client, i), runId: (await a.client.ok(Ops.StartRunDocument)).startRun.id })),
  );
}

const edgesOf = (companyId: string) =>
  h.sql<{ issue_id: string; blocked_by_id: string }>("SELECT issue_id, blocked_by_id FROM issue_dependencies WHERE company_id = $1", [companyId]);

/** The audit's zeros, and the history checker's verdict, the edges' never-early rule included. */
async function auditIsClean(co: Company, told: Told[] = []) {
  const { lockAudit } = await co.board.ok(Ops.GraphAuditDocument, { companyId: co.id });
  expect(lockAudit).toMatchObject({ miscountedWaits: 0, doubleClaims: 0, waitingOnCancelled: 0 });
  expect(await checkHistory(h.database.url, co.id, told), `seed ${SEED}`).toEqual([]);
}

/** Claims, in ledger order, per issue. */
async function claimsPerIssue(companyId: string) {
  const rows = await h.sql<{ issue_id: string; n: number }>(
    "SELECT issue_id, count(*)::int AS n FROM lock_events WHERE company_id = $1 AND kind = 'CLAIMED' GROUP BY issue_id",
    [companyId],
  );
  return new Map(rows.map((r) => [r.issue_id, r.n]));
}

describe("never early, under 32 claimers", () => {
  // docs/invariants.md #18: no issue is claimed before its blockers are DONE (sub-issues and parentWaits included)
  it("32 claimers on two instances drain a random DAG of 500 issues, splitting some mid-run: each claimed once, after its blockers' DONE", async () => {
    const random = prng(SEED);
    const plan = planDag(random, { layers: 10, perLayer: 50, maxBlockers: 3, boardEdges: 40, splits: 40 });
    const co = await createCompany(h, 32);

    // The graph, layer by layer: an issue's blockers exist before it.
    const ids: string[] = [];
    for (const layer of plan.layers) {
      const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
        inputs: layer.map((i) => ({ title: `dag ${i}`, priority: plan.priority[i], blockedBy: plan.blockedBy[i]!.map((b) => ids[b]!) })),
      });
      for (const [n, made] of createIssues.entries()) ids[layer[n]!] = made.id;
    }
    // More edges from the board, all at once (acyclic by construction: each must be added).
    const added = await race(plan.boardEdges.length, (n) => {
      const [i, b] = plan.boardEdges[n]!;
      return alternate(co.board, n)
        .ok(Ops.AddDependencyDocument, { issueId: ids[i]!, blockedById: ids[b]! })
        .then((r) => r.addDependency.__typename);
    });
    expect(new Set(added)).toEqual(new Set(["DependencyAdded"]));
    const splitOf = new Map([...plan.splits].map(([i, split]) => [ids[i]!, { ...split, done: false }]));

    const workers = await workersOf(co);
    const told: Told[] = [];
    /** Claim answers whose issue still waited on something: none may (a DONE blocker stays DONE here). */
    const answeredWaiting: string[] = [];
    let expected = ids.length;
    let done = 0;
    let subIssues = 0;
    let requeued = 0;
    let failure: unknown = null;
    const deadline = Date.now() + 40_000;
    await race(workers.length, async (w) => {
      const { client, runId } = workers[w]!;
      const mine = prng(SEED + w + 1);
      try {
        while (done < expected && failure === null) {
          if (Date.now() > deadline) throw new Error(`the drain did not finish: ${done} of ${expected} DONE (seed ${SEED})`);
          const { claimIssue } = await client.ok(Ops.ClaimIssueDocument, { runId, includeUnassigned: true });
          if (claimIssue.__typename === "NoIssueAvailable") {
            await pause(between(mine, 2, 10)); // the next layer waits on DONEs still in flight
            continue;
          }
          if (claimIssue.__typename !== "IssueClaimed") throw new Error(`claim answered ${claimIssue.__typename} (seed ${SEED})`);
          const issue = claimIssue.issue;
          told.push({ kind: "claimed", runId, issueId: issue.id, lockEpoch: issue.lockEpoch });
          if (issue.waitingOn.length > 0) answeredWaiting.push(issue.id);

          const split = splitOf.get(issue.id);
          if (split && !split.done) {
            // Split it: sub-issues for anyone, some delegated to an agent, keyed so a retry could not double them.
            split.done = true;
            const { createSubIssues } = await client.ok(Ops.CreateSubIssuesDocument, {
              runId,
              parentId: issue.id,
              parentWaits: split.parentWaits,
              inputs: Array.from({ length: split.subIssues }, (_, k) => ({
                title: `part ${k} of ${issue.title}`,
                priority: somePriority(mine),
                assigneeAgentId: mine() < 0.3 ? workers[between(mine, 0, workers.length - 1)]!.agent.id : null,
                idempotencyKey: `${issue.id}/${k}`,
              })),
            });
            if (createSubIssues.__typename !== "SubIssuesCreated") throw new Error(`createSubIssues answered ${createSubIssues.__typename}`);
            expected += createSubIssues.issues.length;
            subIssues += createSubIssues.issues.length;
            if (split.parentWaits) {
              // Back to the pool, to come back once every sub-issue is DONE.
              const { releaseIssue } = await client.ok(Ops.ReleaseIssueDocument, { runId, issueId: issue.id, outcome: "REQUEUE" });
              if (releaseIssue.__typename !== "IssueReleased") throw new Error(`REQUEUE answered ${releaseIssue.__typename}`);
              told.push({ kind: "released", runId, issueId: issue.id });
              requeued++;
              continue;
            }
          }
          const { acquireExecution } = await client.ok(Ops.AcquireExecutionDocument, { runId, issueId: issue.id });
          if (acquireExecution.__typename !== "ExecutionAcquired") throw new Error(`acquireExecution answered ${acquireExecution.__typename}`);
          const { releaseIssue } = await client.ok(Ops.ReleaseIssueDocument, { runId, issueId: issue.id, outcome: "DONE" });
          if (releaseIssue.__typename !== "IssueReleased") throw new Error(`DONE answered ${releaseIssue.__typename}`);
          told.push({ kind: "released", runId, issueId: issue.id });
          done++;
        }
      } catch (err) {
        failure ??= err;
      }
    });
    if (failure) throw failure;

    // Never early: the ledger's every CLAIMED follows its blockers' DONE (edges read back from issue_dependencies).
    await auditIsClean(co, told);
    expect(answeredWaiting).toEqual([]);

    const waitingParents = [...splitOf.values()].filter((s) => s.parentWaits).length;
    expect(requeued).toBe(waitingParents);
    expect(subIssues).toBeGreaterThanOrEqual(plan.splits.size);
    const statuses = await h.sql<{ status: string; n: number }>("SELECT status::text, count(*)::int AS n FROM issues WHERE company_id = $1 GROUP BY status", [
      co.id,
    ]);
    expect(statuses).toEqual([{ status: "DONE", n: ids.length + subIssues }]);
    // Claimed exactly once each, but a parent that waited on its sub-issues: twice (split, then finished).
    const claims = await claimsPerIssue(co.id);
    expect(claims.size).toBe(ids.length + subIssues);
    for (const [issueId, n] of claims) expect(n, issueId).toBe(splitOf.get(issueId)?.parentWaits ? 2 : 1);
    const { edges } = await h.one<{ edges: number }>("SELECT count(*)::int AS edges FROM issue_dependencies WHERE company_id = $1", [co.id]);
    const subEdges = (
      await h.one<{ n: number }>(
        "SELECT count(*)::int AS n FROM issue_dependencies d JOIN issues s ON s.id = d.blocked_by_id WHERE d.company_id = $1 AND s.parent_id = d.issue_id",
        [co.id],
      )
    ).n;
    expect(subEdges).toBeGreaterThan(0);
    expect(edges).toBe(plan.blockedBy.flat().length + plan.boardEdges.length + subEdges);
    expect(told.filter((t) => t.kind === "claimed").length).toBe(ids.length + subIssues + waitingParents);
  });

  // docs/invariants.md #18: no issue is claimed before its blockers are DONE
  it("blockers released DONE while 16 claimers hammer claim-next: no dependent is claimed before its blockers' DONE", { repeats: 2 }, async () => {
    const co = await createCompany(h, 17);
    const holder = co.agents[0]!;
    const { createIssues: blockers } = await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: [
        { title: "first blocker", assigneeAgentId: holder.id },
        { title: "second blocker", assigneeAgentId: holder.id },
      ],
    });
    const [first, second] = blockers.map((b) => b.id) as [string, string];
    // Eight dependents wait on the first blocker, eight on both.
    await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: Array.from({ length: 16 }, (_, n) => ({ title: `dependent ${n}`, blockedBy: n < 8 ? [first] : [first, second] })),
    });
    const holderRun = (await holder.client.ok(Ops.StartRunDocument)).startRun.id;
    for (const id of [first, second]) {
      expect((await holder.client.ok(Ops.ClaimIssueDocument, { runId: holderRun, issueId: id })).claimIssue.__typename).toBe("IssueClaimed");
      expect((await holder.client.ok(Ops.AcquireExecutionDocument, { runId: holderRun, issueId: id })).acquireExecution.__typename).toBe("ExecutionAcquired");
    }
    const claimers = await workersOf({ ...co, agents: co.agents.slice(1) });
    const told: Told[] = [];
    let polls = 0;
    let claimed = 0;
    const deadline = Date.now() + 15_000;
    await race(claimers.length + 1, async (w) => {
      if (w === claimers.length) {
        // The holder: each DONE lands while the claimers are polling (or once they took everything, the rule broken).
        for (const [id, after] of [
          [first, 50],
          [second, 150],
        ] as const) {
          await eventually(() => (polls >= after || claimed === 16 ? true : undefined), `${after} polls`);
          const { releaseIssue } = await holder.client.ok(Ops.ReleaseIssueDocument, { runId: holderRun, issueId: id, outcome: "DONE" });
          expect(releaseIssue.__typename).toBe("IssueReleased");
          told.push({ kind: "released", runId: holderRun, issueId: id });
        }
        return;
      }
      const { client, runId } = claimers[w]!;
      while (claimed < 16 && Date.now() < deadline) {
        const { claimIssue } = await client.ok(Ops.ClaimIssueDocument, { runId, includeUnassigned: true });
        polls++;
        if (claimIssue.__typename === "IssueClaimed") {
          claimed++;
          told.push({ kind: "claimed", runId, issueId: claimIssue.issue.id, lockEpoch: claimIssue.issue.lockEpoch });
        } else expect(claimIssue.__typename).toBe("NoIssueAvailable");
      }
    });
    await auditIsClean(co, told);
    expect(claimed).toBe(16);
  });

  // docs/invariants.md #18: no issue is claimed before its notBefore (and a delayed issue is claimable within 1 s of it)
  it("a delayed issue is never claimed before notBefore on the database clock, and is claimed within 1 s of it", async () => {
    const co = await createCompany(h, 4);
    const { soon } = await h.one<{ soon: Date }>("SELECT now() + interval '2 s' AS soon");
    const { createIssue: delayed } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "at two", notBefore: soon.toISOString() } });
    const { createIssue: later } = await co.board.ok(Ops.CreateIssueDocument, {
      input: { title: "in an hour", notBefore: new Date(soon.getTime() + 3_600_000).toISOString() },
    });
    expect(delayed.ready).toBe(false);
    const workers = await workersOf(co);
    const claimed: string[] = [];
    const deadline = Date.now() + 6_000;
    await race(workers.length, async (w) => {
      const { client, runId } = workers[w]!;
      while (claimed.length === 0 && Date.now() < deadline) {
        const { claimIssue } = await client.ok(Ops.ClaimIssueDocument, { runId, includeUnassigned: true });
        if (claimIssue.__typename === "IssueClaimed") claimed.push(claimIssue.issue.id);
        else {
          expect(claimIssue.__typename).toBe("NoIssueAvailable");
          await pause(20);
        }
      }
    });
    // Never early: no CLAIMED event written before its issue's not_before, both on the database clock.
    const claims = await h.sql<{ issue_id: string; early: boolean; late_seconds: number }>(
      `SELECT e.issue_id, e.at < i.not_before AS early, extract(epoch FROM e.at - i.not_before)::float8 AS late_seconds
         FROM lock_events e JOIN issues i ON i.id = e.issue_id WHERE e.company_id = $1 AND e.kind = 'CLAIMED'`,
      [co.id],
    );
    expect(claims.filter((c) => c.early)).toEqual([]);
    expect(claimed).toEqual([delayed.id]);
    expect(claims).toHaveLength(1);
    expect(claims[0]!.late_seconds).toBeLessThan(1);

    // The one an hour away, its notBefore backdated (the waker, not a sleep, lets it out): within 1 s as well.
    const { backdated } = await h.one<{ backdated: Date }>(
      "UPDATE issues SET not_before = now() - interval '1 ms' WHERE id = $1 AND delayed RETURNING not_before AS backdated",
      [later.id],
    );
    const runId = workers[0]!.runId;
    const took = await eventually(
      async () => {
        const { claimIssue } = await co.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId, includeUnassigned: true });
        return claimIssue.__typename === "IssueClaimed" ? claimIssue.issue.id : undefined;
      },
      "the backdated issue to be claimable",
      2_000,
    );
    expect(took).toBe(later.id);
    const { at } = await h.one<{ at: Date }>("SELECT at FROM lock_events WHERE issue_id = $1 AND kind = 'CLAIMED'", [later.id]);
    expect(at.getTime() - backdated.getTime()).toBeLessThan(1_000);
    await auditIsClean(co);
  });
});

describe("no cycles, under concurrent additions", () => {
  // docs/invariants.md #19: the dependency graph never has a cycle (of two concurrent adds that would close one, exactly one succeeds)
  it("16 pairs of opposite edges at once, on two instances: exactly one of each pair answers DependencyCycle, and the graph stays acyclic", async () => {
    const co = await createCompany(h, 0);
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 32 }, (_, n) => ({ title: `node ${n}` })) });
    const pairs = Array.from({ length: 16 }, (_, p) => [createIssues[2 * p]!.id, createIssues[2 * p + 1]!.id] as const);
    // Call 2p: a waits on b; call 2p + 1: b waits on a.
    const answers = await race(32, (n) => {
      const [a, b] = pairs[n >> 1]!;
      const [issueId, blockedById] = n % 2 ? [b, a] : [a, b];
      return alternate(co.board, n >> 1)
        .ok(Ops.AddDependencyDocument, { issueId, blockedById })
        .then((r) => ({ issueId, blockedById, answer: r.addDependency }));
    });
    const edges = await edgesOf(co.id);
    expect(findCycle(edges)).toBeNull();
    expect(edges).toHaveLength(16);
    for (let p = 0; p < 16; p++) {
      const two = answers.slice(2 * p, 2 * p + 2);
      expect(two.map((t) => t.answer.__typename).sort()).toEqual(["DependencyAdded", "DependencyCycle"]);
      const lost = two.find((t) => t.answer.__typename === "DependencyCycle")!;
      // path: from blockedById along blockedBy edges to issueId, the cycle the edge would have closed
      if (lost.answer.__typename === "DependencyCycle") expect(lost.answer.path).toEqual([lost.blockedById, lost.issueId]);
    }
    const { lockAudit } = await co.board.ok(Ops.GraphAuditDocument, { companyId: co.id });
    expect(lockAudit.miscountedWaits).toBe(0);
  });

  // docs/invariants.md #19: the dependency graph never has a cycle, of any length
  it("the three edges of a triangle at once, eight triangles a round: at most two of each succeed, and the graph stays acyclic", { repeats: 3 }, async () => {
    const co = await createCompany(h, 0);
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 24 }, (_, n) => ({ title: `corner ${n}` })) });
    const ids = createIssues.map((i) => i.id);
    // Triangle t, corners a b c: a waits on b, b on c, c on a.
    const answers = await race(24, (n) => {
      const t = Math.floor(n / 3);
      const k = n % 3;
      const issueId = ids[3 * t + k]!;
      const blockedById = ids[3 * t + ((k + 1) % 3)]!;
      return alternate(co.board, n)
        .ok(Ops.AddDependencyDocument, { issueId, blockedById })
        .then((r) => ({ issueId, blockedById, answer: r.addDependency }));
    });
    expect(findCycle(await edgesOf(co.id))).toBeNull();
    for (let t = 0; t < 8; t++) {
      const three = answers.slice(3 * t, 3 * t + 3);
      expect(three.filter((a) => a.answer.__typename === "DependencyAdded").length).toBeLessThanOrEqual(2);
      for (const lost of three) {
        if (lost.answer.__typename === "DependencyAdded") continue;
        expect(lost.answer.__typename).toBe("DependencyCycle");
        if (lost.answer.__typename === "DependencyCycle") {
          expect(lost.answer.path[0]).toBe(lost.blockedById);
          expect(lost.answer.path.at(-1)).toBe(lost.issueId);
        }
      }
    }
  });
});

describe("one issue per idempotency key, under concurrent creates", () => {
  // docs/invariants.md #20: one issue per idempotency key and company
  it("8 creates with one idempotency key at once, on two instances, answer one issue", { repeats: 3 }, async () => {
    const co = await createCompany(h, 0);
    const key = `deploy-${Math.random()}`;
    const made = await race(8, (n) =>
      alternate(co.board, n)
        .ok(Ops.CreateIssueDocument, { input: { title: `deploy, try ${n}`, idempotencyKey: key } })
        .then((r) => r.createIssue),
    );
    expect(new Set(made.map((m) => m.id)).size).toBe(1);
    const rows = await h.sql<{ id: string; title: string }>("SELECT id, title FROM issues WHERE company_id = $1 AND idempotency_key = $2", [co.id, key]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.id).toBe(made[0]!.id);
    for (const m of made) expect(m).toMatchObject({ title: rows[0]!.title, idempotencyKey: key }); // every answer is the issue as made
  });

  // docs/invariants.md #20: one issue per idempotency key and company (inside one call, the first input with a key wins)
  it("within one createIssues call the first input with a key wins", async () => {
    const co = await createCompany(h, 0);
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: [{ title: "first", idempotencyKey: "k", priority: "LOW" }, { title: "unkeyed" }, { title: "second", idempotencyKey: "k", priority: "CRITICAL" }],
    });
    expect(createIssues[2]!.id).toBe(createIssues[0]!.id);
    expect(createIssues[1]!.id).not.toBe(createIssues[0]!.id);
    expect(await h.sql("SELECT title, priority::text FROM issues WHERE company_id = $1 AND idempotency_key = 'k'", [co.id])).toEqual([
      { title: "first", priority: "LOW" },
    ]);
  });

  // docs/invariants.md #20: one issue per idempotency key and company, whichever order concurrent calls meet the keys in
  it("8 createIssues batches of the same four keys at once, each in its own order, on two instances: one issue per key", { repeats: 2 }, async () => {
    const co = await createCompany(h, 0);
    const random = prng(SEED);
    const keys = ["a", "b", "c", "d"];
    const batches = await race(8, (n) => {
      const order = [...keys].sort(() => random() - 0.5);
      return alternate(co.board, n)
        .ok(Ops.CreateIssuesDocument, { inputs: order.map((k) => ({ title: `${k} from batch ${n}`, idempotencyKey: k })) })
        .then((r) => new Map(order.map((k, i) => [k, r.createIssues[i]!.id])));
    });
    const rows = await h.sql<{ id: string; idempotency_key: string }>(
      "SELECT id, idempotency_key FROM issues WHERE company_id = $1 AND idempotency_key = ANY($2)",
      [co.id, keys],
    );
    expect(rows).toHaveLength(4);
    const byKey = new Map(rows.map((r) => [r.idempotency_key, r.id]));
    for (const batch of batches) expect(batch).toEqual(byKey);
  });
});

describe("the history checker's never-early rule", () => {
  const [X, B] = ["00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"];
  const R = "00000000-0000-0000-0000-000000000001";
  const ev = (seq: number, issue: string, kind: string, status: string, checkout: string | null, execution: string | null = null, at = seq) => ({
    seq: String(seq),
    issue_id: issue,
    kind,
    status,
    run_id: R,
    checkout_run_id: checkout,
    execution_run_id: execution,
    reason: null,
    at_us: String(at * 1000),
  });
  const rows = [
    { id: X, status: "CLAIMED", lock_epoch: 1, attempt_count: 0, checkout_run_id: R, execution_run_id: null },
    { id: B, status: "DONE", lock_epoch: 1, attempt_count: 1, checkout_run_id: null, execution_run_id: null },
  ];
  const blockerDone = (from: number) => [
    ev(from, B, "CLAIMED", "CLAIMED", R),
    ev(from + 1, B, "EXECUTION_ACQUIRED", "IN_PROGRESS", R, R),
    ev(from + 2, B, "RELEASED", "DONE", null),
  ];

  it("passes a claim after the blocker's DONE, and one made before the edge was", () => {
    expect(judge([...blockerDone(1), ev(4, X, "CLAIMED", "CLAIMED", R)], rows, [], [{ issue_id: X, blocked_by_id: B }])).toEqual([]);
    const before = [ev(1, X, "CLAIMED", "CLAIMED", R), ...blockerDone(2)];
    expect(judge(before, rows, [], [{ issue_id: X, blocked_by_id: B, since_us: "1500" }])).toEqual([]);
  });

  it("catches a claim before the blocker's DONE", () => {
    const early = [ev(1, B, "CLAIMED", "CLAIMED", R), ev(2, X, "CLAIMED", "CLAIMED", R), ...blockerDone(3).slice(1)];
    expect(judge(early, rows, [], [{ issue_id: X, blocked_by_id: B, since_us: "0" }])).toEqual([
      expect.stringContaining(`claimed before its blocker ${B} was DONE (CLAIMED since seq 1)`),
    ]);
    expect(judge([ev(1, X, "CLAIMED", "CLAIMED", R)], rows.slice(0, 1), [], [{ issue_id: X, blocked_by_id: B }])).toEqual([
      expect.stringContaining("no event of it yet"),
    ]);
  });
});
