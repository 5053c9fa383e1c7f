// Adopting a dead holder's checkout while another statement times that holder
// out. The holder's run row is locked and updated by a second connection
// (what recovery's first step, the dead agent's own heartbeatRun, or another
// adopter does), and held there until the claim is waiting on it: the claim
// must then decide liveness from the run's newest version (TIMED_OUT: dead)
// and adopt, not answer a CheckoutConflict that calls the dead holder live.
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { checkHistory } from "../../support/history.js";
import { eventually, race } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

/** A company whose first agent's run holds an issue and has just died (lease lapsed, still RUNNING). */
async function deadHolder() {
  const co = await createCompany(h, 2);
  const [holder, adopter] = co.agents;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "held by the dead" } });
  const deadRun = (await holder!.client.ok(Ops.StartRunDocument)).startRun.id;
  const claimed = await holder!.client.ok(Ops.ClaimIssueDocument, { runId: deadRun, issueId: createIssue.id });
  expect(claimed.claimIssue.__typename).toBe("IssueClaimed");
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [deadRun]);
  const adopterRun = (await adopter!.client.ok(Ops.StartRunDocument)).startRun.id;
  return { co, issueId: createIssue.id, deadRun, adopter: adopter!, adopterRun };
}

// docs/invariants.md #5: a dead run can never take a lock or act
// docs/invariants.md #13: lockEpoch goes up by one per change of hands and never goes down
it.each([
  ["times the run out (recovery's first step, or its own late heartbeat)", "UPDATE heartbeat_runs SET status = 'TIMED_OUT', finished_at = now() WHERE id = $1"],
  ["only locks the run row, and changes nothing", "SELECT 1 FROM heartbeat_runs WHERE id = $1 FOR UPDATE"],
])("adopts a dead holder's checkout while another transaction %s", async (_what, statement) => {
  const { issueId, deadRun, adopter, adopterRun } = await deadHolder();
  const other = new pg.Client({ connectionString: h.database.url });
  await other.connect();
  try {
    await other.query("BEGIN");
    await other.query(statement, [deadRun]);
    const claim = adopter.client.ok(Ops.ClaimIssueDocument, { runId: adopterRun, issueId, expectedStatuses: ["CLAIMED"] });
    // The claim has taken its snapshot and waits for the run row.
    await eventually(async () => {
      const waiting = await h.sql(
        // The statement shows under its name (docs/invariants.md), which also names its prepared statement.
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '/* CHECKOUT_IF_EXPECTED */%' AND pid <> $1",
        [(await other.query("SELECT pg_backend_pid() AS pid")).rows[0].pid],
      );
      return waiting.length > 0 ? true : undefined;
    }, "the claim to wait on the run row");
    await other.query("COMMIT");
    const { claimIssue } = await claim;
    expect(claimIssue).toMatchObject({ __typename: "IssueClaimed", adopted: true });
  } finally {
    await other.end();
  }
  const issue = await h.one<{ checkout_run_id: string; lock_epoch: number }>("SELECT checkout_run_id, lock_epoch FROM issues WHERE id = $1", [issueId]);
  expect(issue).toEqual({ checkout_run_id: adopterRun, lock_epoch: 2 });
  const dead = await h.one<{ status: string }>("SELECT status::text FROM heartbeat_runs WHERE id = $1", [deadRun]);
  expect(dead.status).toBe("TIMED_OUT");
  const kinds = await h.sql<{ kind: string }>("SELECT kind::text FROM lock_events WHERE issue_id = $1 ORDER BY seq", [issueId]);
  expect(kinds.map((k) => k.kind)).toEqual(["CLAIMED", "ADOPTED"]);
});

it("six agents adopting six issues of one dead run at once all adopt, round after round", async () => {
  for (let round = 0; round < 10; round++) {
    const co = await createCompany(h, 7);
    const [holder, ...adopters] = co.agents;
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: adopters.map((_, i) => ({ title: `issue ${i}` })) });
    const deadRun = (await holder!.client.ok(Ops.StartRunDocument)).startRun.id;
    for (const issue of createIssues) await holder!.client.ok(Ops.ClaimIssueDocument, { runId: deadRun, issueId: issue.id });
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [deadRun]);
    const runs = await Promise.all(adopters.map(async (a) => (await a.client.ok(Ops.StartRunDocument)).startRun.id));
    const answers = await race(adopters.length, (i) =>
      adopters[i]!.client.ok(Ops.ClaimIssueDocument, { runId: runs[i]!, issueId: createIssues[i]!.id, expectedStatuses: ["CLAIMED"] }),
    );
    expect(
      answers.map((a) => (a.claimIssue.__typename === "IssueClaimed" ? a.claimIssue.adopted : a.claimIssue.__typename)),
      `round ${round}`,
    ).toEqual(adopters.map(() => true));
    const told = answers.flatMap((a, i) =>
      a.claimIssue.__typename === "IssueClaimed"
        ? [{ kind: "claimed" as const, runId: runs[i]!, issueId: a.claimIssue.issue.id, lockEpoch: a.claimIssue.issue.lockEpoch }]
        : [],
    );
    expect(await checkHistory(h.database.url, co.id, told)).toEqual([]);
  }
});
