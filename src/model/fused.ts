// The fused calls (issue 31): claimIssue with startExecution and releaseIssue
// with next. Each is two verbs one after the other, and the verbs run them so
// (claims.ts: the claim, then acquireExecution; release.ts: the release, then
// claimIssue without an issue id). This file names the two steps: for the
// exploration, which checks every transition invariant on each verb and that
// the call is exactly their sequence (asSequence), and for the conformance
// run, which lets a concurrent command come between the API's two statements
// (firstOf, thenOf, fusedAnswer).
import type { Answer } from "./answers.js";
import { startedAnswer } from "./claims.js";
import type { Command } from "./commands.js";
import { apply } from "./commands.js";
import { releasedWithNext } from "./release.js";
import type { State, Step } from "./state.js";

export type FusedClaim = Extract<Command, { verb: "claimIssue" }> & { startExecution: true };
export type FusedRelease = Extract<Command, { verb: "releaseIssue" }> & { next: NonNullable<Extract<Command, { verb: "releaseIssue" }>["next"]> };
export type Fused = FusedClaim | FusedRelease;

/** claimIssue with startExecution, or releaseIssue with next. */
export const isFused = (c: Command): c is Fused => (c.verb === "claimIssue" && c.startExecution === true) || (c.verb === "releaseIssue" && !!c.next);

/**
 * Whether the API runs the call as two statements, so that another may come
 * between them: a claim by id with startExecution (the checkout, then
 * acquireExecution) and a release with next (the release, then the claim). A
 * claim without an issue id takes both locks in one statement (CLAIM_NEXT_FOR_EACH).
 */
export const isSplit = (c: Command): c is Fused => isFused(c) && (c.verb === "releaseIssue" || c.issueId !== undefined);

/** The first verb: the claim without startExecution, or the release without next. */
export function firstOf(c: Fused): Command {
  if (c.verb === "claimIssue") {
    const { startExecution: _, ...claim } = c;
    return claim;
  }
  const { next: _, ...release } = c;
  return release;
}

/**
 * The verb that follows the first's answer, or null when the call ends there
 * (the claim or the release was refused): acquireExecution of the claimed
 * issue by the same run, or claimIssue without an issue id by the same run,
 * with startExecution unless next says false (itself fused).
 */
export function thenOf(c: Fused, first: Answer): Command | null {
  if (c.verb === "claimIssue") {
    return first.__typename === "IssueClaimed" ? { verb: "acquireExecution", agentId: c.agentId, runId: c.runId, issueId: first.issue.id } : null;
  }
  if (first.__typename !== "IssueReleased") return null;
  const claim: Command = { verb: "claimIssue", agentId: c.agentId, runId: c.runId, includeUnassigned: c.next.includeUnassigned ?? false };
  return (c.next.startExecution ?? true) ? { ...claim, startExecution: true } : claim;
}

/** The call's answer from its verbs' answers (`then` null: the first's). */
export function fusedAnswer(c: Fused, first: Answer, then: Answer | null): Answer {
  if (then === null) return first;
  if (c.verb === "claimIssue") return first.__typename === "IssueClaimed" ? startedAnswer(first, then as Parameters<typeof startedAnswer>[1]) : first;
  return first.__typename === "IssueReleased" ? releasedWithNext(first, then as Parameters<typeof releasedWithNext>[1]) : first;
}

/** One verb's transition. */
export interface Transition {
  before: State;
  command: Command;
  step: Step<Answer>;
}

/**
 * A command run as the plain verbs it stands for, one after another from
 * `state` (a fused call's steps split again where they are fused: a release
 * with next is the release, the claim, then acquireExecution): each verb's
 * transition, and the step they make together, the answer as fusedAnswer
 * composes it. Any other command is its one transition.
 */
export function asSequence(state: State, c: Command, run: (state: State, c: Command) => Step<Answer> = apply): { parts: Transition[]; step: Step<Answer> } {
  if (!isFused(c)) {
    const step = run(state, c);
    return { parts: [{ before: state, command: c, step }], step };
  }
  const first = asSequence(state, firstOf(c), run);
  const next = thenOf(c, first.step.answer);
  if (!next) return first;
  const then = asSequence(first.step.state, next, run);
  return {
    parts: [...first.parts, ...then.parts],
    step: { answer: fusedAnswer(c, first.step.answer, then.step.answer), state: then.step.state, events: [...first.step.events, ...then.step.events] },
  };
}

export const FUSED_IS_A_SEQUENCE = {
  name: "a fused call (claimIssue with startExecution, releaseIssue with next) answers, changes and writes exactly what its verbs one after another do",
  doc: "issue 31; docs/invariants.md, The executable model",
};

/** Where a fused call's step differs from its verbs one after another (asSequence's step), or null. */
export function notItsSequence(step: Step<Answer>, sequence: Step<Answer>): string | null {
  for (const [what, got, want] of [
    ["answered", step.answer, sequence.answer],
    ["wrote", step.events, sequence.events],
    ["left the issues", step.state.issues, sequence.state.issues],
    ["left", step.state, sequence.state],
  ] as const) {
    if (!same(got, want)) return `the call ${what} ${JSON.stringify(got)}; its verbs one after another ${what} ${JSON.stringify(want)}`;
  }
  return null;
}

/** Deep equality of plain data (key order aside). */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  const [x, y] = [a as Record<string, unknown>, b as Record<string, unknown>];
  const keys = Object.keys(x).filter((k) => x[k] !== undefined);
  if (keys.length !== Object.keys(y).filter((k) => y[k] !== undefined).length) return false;
  return keys.every((k) => same(x[k], y[k]));
}
