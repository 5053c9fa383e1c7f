// The fused calls (issue 31) in the exhaustive exploration: claimIssue with
// startExecution and releaseIssue with next beside every plain verb. Each is
// checked as its verbs (every transition invariant on the claim, the release,
// acquireExecution it stands for) and as their sequence (FUSED_IS_A_SEQUENCE),
// and, being verbs in sequence, they reach no state the plain verbs do not.
// Pure computation: no database.
import { describe, expect, it } from "vitest";
import type { Alphabet, Answer, Command, State, Step } from "../../src/model/index.js";
import { FUSED_IS_A_SEQUENCE, apply, explore, initialState, isFused } from "../../src/model/index.js";
import { UPDATES, noViolations, run } from "./coverage.js";

// 2 agents; i1 assigned to A, i2 in the pool, both OPEN with 2 attempts; a lease of 1 tick; up to 2 runs that matter;
// no disableAgent/enableAgent (the main exploration has them: here they would double both explorations)
const root = initialState({
  agents: ["A", "B"],
  issues: [
    { id: "i1", assigneeAgentId: "A", maxAttempts: 2 },
    { id: "i2", maxAttempts: 2 },
  ],
  leaseLength: 1,
});
const plain: Alphabet = { updates: UPDATES, finishStatuses: ["SUCCEEDED"], agentSwitches: false };

describe("the fused calls, explored exhaustively", () => {
  let plainStates = 0;

  it("the plain verbs from the same company (the fused calls' baseline)", () => {
    const { result } = run({ roots: [root], maxRuns: 2, alphabet: plain }, "fused, baseline without them");
    noViolations(result);
    expect(result.complete).toBe(true);
    plainStates = result.states;
  }, 120_000);

  it("with claimIssue(startExecution) and releaseIssue(next): every invariant holds on each verb of every call, each call is its verbs in sequence, and they reach exactly the plain verbs' states", () => {
    const { result, coverage } = run({ roots: [root], maxRuns: 2, alphabet: { ...plain, fused: {} } }, "fused");
    noViolations(result);
    expect(result.complete).toBe(true);
    // verbs in sequence: no state the plain verbs do not reach (and every one they reach, the plain verbs being in the alphabet)
    expect(plainStates).toBeGreaterThan(5_000);
    expect(result.states).toBe(plainStates);

    const answers = [
      // claim-next with startExecution: one statement, both locks
      ...["IssueClaimed@IN_PROGRESS", "NoIssueAvailable", "RunNotActive", "Error(FORBIDDEN)"].map((a) => `claimIssue(next, start):${a}`),
      // by id: the checkout (a fresh claim, an adoption, the run's own hold), then acquireExecution; or the checkout's refusal
      ...[
        "IssueClaimed@IN_PROGRESS",
        "IssueClaimed(adopted)@IN_PROGRESS",
        "IssueClaimed(alreadyHeld)@IN_PROGRESS",
        "AttemptsExhausted(acquire)",
        "AttemptsExhausted",
        "CheckoutConflict(live)",
        "CheckoutConflict(dead)",
        "UnexpectedStatus",
        "IssueNotFound",
        "RunNotActive",
      ].map((a) => `claimIssue(id, start):${a}`),
      // the release, then the run's next claim: started or not, the released issue itself back, nothing left
      ...[
        "IssueReleased(next IssueClaimed@IN_PROGRESS)",
        "IssueReleased(next IssueClaimed@CLAIMED)",
        "IssueReleased(next IssueClaimed@IN_PROGRESS, the same issue)",
        "IssueReleased(next IssueClaimed@CLAIMED, the same issue)",
        "IssueReleased(next null)",
        "NotLockOwner",
        "InvalidTransition",
        "RunNotActive",
        "IssueNotFound",
        "Error(FORBIDDEN)",
      ].map((a) => `releaseIssue(next):${a}`),
    ];
    expect(answers.filter((a) => !coverage.fused.has(a))).toEqual([]);
  }, 120_000);
});

/** A small exploration with the fused calls, one of them broken on purpose: the first violation must be FUSED_IS_A_SEQUENCE's, at a fused call. */
function catches(mutant: (state: State, c: Command) => Step<Answer> | null): void {
  const result = explore({
    roots: [root],
    maxRuns: 2,
    maxViolations: 1,
    alphabet: { ...plain, fused: {} },
    apply: (state, c) => mutant(state, c) ?? apply(state, c),
  });
  expect(result.violations.length).toBeGreaterThan(0);
  const [v] = result.violations;
  expect(v!.invariant).toBe(FUSED_IS_A_SEQUENCE.name);
  expect(v!.trace.at(-1)).toMatch(/^(claimIssue|releaseIssue)\(/);
}

describe("the exploration catches a fused call that is not its verbs in sequence", () => {
  it("a release with next that claims before it releases", () => {
    catches((state, c) => {
      if (c.verb !== "releaseIssue" || !c.next || !isFused(c)) return null;
      const { next, ...release } = c;
      const claimed = apply(state, { verb: "claimIssue", agentId: c.agentId, runId: c.runId, includeUnassigned: next.includeUnassigned ?? false });
      const released = apply(claimed.state, release);
      if (released.answer.__typename !== "IssueReleased") return released;
      return {
        answer: { ...released.answer, next: claimed.answer.__typename === "IssueClaimed" ? claimed.answer : null },
        state: released.state,
        events: [...claimed.events, ...released.events],
      };
    });
  });

  it("a claim-next with startExecution that does not count the attempt", () => {
    catches((state, c) => {
      if (c.verb !== "claimIssue" || c.issueId || !c.startExecution) return null;
      const step = apply(state, c);
      if (step.answer.__typename !== "IssueClaimed") return step;
      const id = step.answer.issue.id;
      const uncounted = (i: State["issues"][number]) => (i.id === id ? { ...i, attemptCount: i.attemptCount - 1 } : i);
      return { ...step, answer: { ...step.answer, issue: uncounted(step.answer.issue) }, state: { ...step.state, issues: step.state.issues.map(uncounted) } };
    });
  });
});
