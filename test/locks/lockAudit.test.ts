// lockAudit (src/reads/lockAudit.ts): the invariants of docs/invariants.md
// computed as numbers from the tables and the ledger.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

// docs/invariants.md #3: the two locks change together with the status, in one row update
// docs/invariants.md #8: dead runs never strand work, and recovery never touches a live lock
it("lockAudit reads zeros on a healthy company and counts what is wrong", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const zero = { doubleClaims: 0, locksHeldByDeadRuns: 0, halfReleasedLocks: 0, unescalatedExhausted: 0 };
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "x", assigneeAgentId: agent.id } });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
  expect((await co.board.ok(Ops.LockAuditDocument, { companyId: co.id })).lockAudit).toMatchObject({
    ...zero,
    attemptHistogram: [{ attemptCount: 0, issues: 1 }],
  });
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [run.id]);
  const other = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "y", maxAttempts: 1 } });
  await h.sql("UPDATE issues SET attempt_count = 1 WHERE id = $1", [other.createIssue.id]);
  // A forged ledger row claiming the issue for another run while it was held.
  await h.sql(
    `INSERT INTO lock_events (company_id, seq, issue_id, kind, status, run_id, checkout_run_id)
     VALUES ($1, 1000, $2, 'CLAIMED', 'CLAIMED', gen_random_uuid(), gen_random_uuid())`,
    [co.id, createIssue.id],
  );
  const { lockAudit } = await co.board.ok(Ops.LockAuditDocument, { companyId: co.id });
  expect(lockAudit).toMatchObject({ doubleClaims: 1, locksHeldByDeadRuns: 1, halfReleasedLocks: 0, unescalatedExhausted: 1 });
  expect(lockAudit.attemptHistogram).toEqual([
    { attemptCount: 0, issues: 1 },
    { attemptCount: 1, issues: 1 },
  ]);
});
