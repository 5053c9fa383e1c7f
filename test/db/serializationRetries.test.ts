// A serialization failure is a retryable conflict, never an internal error
// (docs/access.md, Errors; docs/invariants.md, "One known exception"): the
// statements retry it with jittered backoff within a bounded time, so 64
// claimers cycling through one key's last slots all get answers; and when the
// retries do run out the caller is told CONFLICT_RETRY with outcome
// NOT_APPLIED, and nothing changed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectDb } from "../../src/db/client.js";
import type { DbHandle } from "../../src/db/client.js";

import { setRetryBudget } from "../../src/db/sql.js";
import { claimIssue } from "../../src/locks/claim/claimIssue.js";
import { claimNextForEach } from "../../src/locks/claim/claimNextForEach.js";
import { releaseIssue } from "../../src/locks/release/releaseIssue.js";
import { acquireExecution } from "../../src/locks/execution/acquireExecution.js";
import { startRun } from "../../src/locks/runs/runs.js";
import type { LockDeps } from "../../src/locks/shared/deps.js";
import type { AgentActor } from "../../src/locks/shared/types.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually, race } from "../helpers/race.js";

let h: Harness;
let direct: DbHandle;

beforeAll(async () => {
  h = await startHarness();
  direct = connectDb(h.database.url, 64, "baton-test-retries");
});
afterAll(async () => {
  await direct?.close();
  await h?.close();
});

/** Issues in the hot key: each freed slot is raced for by the claimers that do not hold one. */
const ISSUES = 128;
const SET_LIMIT = `mutation($key: String!, $max: Int) { setConcurrencyLimit(key: $key, maxActive: $max) { key maxActive active } }`;

async function actors(companyId: string): Promise<AgentActor[]> {
  const rows = await h.sql<{ id: string; name_key: string }>("SELECT id, name_key FROM agents WHERE company_id = $1 ORDER BY name_key", [companyId]);
  return rows.map((r) => ({ companyId, agentId: r.id, agentNameKey: r.name_key }));
}

describe("serialization retries", () => {
  // docs/invariants.md #15: the keys' trigger refuses a claim past the limit with 40001, which runs again
  it("64 claimers cycling through a key's last two slots, each its own statement, all get answers: no error, every issue done once", async () => {
    const co = await createCompany(h, 64);
    await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: ISSUES }, (_, n) => ({ title: `slot ${n}`, concurrencyKey: "hot" })) });
    const set = await co.board.raw(SET_LIMIT, { key: "hot", max: 2 });
    expect(set.errors).toBeUndefined();
    // No group commit: 64 statements at once. Leases outlast the test on a loaded machine (no run heartbeats here).
    const deps: LockDeps = { db: direct.prisma, events: { publish() {} }, leaseSeconds: 600 };
    const agents = await actors(co.id);
    const runs = await Promise.all(agents.map((a) => startRun(deps, a)));
    const errors: string[] = [];
    let finished = 0;
    let ring!: () => void;
    let doorbell = new Promise<void>((resolve) => (ring = resolve));
    const rang = () => {
      const before = ring;
      doorbell = new Promise<void>((resolve) => (ring = resolve));
      before();
    };
    const done = await race(agents.length, async (w) => {
      const actor = agents[w]!;
      const runId = runs[w]!.id;
      const mine: string[] = [];
      for (;;) {
        const freed = doorbell;
        try {
          const claimed = await claimIssue(deps, actor, { runId, includeUnassigned: true });
          if (claimed.__typename === "NoIssueAvailable") {
            if (finished === ISSUES || errors.length > 0) return mine; // all done, or failed already: stop
            await freed; // the key is full: wait for a holder to free a slot (one freed since the claim began has rung already)
            continue;
          }
          if (claimed.__typename !== "IssueClaimed") throw new Error(`unexpected ${claimed.__typename}`);
          const issueId = claimed.issue.id;
          expect((await acquireExecution(deps, actor, { runId, issueId })).__typename).toBe("ExecutionAcquired");
          expect((await releaseIssue(deps, actor, { runId, issueId, outcome: "DONE" })).__typename).toBe("IssueReleased");
          mine.push(issueId);
          finished++;
          rang();
        } catch (err) {
          errors.push(
            String((err as Error).message ?? err)
              .split("\n")
              .at(-1)!,
          );
          rang(); // the others stop too
          return mine;
        }
      }
    });
    expect(errors).toEqual([]);
    const all = done.flat();
    expect(all).toHaveLength(ISSUES);
    expect(new Set(all).size).toBe(ISSUES);
    const { max } = await h.one<{ max: number }>("SELECT max(active)::int AS max FROM concurrency_keys WHERE company_id = $1 AND key = 'hot'", [co.id]);
    expect(max).toBe(0);
  }, 120_000);

  // docs/access.md, Errors: CONFLICT_RETRY, outcome NOT_APPLIED
  it("a claim whose retries run out (one try; a held claim takes the key's last slot under it) answers CONFLICT_RETRY / NOT_APPLIED and changes nothing", async () => {
    const co = await createCompany(h, 2);
    await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: [
        { title: "first", concurrencyKey: "one" },
        { title: "second", concurrencyKey: "one" },
      ],
    });
    expect((await co.board.raw(SET_LIMIT, { key: "one", max: 1 })).errors).toBeUndefined();
    const [holder, caller] = await actors(co.id);
    const deps: LockDeps = { db: direct.prisma, events: { publish() {} }, leaseSeconds: 60 };
    const holderRun = await startRun(deps, holder!);
    const callerClient = co.agents.find((a) => a.id === caller!.agentId)!.client;
    const callerRun = (await callerClient.ok(Ops.StartRunDocument)).startRun.id;
    const restore = setRetryBudget({ tries: 1, baseMs: 0, capMs: 0, totalMs: 0 });
    try {
      let commit!: () => void;
      const committing = new Promise<void>((resolve) => (commit = resolve));
      // The holder's claim takes the key's one slot and holds its row until told to commit.
      const held = direct.prisma.$transaction(
        async (tx) => {
          const [answer] = await claimNextForEach({ db: tx, events: { publish() {} } }, co.id, [
            { actor: holder!, runId: holderRun.id, includeUnassigned: true },
          ]);
          await committing;
          return answer!;
        },
        { timeout: 30_000 },
      );
      await eventually(async () => {
        const rows = await h.sql(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction' AND query LIKE '%CLAIM_NEXT_FOR_EACH%'",
        );
        return rows.length === 1 ? true : undefined;
      }, "the holder's claim to be made, uncommitted");
      // The caller's claim saw the slot free, took the other issue, and waits on the key's row in the trigger.
      const answer = callerClient.raw<{ claimIssue: { __typename: string } }>(
        `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename } }`,
        { r: callerRun },
      );
      await eventually(async () => {
        const rows = await h.sql(
          "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%CLAIM_NEXT_FOR_EACH%'",
        );
        return rows.length === 1 ? true : undefined;
      }, "the caller's claim to wait on the key");
      commit();
      expect((await held).issue).not.toBeNull();
      const res = await answer;
      expect(res.data ?? null).toBeNull();
      expect(res.errors).toHaveLength(1);
      expect(res.errors![0]!.extensions).toEqual({ code: "CONFLICT_RETRY", outcome: "NOT_APPLIED" });
      expect(res.errors![0]!.message).toMatch(/nothing was changed: retry/);
    } finally {
      restore();
    }
    // Nothing of the caller's claim: its run holds nothing, one CLAIMED event (the holder's), the key counts one.
    const issues = await h.sql<{ status: string; checkout_run_id: string | null; attempt_count: number; lock_epoch: number }>(
      "SELECT status, checkout_run_id, attempt_count, lock_epoch FROM issues WHERE company_id = $1 ORDER BY checkout_run_id NULLS LAST",
      [co.id],
    );
    expect(issues).toEqual([
      { status: "CLAIMED", checkout_run_id: holderRun.id, attempt_count: 0, lock_epoch: 1 },
      { status: "OPEN", checkout_run_id: null, attempt_count: 0, lock_epoch: 0 },
    ]);
    const events = await h.sql<{ kind: string; run_id: string }>("SELECT kind::text, run_id FROM lock_events WHERE company_id = $1", [co.id]);
    expect(events).toEqual([{ kind: "CLAIMED", run_id: holderRun.id }]);
    const { active } = await h.one<{ active: number }>("SELECT active FROM concurrency_keys WHERE company_id = $1 AND key = 'one'", [co.id]);
    expect(active).toBe(1);
    expect(h.logged.filter((l) => l.level === "error")).toEqual([]);
    expect(h.logged.filter((l) => l.msg === "conflict retries exhausted").map((l) => [l.level, l.fields?.tries, l.fields?.path])).toEqual([
      ["warn", 1, "claimIssue"],
    ]);
    // With the budget back, the same claim answers at once: the key is full.
    const again = await callerClient.raw<{ claimIssue: { __typename: string } }>(
      `mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename } }`,
      { r: callerRun },
    );
    expect(again).toEqual({ data: { claimIssue: { __typename: "NoIssueAvailable" } } });
  });
});
