// Helpers of the model's explorations (explore.test.ts, exploreVariants.test.ts):
// the board moves tried, what an exploration saw (coverage), and a runner that
// prints the figures docs/invariants.md quotes.
import { expect } from "vitest";
import type { Answer, Command, ExploreOptions, ExploreResult, Run, State, Step, UpdateIssueInput } from "../../src/model/index.js";
import { changes, explore, isFused, isLive } from "../../src/model/index.js";
import { ISSUE_STATUSES } from "../../src/domain/types.js";

/** The board's moves tried on every issue: each status, reopening with maxAttempts 2, lowering it to 1 and raising it to 2, reassigning. */
export const UPDATES: UpdateIssueInput[] = [
  ...ISSUE_STATUSES.map((status): UpdateIssueInput => ({ status })),
  { status: "OPEN", maxAttempts: 2 },
  { maxAttempts: 1 },
  { maxAttempts: 2 },
];

/** What an exploration saw: verbs, answers, statuses each verb fired in, table rows made, event reasons, the runs disableAgent ended or took locks from. */
export class Coverage {
  verbs = new Set<string>();
  answers = new Set<string>();
  firedIn = new Set<string>();
  rows = new Set<string>();
  reasons = new Set<string>();
  schedulerIdleRuns = 0;
  /** disableAgent: `cancelled:live`, `cancelled:expired` (RUNNING runs it ended), `recovered:<holder>` (live, expired, TIMED_OUT: the runs whose locks it took back). */
  disabling = new Set<string>();
  /** The fused calls' answers (fusedLabel), issue 31. */
  fused = new Set<string>();

  observe = (before: State, c: Command, step: Step<Answer>): void => {
    this.verbs.add(c.verb);
    if (isFused(c)) this.fused.add(fusedLabel(before, c, step.answer));
    this.answers.add(`${c.verb}:${label(step.answer)}`);
    const issueId = "issueId" in c ? c.issueId : undefined;
    const issue = issueId ? before.issues.find((i) => i.id === issueId) : undefined;
    const run = "runId" in c ? before.runs.find((r) => r.id === c.runId) : undefined;
    // an agent verb counts as fired in a status only when its run may act (otherwise refuseRun answers whatever the status)
    if (issue && (!("runId" in c) || (run && run.agentId === c.agentId && isLive(run, before.clock)))) {
      const what = c.verb === "releaseIssue" ? `releaseIssue:${c.outcome}` : c.verb === "updateIssue" ? `updateIssue:${c.input.status ?? "-"}` : c.verb;
      this.firedIn.add(`${what}@${issue.status}`);
    }
    for (const ch of changes(before, step)) {
      if (ch.before.status !== ch.after.status || ch.before.checkoutRunId !== ch.after.checkoutRunId)
        this.rows.add(`${c.verb}:${ch.before.status}->${ch.after.status}`);
    }
    if (step.answer.__typename === "HeartbeatTick") this.schedulerIdleRuns += step.answer.runs.filter((r) => r.status === "SUCCEEDED").length;
    if (c.verb === "disableAgent" && step.answer.__typename === "Agent") {
      const kind = (r: Run) => (r.status !== "RUNNING" ? r.status : isLive(r, before.clock) ? "live" : "expired");
      for (const r of before.runs) if (r.agentId === c.agentId && r.status === "RUNNING") this.disabling.add(`cancelled:${kind(r)}`);
      for (const e of step.events) this.disabling.add(`recovered:${kind(before.runs.find((r) => r.id === e.runId)!)}`);
    }
    for (const e of step.events) this.reasons.add(`${e.kind}:${e.reason?.startsWith("operator") ? "operator" : e.reason}`);
  };
}

/**
 * A fused call's answer: `claimIssue(id, start):IssueClaimed(adopted)@IN_PROGRESS`,
 * `claimIssue(id, start):AttemptsExhausted(acquire)` (the claim found the issue held
 * by the run, and acquireExecution found no attempt left),
 * `releaseIssue(next):IssueReleased(next IssueClaimed@CLAIMED, the same issue)`.
 */
function fusedLabel(before: State, c: Command, a: Answer): string {
  if (c.verb === "releaseIssue") {
    if (a.__typename !== "IssueReleased") return `releaseIssue(next):${label(a)}`;
    const next = a.next ? `${label(a.next)}@${a.next.issue.status}${a.next.issue.id === c.issueId ? ", the same issue" : ""}` : "null";
    return `releaseIssue(next):IssueReleased(next ${next})`;
  }
  const call = c.verb === "claimIssue" && c.issueId ? "claimIssue(id, start)" : "claimIssue(next, start)";
  if (a.__typename === "IssueClaimed") return `${call}:${label(a)}@${a.issue.status}`;
  const held = c.verb === "claimIssue" && before.issues.find((i) => i.id === c.issueId)?.checkoutRunId === c.runId;
  return `${call}:${label(a)}${held && a.__typename === "AttemptsExhausted" ? "(acquire)" : ""}`;
}

function label(a: Answer): string {
  switch (a.__typename) {
    case "IssueClaimed":
      return a.alreadyHeld ? "IssueClaimed(alreadyHeld)" : a.adopted ? "IssueClaimed(adopted)" : "IssueClaimed";
    case "ExecutionAcquired":
      return a.alreadyHeld ? "ExecutionAcquired(alreadyHeld)" : "ExecutionAcquired";
    case "CheckoutConflict":
      return a.holderRunIsLive ? "CheckoutConflict(live)" : "CheckoutConflict(dead)";
    case "IssuesReleased":
      return a.refused.length > 0 ? "IssuesReleased(refused)" : "IssuesReleased";
    case "Error":
      return `Error(${a.code})`;
    case "Agent":
      return a.disabled ? "Agent(disabled)" : "Agent(enabled)";
    default:
      return a.__typename;
  }
}

export function run(options: ExploreOptions, name: string): { result: ExploreResult; coverage: Coverage } {
  const coverage = new Coverage();
  const result = explore({ ...options, observe: coverage.observe });
  // the figures docs/invariants.md quotes
  console.log(
    `model exploration (${name}): ${result.states} states, ${result.transitions} transitions, depth ${result.depth}, ${result.pruned} pruned (run bound), ${Math.round(result.ms)} ms`,
  );
  return { result, coverage };
}

export const noViolations = (result: ExploreResult) =>
  expect(result.violations.map((v) => `${v.invariant}: ${v.message}\n  after: ${v.trace.join(" → ")}`)).toEqual([]);
