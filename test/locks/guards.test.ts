// Guards that a quiet test suite would not notice missing. Each test here fails
// when its guard is taken out: the claim's SKIP LOCKED, the batch claim's run
// liveness check, the execution lock's CHECK constraint, and the company
// filter on the issues cursor.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

/** Resolves with `work`'s result, or rejects if it takes longer than `ms` (it is waiting on a lock). */
async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} waited more than ${ms} ms`)), ms)));
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

// docs/invariants.md #1: at most one run holds an issue's checkout
it("claims the next issue past one whose row another transaction has locked, without waiting for it (SKIP LOCKED)", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "first in line", priority: "CRITICAL", assigneeAgentId: agent.id },
      { title: "second", priority: "LOW", assigneeAgentId: agent.id },
    ],
  });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const other = new pg.Client({ connectionString: h.database.url });
  await other.connect();
  try {
    await other.query("BEGIN");
    await other.query("SELECT 1 FROM issues WHERE id = $1 FOR UPDATE", [createIssues[0]!.id]);
    // Generous for a loaded machine, and still far short of the 30 s statement timeout a blocked claim would wait for.
    const { claimIssue } = await within(10_000, "the claim", agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id }));
    expect(claimIssue.__typename === "IssueClaimed" && claimIssue.issue.id).toBe(createIssues[1]!.id);
  } finally {
    await other.query("ROLLBACK");
    await other.end();
  }
});

// docs/invariants.md #5: a dead run can never take a lock or act
it("a batch claim by a dead run claims nothing at all", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "a", assigneeAgentId: agent.id },
      { title: "b", assigneeAgentId: agent.id },
    ],
  });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [run.id]);
  for (const acquireExecution of [false, true]) {
    const { claimIssues } = await agent.client.ok(Ops.ClaimIssuesDocument, { runId: run.id, limit: 10, acquireExecution });
    expect(claimIssues.__typename).toBe("RunNotActive");
  }
  const held = await h.sql("SELECT id FROM issues WHERE company_id = $1 AND (checkout_run_id IS NOT NULL OR status <> 'OPEN')", [co.id]);
  expect(held).toEqual([]);
  expect(await h.sql("SELECT seq FROM lock_events WHERE company_id = $1", [co.id])).toEqual([]);
});

// docs/invariants.md #2: no attempt of an issue is worked by two runs
it("the database refuses an execution lock without its holder's name or its start time (issues_execution_details)", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "t", assigneeAgentId: agent.id } });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id });
  await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: createIssue.id });
  for (const column of ["execution_locked_at", "execution_agent_name_key"]) {
    await expect(h.sql(`UPDATE issues SET ${column} = NULL WHERE id = $1`, [createIssue.id]), column).rejects.toThrow(/issues_execution_details/);
  }
  await expect(h.sql("UPDATE issues SET execution_run_id = NULL WHERE id = $1", [createIssue.id])).rejects.toThrow(/check constraint/);
});

it("a cursor naming another company's issue reads nothing of this company", async () => {
  const theirs = await createCompany(h, 0);
  const { createIssue: foreign } = await theirs.board.ok(Ops.CreateIssueDocument, { input: { title: "theirs, created first" } });
  const ours = await createCompany(h, 0);
  await ours.board.ok(Ops.CreateIssuesDocument, { inputs: [{ title: "ours 1" }, { title: "ours 2" }] });
  // A cursor is base64url("issue:" + id): anyone can make one for any id.
  const forged = Buffer.from(`issue:${foreign.id}`).toString("base64url");
  const { issues } = await ours.board.ok(Ops.IssuesDocument, { companyId: ours.id, after: forged, first: 10 });
  expect(issues.edges).toEqual([]);
  expect(issues.pageInfo.hasNextPage).toBe(false);
});
