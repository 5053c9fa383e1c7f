// The claim order holds under contention (docs/lifecycle.md, "Claim order":
// priority first): when the pool's next issue is locked by a concurrent
// statement, a claim that includes the pool takes the pool's following issue
// of that priority, not the agent's own issue of a lower one. (The fill that
// steps past locked rows used to come after every own issue, whatever their
// priorities; the conformance run found it, seed 1203.) Real verbs, real
// PostgreSQL; an open transaction holds the locked row.
import { expect, it } from "vitest";
import { useRealWorld } from "../helpers/realWorld.js";

const real = useRealWorld();

it("a claim whose next pool issue is locked takes the next pool issue of that priority before its own lower one", async () => {
  const seq = await real.world.setup({
    agents: ["A"],
    issues: [
      { id: "i1", assigneeAgentId: null, priority: "MEDIUM" },
      { id: "i2", assigneeAgentId: null, priority: "MEDIUM" },
      { id: "i3", assigneeAgentId: "A", priority: "LOW" },
    ],
  });
  const started = (await seq.exec({ verb: "startRun", agentId: "A" })) as unknown as { run: { id: string } };
  seq.names.bind("r1", started.run.id);
  await real.world.admin.query("BEGIN");
  try {
    await real.world.admin.query("SELECT 1 FROM issues WHERE id = $1 FOR UPDATE", [seq.names.real("i1")]);
    const claimed = (await seq.exec({ verb: "claimIssue", agentId: "A", runId: "r1", includeUnassigned: true })) as {
      __typename: string;
      issue?: { id: string };
    };
    expect(claimed.__typename).toBe("IssueClaimed");
    expect(seq.names.model(claimed.issue!.id)).toBe("i2");
    // and a batch of two: i2 (MEDIUM) then i3 (LOW)
    const started2 = (await seq.exec({ verb: "startRun", agentId: "A" })) as unknown as { run: { id: string } };
    seq.names.bind("r2", started2.run.id);
    const batch = (await seq.exec({ verb: "claimIssues", agentId: "A", runId: "r2", limit: 2, includeUnassigned: true })) as unknown as {
      issues: { id: string }[];
    };
    expect(batch.issues.map((i) => seq.names.model(i.id))).toEqual(["i3"]);
  } finally {
    await real.world.admin.query("ROLLBACK");
  }
});
