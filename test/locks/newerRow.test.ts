// A statement that waits for an issue row another statement is changing
// reads the row at its newest version once it may go on (lockedIssuesCte in
// src/locks/shared/fragments.ts): what it decides, writes and answers must follow
// that version, not its own older snapshot. The conformance run found three
// places where it did not; these races, made deterministic, keep them fixed.
//
// The stagger: a gate connection holds the key row of the issue. The first
// statement changes the issue (its row lock taken, uncommitted) and then
// waits in the keys' trigger for the key row; the second statement starts,
// takes its snapshot (the issue before the first's change) and waits for
// the issue row; then the gate opens. Real verbs, real PostgreSQL.
import { expect, it } from "vitest";
import { untilWaiting, useRealWorld } from "../helpers/realWorld.js";
import type { RealAnswer, Sequence } from "../conformance/adapter.js";
import type { Command, InitialStateInput } from "../../src/model/index.js";

const real = useRealWorld();

const KEY = "deploy";

/** A company as `initial` says, with one RUNNING run of agent A bound as r1. */
async function arrange(initial: InitialStateInput): Promise<Sequence> {
  const seq = await real.world.setup(initial);
  const started = (await seq.exec({ verb: "startRun", agentId: "A" })) as unknown as { run: { id: string } };
  seq.names.bind("r1", started.run.id);
  return seq;
}

/** `first` changes the issue and holds it uncommitted (waiting for the key row the gate holds) while `second` starts and waits for it; both answers. */
async function staggered(seq: Sequence, first: Command, second: Command): Promise<[RealAnswer, RealAnswer]> {
  const admin = real.world.admin;
  await admin.query("BEGIN");
  let a: Promise<RealAnswer>;
  let b: Promise<RealAnswer>;
  try {
    await admin.query("SELECT 1 FROM concurrency_keys WHERE company_id = $1 AND key = $2 FOR UPDATE", [seq.companyId, KEY]);
    a = seq.exec(first, 0);
    await untilWaiting(real.world, 1);
    b = seq.exec(second, 1);
    await untilWaiting(real.world, 2);
  } finally {
    await admin.query("COMMIT");
  }
  return [await a!, await b!];
}

async function issueRow(seq: Sequence, id: string) {
  const { rows } = await real.world.admin.query(
    "SELECT status, checkout_run_id, execution_run_id, attempt_count, lock_epoch, assignee_agent_id FROM issues WHERE id = $1",
    [seq.names.real(id)],
  );
  return rows[0];
}

it("acquireExecution waiting on its own run's claim takes the execution lock: no issues_lock_pair error", async () => {
  const seq = await arrange({ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A", concurrencyKey: KEY }] });
  const [claimed, acquired] = await staggered(
    seq,
    { verb: "claimIssue", agentId: "A", runId: "r1" },
    { verb: "acquireExecution", agentId: "A", runId: "r1", issueId: "i1" },
  );
  expect(claimed.__typename).toBe("IssueClaimed");
  expect(acquired).toMatchObject({ __typename: "ExecutionAcquired", alreadyHeld: false, issue: { status: "IN_PROGRESS", attemptCount: 1 } });
  const r1 = seq.names.real("r1");
  expect(await issueRow(seq, "i1")).toMatchObject({ status: "IN_PROGRESS", checkout_run_id: r1, execution_run_id: r1, attempt_count: 1, lock_epoch: 1 });
});

it("updateIssue waiting on a claim keeps the claim's holder: no issues_lock_pair error", async () => {
  const seq = await arrange({ agents: ["A", "B"], issues: [{ id: "i1", assigneeAgentId: "A", concurrencyKey: KEY }] });
  const [claimed, updated] = await staggered(
    seq,
    { verb: "claimIssues", agentId: "A", runId: "r1", limit: 1 },
    { verb: "updateIssue", issueId: "i1", input: { assigneeAgentId: "B", maxAttempts: 5 } },
  );
  expect(claimed.__typename).toBe("IssuesClaimed");
  expect(updated).toMatchObject({ __typename: "IssueUpdated", issue: { status: "CLAIMED", checkoutRunId: seq.names.real("r1"), maxAttempts: 5 } });
  expect(await issueRow(seq, "i1")).toMatchObject({
    status: "CLAIMED",
    checkout_run_id: seq.names.real("r1"),
    assignee_agent_id: seq.names.real("B"),
    lock_epoch: 1,
  });
});

it("a claim by id waiting on the release of the issue that filled its key counts that slot free", async () => {
  const seq = await arrange({ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A", concurrencyKey: KEY }], limits: { [KEY]: 1 } });
  expect((await seq.exec({ verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" })).__typename).toBe("IssueClaimed");
  const [released, claimed] = await staggered(
    seq,
    { verb: "releaseIssue", agentId: "A", runId: "r1", issueId: "i1", outcome: "REQUEUE" },
    { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1", expectedStatuses: ["OPEN"] },
  );
  expect(released.__typename).toBe("IssueReleased");
  // serially: released, then claimed again (never ConcurrencyLimitReached: the only active issue of the key was this one)
  expect(claimed).toMatchObject({ __typename: "IssueClaimed", alreadyHeld: false, issue: { status: "CLAIMED", lockEpoch: 2 } });
  const { rows } = await real.world.admin.query("SELECT active FROM concurrency_keys WHERE company_id = $1 AND key = $2", [seq.companyId, KEY]);
  expect(rows[0].active).toBe(1);
});

it("a heartbeat of an expired run waiting for another statement to end that run answers what that statement made it", async () => {
  // The fourth race (conformance: heartbeatRun beside disableAgent): DISABLE_AGENT cancels the run while the
  // heartbeat's DIAGNOSE_RUN, whose snapshot still has it RUNNING and expired, waits for the row to time it out.
  // Here an open transaction does DISABLE_AGENT's change to the run, so that the heartbeat waits for certain.
  const seq = await arrange({ agents: ["A"], issues: [{ id: "i1", assigneeAgentId: "A" }], leaseLength: 1 });
  expect((await seq.exec({ verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1" })).__typename).toBe("IssueClaimed");
  await seq.exec({ verb: "tick", by: 2 });
  const admin = real.world.admin;
  await admin.query("BEGIN");
  let beat: Promise<RealAnswer>;
  try {
    await admin.query("UPDATE heartbeat_runs SET status = 'CANCELLED', finished_at = now() WHERE id = $1", [seq.names.real("r1")]);
    beat = seq.exec({ verb: "heartbeatRun", agentId: "A", runId: "r1" }, 1);
    await untilWaiting(real.world, 1);
  } finally {
    await admin.query("COMMIT");
  }
  // serially: cancelled first, so the heartbeat finds r1 CANCELLED (never TIMED_OUT for a run that is CANCELLED)
  expect(await beat!).toMatchObject({ __typename: "RunNotActive", status: "CANCELLED" });
  const { rows } = await admin.query("SELECT status FROM heartbeat_runs WHERE id = $1", [seq.names.real("r1")]);
  expect(rows[0].status).toBe("CANCELLED");
});
