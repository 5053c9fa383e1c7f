// Exhaustive exploration of the lock protocol's model (src/model/, issue 17
// part 2): every reachable state of small companies, every command in each,
// every invariant of docs/invariants.md in every state and on every
// transition, and coverage: every verb fired, in every issue status, and
// every row of docs/lifecycle.md's transition table made. Pure computation:
// no database.
import { describe, expect, it } from "vitest";
import type { Answer, Command, State, Step } from "../../src/model/index.js";
import { GRAPH_VERBS, TRANSITIONS, VERBS, apply, explore, initialState } from "../../src/model/index.js";
import { ISSUE_STATUSES } from "../../src/domain/types.js";
import { UPDATES, noViolations, run } from "./coverage.js";

describe("the model, explored exhaustively", () => {
  it("2 agents, 2 issues (one assigned, one unassigned in BACKLOG), up to 3 runs at once, maxAttempts 2: every invariant holds in every reachable state and on every transition, and every verb fires in every status", () => {
    const root = initialState({
      agents: ["A", "B"],
      issues: [
        { id: "i1", assigneeAgentId: "A", maxAttempts: 2 },
        { id: "i2", status: "BACKLOG", maxAttempts: 2 },
      ],
      leaseLength: 1,
    });
    const { result, coverage } = run({ roots: [root], maxRuns: 3, alphabet: { updates: UPDATES, finishStatuses: ["SUCCEEDED"] } }, "main");
    noViolations(result);
    expect(result.complete).toBe(true);
    expect(result.states).toBeGreaterThan(10_000);

    // every verb fired (the work graph's: workGraph.test.ts)
    expect([...coverage.verbs].sort()).toEqual(VERBS.filter((v) => !GRAPH_VERBS.includes(v)).sort());
    // every row of docs/lifecycle.md's table, by its verb
    const rows = [...new Set(TRANSITIONS.map((r) => `${r.verb}:${r.from}->${r.to}`))];
    expect(rows.filter((r) => !coverage.rows.has(r))).toEqual([]);
    // every targeted verb fired in every one of the eight statuses
    const targeted = [
      "claimIssue",
      "acquireExecution",
      "releaseIssue:DONE",
      "releaseIssue:BLOCKED",
      "releaseIssue:FAILED",
      "releaseIssue:REQUEUE",
      "forceReleaseIssue",
      ...ISSUE_STATUSES.map((s) => `updateIssue:${s}`),
    ];
    const missing = targeted.flatMap((v) => ISSUE_STATUSES.map((s) => `${v}@${s}`)).filter((x) => !coverage.firedIn.has(x));
    expect(missing).toEqual([]);
    // every answer of every verb (ConcurrencyLimitReached: the keys exploration below)
    const answers = [
      ...["IssueClaimed", "IssueClaimed(alreadyHeld)", "IssueClaimed(adopted)", "NoIssueAvailable", "CheckoutConflict(live)", "CheckoutConflict(dead)"].map(
        (a) => `claimIssue:${a}`,
      ),
      ...["UnexpectedStatus", "AttemptsExhausted", "RunNotActive", "IssueNotFound", "Error(FORBIDDEN)"].map((a) => `claimIssue:${a}`),
      ...["IssuesClaimed", "NoIssueAvailable", "RunNotActive"].map((a) => `claimIssues:${a}`),
      ...[
        "ExecutionAcquired",
        "ExecutionAcquired(alreadyHeld)",
        "ExecutionConflict",
        "NotCheckedOut",
        "AttemptsExhausted",
        "RunNotActive",
        "IssueNotFound",
        "Error(FORBIDDEN)",
      ].map((a) => `acquireExecution:${a}`),
      ...["IssueReleased", "NotLockOwner", "InvalidTransition", "RunNotActive", "IssueNotFound", "Error(FORBIDDEN)"].map((a) => `releaseIssue:${a}`),
      ...["IssuesReleased", "IssuesReleased(refused)", "RunNotActive"].map((a) => `releaseIssues:${a}`),
      ...["IssueReleased", "IssueNotFound", "Error(BAD_USER_INPUT)"].map((a) => `forceReleaseIssue:${a}`),
      ...["IssueUpdated", "InvalidTransition", "IssueNotFound", "Error(BAD_USER_INPUT)"].map((a) => `updateIssue:${a}`),
      ...["HeartbeatRun", "Error(FORBIDDEN)"].map((a) => `startRun:${a}`),
      ...["RunUpdated", "RunNotActive", "Error(FORBIDDEN)"].map((a) => `heartbeatRun:${a}`),
      ...["RunUpdated", "RunNotActive", "Error(FORBIDDEN)", "Error(BAD_USER_INPUT)"].map((a) => `finishRun:${a}`),
      "runHeartbeat:HeartbeatTick",
      ...["Agent(disabled)", "Error(BAD_USER_INPUT)", "Error(NOT_FOUND)"].map((a) => `disableAgent:${a}`),
      ...["Agent(enabled)", "Error(NOT_FOUND)"].map((a) => `enableAgent:${a}`),
      "tick:Ticked",
      "sweep:SweepCounts",
    ];
    expect(answers.filter((a) => !coverage.answers.has(a))).toEqual([]);
    // every event reason a sequential history can write
    const reasons = [
      "CLAIMED:null",
      "ADOPTED:HOLDER_DEAD",
      "ESCALATED:HOLDER_DEAD",
      "EXECUTION_ACQUIRED:null",
      ...["DONE", "BLOCKED", "FAILED", "REQUEUE", "RUN_FINISHED"].map((r) => `RELEASED:${r}`),
      "RECOVERED:LEASE_EXPIRED",
      "ESCALATED:LEASE_EXPIRED",
      "ESCALATED:ATTEMPTS_EXHAUSTED",
      "RECOVERED:AGENT_DISABLED",
      "ESCALATED:AGENT_DISABLED",
      "FORCE_RELEASED:operator",
      ...["BACKLOG -> OPEN", "BLOCKED -> OPEN", "BLOCKED -> ESCALATED", "ESCALATED -> OPEN", "CLAIMED -> CANCELLED", "IN_PROGRESS -> CANCELLED"].map(
        (r) => `STATUS_CHANGED:${r}`,
      ),
    ];
    expect(reasons.filter((r) => !coverage.reasons.has(r))).toEqual([]);
    // Recovery's RUN_FINISHED and RUN_MISSING need a terminal run that still
    // holds a lock, or a run deleted while it holds one: finishRun releases
    // everything in the same transaction and retention never deletes a
    // holder, so no sequential history reaches them (only a race would).
    expect([...coverage.reasons].filter((r) => /^(RECOVERED|ESCALATED):RUN_(FINISHED|MISSING)$/.test(r))).toEqual([]);
    // disableAgent ended live and expired RUNNING runs, and took back the locks of live runs, of expired ones
    // not yet written down, and of runs a heartbeat had written TIMED_OUT but no sweep had reached
    expect([...coverage.disabling].sort()).toEqual(["cancelled:expired", "cancelled:live", "recovered:TIMED_OUT", "recovered:expired", "recovered:live"]);
  }, 120_000);
});

/** A small exploration with one verb broken on purpose: it must report the rule the break violates. */
function catches(mutant: (state: State, c: Command) => Step<Answer> | null, invariant: RegExp): void {
  const root = initialState({
    agents: ["A", "B"],
    issues: [
      { id: "i1", assigneeAgentId: "A", maxAttempts: 2 },
      { id: "i2", maxAttempts: 2 },
    ],
    leaseLength: 1,
  });
  const result = explore({
    roots: [root],
    maxRuns: 2,
    maxViolations: 1,
    alphabet: { updates: UPDATES, finishStatuses: ["SUCCEEDED"] },
    apply: (state, c) => mutant(state, c) ?? apply(state, c),
  });
  expect(result.violations.length).toBeGreaterThan(0);
  expect(result.violations[0]!.invariant).toMatch(invariant);
}

describe("the exploration catches a broken rule", () => {
  it("acquireExecution that skips the attempts check", () => {
    catches((state, c) => {
      if (c.verb !== "acquireExecution") return null;
      // raise maxAttempts for the check only, then put it back: the attempt is started although none was left
      const issue = state.issues.find((i) => i.id === c.issueId);
      if (!issue) return null;
      const input = { ...state, issues: state.issues.map((i) => (i.id === c.issueId ? { ...i, maxAttempts: 100 } : i)) };
      const lifted = apply(input, c);
      if (lifted.state === input) return null;
      const after = { ...lifted.state, issues: lifted.state.issues.map((i) => (i.id === c.issueId ? { ...i, maxAttempts: issue.maxAttempts } : i)) };
      return { ...lifted, state: after };
    }, /never starts an attempt/);
  });

  it("a sweep that frees a live run's lock", () => {
    catches((state, c) => {
      if (c.verb !== "sweep") return null;
      // sweep as if every lease had run out, then put the clock back
      const step = apply({ ...state, clock: state.clock + state.leaseLength }, c);
      return { ...step, state: { ...step.state, clock: state.clock } };
    }, /recovery never touches a live lock|a run times out only when expired/);
  });

  it("an adoption that forgets the dead holder's attempt", () => {
    catches((state, c) => {
      if (c.verb !== "claimIssue" || !c.issueId) return null;
      const step = apply(state, c);
      if (step.answer.__typename !== "IssueClaimed" || !step.answer.adopted) return null;
      const before = state.issues.find((i) => i.id === c.issueId)!;
      return {
        ...step,
        state: { ...step.state, issues: step.state.issues.map((i) => (i.id === c.issueId ? { ...i, attemptCount: before.attemptCount } : i)) },
      };
    }, /attemptCount goes up by exactly/);
  });

  it("a disableAgent that cancels the runs but forgets to take back their locks", () => {
    catches((state, c) => {
      if (c.verb !== "disableAgent") return null;
      const step = apply(state, c);
      if (step.answer.__typename !== "Agent" || step.events.length === 0) return null;
      return { ...step, state: { ...step.state, issues: state.issues }, events: [] };
    }, /disableAgent cancels every RUNNING run|disabled agent has no RUNNING run/);
  });

  it("a disableAgent that frees the locks as finishRun does (no attempt charged)", () => {
    catches((state, c) => {
      if (c.verb !== "disableAgent") return null;
      const step = apply(state, c);
      if (step.answer.__typename !== "Agent") return null;
      return {
        ...step,
        state: { ...step.state, issues: step.state.issues.map((i) => ({ ...i, attemptCount: state.issues.find((b) => b.id === i.id)!.attemptCount })) },
      };
    }, /attemptCount goes up by exactly|disableAgent cancels every RUNNING run/);
  });

  it("a startRun that lets a disabled agent start a run", () => {
    catches((state, c) => {
      if (c.verb !== "startRun") return null;
      const step = apply({ ...state, disabled: [] }, c);
      return { ...step, state: { ...step.state, disabled: state.disabled } };
    }, /disabled agent has no RUNNING run/);
  });

  it("a claim that hands out an issue without writing its event", () => {
    catches((state, c) => {
      if (c.verb !== "claimIssue" || c.issueId) return null;
      const step = apply(state, c);
      return { ...step, events: [] };
    }, /every change is a row of the transition table/);
  });
});
