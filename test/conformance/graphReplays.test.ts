// Two disagreements between the API and issue 29 that the conformance run
// found (seed 7), each made deterministic with the real verbs; both fixed
// (src/locks/graph/creation.ts: a key hit is not checked;
// src/locks/claim/checkoutIfExpected.ts, READ_WAITING_ON).
import { expect, it } from "vitest";
import { untilWaiting, useRealWorld } from "../helpers/realWorld.js";
import type { RealAnswer, Sequence } from "./adapter.js";

const real = useRealWorld();

const runOf = async (seq: Sequence, agentId: string, name: string) => {
  const started = (await seq.exec({ verb: "startRun", agentId })) as RealAnswer;
  seq.names.bind(name, started.run.id);
};

it("a create whose idempotency key the company has answers that issue, whatever its other fields say (a missing blocker too)", async () => {
  // the API answered NOT_FOUND: it checked the blockers of an input its key already answered
  const seq = await real.world.setup({ agents: ["A"], issues: [{ id: "i1" }, { id: "i2", idempotencyKey: "job-1" }] });
  const answer = await seq.exec({ verb: "createIssues", inputs: [{ idempotencyKey: "job-1", blockedBy: ["i-unknown"] }] });
  expect(answer).toMatchObject({ __typename: "IssuesCreated", issues: [{ id: seq.names.real("i2") }] });
});

it("IssueWaiting lists what the issue waits on at the version it was judged on: an edge added while the claim waited is in waitingOn", async () => {
  // A claim by id whose snapshot predates a concurrent addDependency judges the newest row (waiting_count 1:
  // IssueWaiting); it listed waitingOn from its snapshot: [], an answer that waited on nothing. Stagger: a gate holds B's run row; B's claim takes its snapshot and waits for it;
  // the board adds i1 < i2 and commits; the gate opens.
  const seq = await real.world.setup({ agents: ["A", "B"], issues: [{ id: "i1" }, { id: "i2" }] });
  await runOf(seq, "B", "r1");
  const admin = real.world.admin;
  await admin.query("BEGIN");
  let claim: Promise<RealAnswer>;
  try {
    await admin.query("SELECT 1 FROM heartbeat_runs WHERE id = $1 FOR UPDATE", [seq.names.real("r1")]);
    claim = seq.exec({ verb: "claimIssue", agentId: "B", runId: "r1", issueId: "i1" }, 0);
    await untilWaiting(real.world, 1);
    expect(await seq.exec({ verb: "addDependency", issueId: "i1", blockedById: "i2" }, 1)).toMatchObject({ __typename: "DependencyAdded" });
  } finally {
    await admin.query("COMMIT");
  }
  expect(await claim!).toMatchObject({ __typename: "IssueWaiting", issueId: seq.names.real("i1"), waitingOn: [seq.names.real("i2")] });
});
