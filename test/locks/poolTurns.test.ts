// Claim-next never answers NoIssueAvailable while an issue the caller may
// claim is claimable (OPEN, an attempt left, a key with room), whatever the
// number of keys, their names and what other agents have assigned
// (docs/lifecycle.md, "Claim order"; docs/invariants.md, 15). Real verbs, real
// PostgreSQL; an open transaction stands for concurrent claimers holding rows.
import { expect, it } from "vitest";
import { useRealWorld } from "../helpers/realWorld.js";
import type { Sequence } from "../conformance/adapter.js";
import type { IssueInput } from "../../src/model/index.js";

const real = useRealWorld();

const keyName = (n: number) => `k${String(n).padStart(2, "0")}`;

async function startRun(seq: Sequence, agentId: string, name: string): Promise<void> {
  const started = (await seq.exec({ verb: "startRun", agentId })) as unknown as { run: { id: string } };
  seq.names.bind(name, started.run.id);
}

const claimedId = (seq: Sequence, answer: { __typename: string; issue?: { id: string } }) =>
  answer.__typename === "IssueClaimed" ? seq.names.model(answer.issue!.id) : answer.__typename;

it("keys whose only work is assigned to an idle agent do not hide a limited key's pool issue", async () => {
  // 10 keys, each with one HIGH issue assigned to A (who never claims), sort
  // before "zz" and were never served; zz (limit 5) has the only pool issue.
  const issues: IssueInput[] = Array.from({ length: 10 }, (_, n) => ({ id: `a${n}`, assigneeAgentId: "A", priority: "HIGH", concurrencyKey: keyName(n) }));
  issues.push({ id: "pool", assigneeAgentId: null, priority: "HIGH", concurrencyKey: "zz" });
  const seq = await real.world.setup({ agents: ["A", "B"], issues, limits: { zz: 5 } });
  await startRun(seq, "B", "r1");
  const one = await seq.exec({ verb: "claimIssue", agentId: "B", runId: "r1", includeUnassigned: true });
  expect(claimedId(seq, one)).toBe("pool");
  await seq.exec({ verb: "releaseIssue", agentId: "B", runId: "r1", issueId: "pool", outcome: "REQUEUE" });
  const batch = (await seq.exec({ verb: "claimIssues", agentId: "B", runId: "r1", limit: 1, includeUnassigned: true })) as unknown as {
    __typename: string;
    issues?: { id: string }[];
  };
  expect(batch.__typename).toBe("IssuesClaimed");
  expect(batch.issues!.map((i) => seq.names.model(i.id))).toEqual(["pool"]);
});

it("a disabled agent's assigned work in many keys does not hide the pool's", async () => {
  // the realistic trigger: A held assigned issues in 12 keys (served before
  // "repo" was), is disabled, and its issues go back to OPEN, still assigned to A
  const issues: IssueInput[] = Array.from({ length: 12 }, (_, n) => ({ id: `a${n}`, assigneeAgentId: "A", priority: "HIGH", concurrencyKey: keyName(n) }));
  issues.push({ id: "pool", assigneeAgentId: null, priority: "HIGH", concurrencyKey: "repo" });
  const seq = await real.world.setup({ agents: ["A", "B"], issues, limits: { repo: 2 } });
  await startRun(seq, "A", "ra");
  const took = (await seq.exec({ verb: "claimIssues", agentId: "A", runId: "ra", limit: 12 })) as unknown as { issues: unknown[] };
  expect(took.issues).toHaveLength(12);
  await startRun(seq, "B", "rb");
  expect(claimedId(seq, await seq.exec({ verb: "claimIssue", agentId: "B", runId: "rb", includeUnassigned: true }))).toBe("pool");
  await seq.exec({ verb: "releaseIssue", agentId: "B", runId: "rb", issueId: "pool", outcome: "REQUEUE" });
  await seq.exec({ verb: "disableAgent", agentId: "A", reason: "operator" });
  expect(claimedId(seq, await seq.exec({ verb: "claimIssue", agentId: "B", runId: "rb", includeUnassigned: true }))).toBe("pool");
});

it("a pool claim finds a limited key with room past every key whose head concurrent claimers hold", async () => {
  // 12 keys of limit 1, one pool issue each; 10 of their issues are locked by
  // another transaction (as 10 claimers that read the same turn order would
  // hold them): the claim takes one of the other two, not NoIssueAvailable.
  const issues: IssueInput[] = Array.from({ length: 12 }, (_, n) => ({ id: `p${n}`, assigneeAgentId: null, priority: "MEDIUM", concurrencyKey: keyName(n) }));
  const limits = Object.fromEntries(Array.from({ length: 12 }, (_, n) => [keyName(n), 1]));
  const seq = await real.world.setup({ agents: ["B"], issues, limits });
  await startRun(seq, "B", "r1");
  const held = Array.from({ length: 10 }, (_, n) => seq.names.real(`p${n}`));
  await real.world.admin.query("BEGIN");
  try {
    await real.world.admin.query("SELECT 1 FROM issues WHERE id = ANY($1::uuid[]) FOR UPDATE", [held]);
    const one = await seq.exec({ verb: "claimIssue", agentId: "B", runId: "r1", includeUnassigned: true });
    expect(claimedId(seq, one)).toBe("p10");
    const two = (await seq.exec({ verb: "claimIssues", agentId: "B", runId: "r1", limit: 5, includeUnassigned: true })) as unknown as {
      issues: { id: string }[];
    };
    expect(two.issues.map((i) => seq.names.model(i.id))).toEqual(["p11"]);
  } finally {
    await real.world.admin.query("ROLLBACK");
  }
});
