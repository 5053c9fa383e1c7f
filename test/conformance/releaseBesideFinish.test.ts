// A release racing its own run's end answers as one serial order does:
// released, or RunNotActive, never NotLockOwner (found by the conformance
// run's fused-call races; RELEASE_IF_CHECKOUT_HELD now reads its runs FOR
// SHARE, docs/invariants.md #5). Each race is replayed against the model,
// ungated, many times: the model's serial orders are the judge.
import { it } from "vitest";
import { useRealWorld } from "../helpers/realWorld.js";
import { replay } from "./conformance.js";
import type { Scenario } from "./conformance.js";

const real = useRealWorld();

function scenario(next: boolean, ending: "finishRun" | "disableAgent"): Scenario {
  return {
    initial: {
      agents: ["A", "B"],
      issues: [
        { id: "i1", assigneeAgentId: "A", maxAttempts: 1 },
        { id: "i2", assigneeAgentId: "A", maxAttempts: 1 },
      ],
      leaseLength: 1,
    },
    steps: [
      { one: { verb: "startRun", agentId: "A" } },
      { one: { verb: "claimIssue", agentId: "A", runId: "r1", issueId: "i1", ...(next ? { startExecution: true } : {}) } },
      { one: { verb: "startRun", agentId: "B" } },
      {
        pair: [
          {
            verb: "releaseIssue",
            agentId: "A",
            runId: "r1",
            issueId: "i1",
            outcome: "FAILED",
            ...(next ? { next: { includeUnassigned: true, startExecution: false } } : {}),
          },
          ending === "finishRun"
            ? { verb: "finishRun", agentId: "A", runId: "r1", status: "SUCCEEDED" }
            : { verb: "disableAgent", agentId: "A", reason: "operator" },
        ],
        gate: false,
      },
    ],
  };
}

for (const [next, ending, rounds] of [
  [false, "finishRun", 60],
  [true, "finishRun", 60],
  [false, "disableAgent", 30],
] as const) {
  it(`releaseIssue${next ? "(next)" : ""} beside its own run's ${ending}: every round matches a serial order (${rounds} rounds)`, async () => {
    for (let n = 0; n < rounds; n++) await replay(real.world, scenario(next, ending));
  });
}
