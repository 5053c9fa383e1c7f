// The model explored exhaustively under other bounds than explore.test.ts's
// (a file of its own, so that the explorations run in parallel): leases two
// ticks long, where heartbeats matter, a concurrency key with a limit (with
// agents disabled and enabled: the scheduler passes over a disabled agent),
// and reassignment.
import { describe, expect, it } from "vitest";
import type { UpdateIssueInput } from "../../src/model/index.js";
import { TRANSITIONS, initialState } from "../../src/model/index.js";
import { UPDATES, noViolations, run } from "./coverage.js";

describe("the model, explored exhaustively", () => {
  it("with leases two ticks long (heartbeats keep a run alive across a tick), up to 2 runs at once: every invariant holds", () => {
    const root = initialState({
      agents: ["A", "B"],
      issues: [
        { id: "i1", assigneeAgentId: "A", maxAttempts: 2 },
        { id: "i2", maxAttempts: 2 },
      ],
      leaseLength: 2,
    });
    // disableAgent and enableAgent are left out here (the main exploration has them): they would double this one
    const { result, coverage } = run(
      { roots: [root], maxRuns: 2, alphabet: { updates: UPDATES, finishStatuses: ["SUCCEEDED", "TIMED_OUT"], agentSwitches: false } },
      "leases",
    );
    noViolations(result);
    expect(result.complete).toBe(true);
    expect(coverage.answers).toContain("heartbeatRun:RunUpdated");
    const rows = TRANSITIONS.filter((r) => (r.verb !== "updateIssue" || r.from !== "BACKLOG") && r.verb !== "disableAgent");
    expect([...new Set(rows.map((r) => `${r.verb}:${r.from}->${r.to}`))].filter((r) => !coverage.rows.has(r))).toEqual([]);
  }, 120_000);

  it("with a concurrency key of limit 1 over both issues (one assigned to each agent), key edits, and agents disabled and enabled: no key ever exceeds its limit, and a full key is answered ConcurrencyLimitReached", () => {
    const root = initialState({
      agents: ["A", "B"],
      issues: [
        { id: "i1", assigneeAgentId: "A", maxAttempts: 2, concurrencyKey: "k" },
        { id: "i2", assigneeAgentId: "B", maxAttempts: 2, concurrencyKey: "k" },
      ],
      limits: { k: 1 },
      leaseLength: 1,
    });
    const updates: UpdateIssueInput[] = [{ status: "CANCELLED" }, { concurrencyKey: null }, { concurrencyKey: "k" }];
    const { result, coverage } = run({ roots: [root], maxRuns: 2, alphabet: { updates, finishStatuses: ["SUCCEEDED"] } }, "keys");
    noViolations(result);
    expect(result.complete).toBe(true);
    for (const a of ["claimIssue:ConcurrencyLimitReached", "claimIssue:IssueClaimed(adopted)", "updateIssue:InvalidTransition", "runHeartbeat:HeartbeatTick"]) {
      expect(coverage.answers).toContain(a);
    }
    // the scheduler tick started a run for an agent whose key was full: it claimed nothing and was finished SUCCEEDED
    expect(coverage.schedulerIdleRuns).toBeGreaterThan(0);
    // disabling the agent that filled the key took its slot back
    for (const r of ["disableAgent:CLAIMED->OPEN", "disableAgent:IN_PROGRESS->OPEN"]) expect(coverage.rows).toContain(r);
  }, 120_000);

  it("with the board reassigning issues (to either agent, or to nobody), up to 2 runs at once: every invariant holds, and reassignment never touches a checkout", () => {
    const root = initialState({
      agents: ["A", "B"],
      issues: [
        { id: "i1", assigneeAgentId: "A", maxAttempts: 2 },
        { id: "i2", maxAttempts: 2 },
      ],
      leaseLength: 1,
    });
    const updates: UpdateIssueInput[] = [{ status: "CANCELLED" }, { assigneeAgentId: null }, { assigneeAgentId: "A" }, { assigneeAgentId: "B" }];
    // disableAgent and enableAgent are left out here (the main exploration has them): they would double this one
    const { result, coverage } = run({ roots: [root], maxRuns: 2, alphabet: { updates, finishStatuses: ["SUCCEEDED"], agentSwitches: false } }, "assignees");
    noViolations(result);
    expect(result.complete).toBe(true);
    for (const a of ["claimIssue:CheckoutConflict(dead)", "claimIssue:IssueClaimed(adopted)", "updateIssue:IssueUpdated"])
      expect(coverage.answers).toContain(a);
  }, 120_000);
});
