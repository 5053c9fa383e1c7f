// What every invariant file uses (invariants.ts, graphInvariants.ts): the
// shapes of an invariant, the first failure of a list, and the issues a
// transition changed or created.
import type { Answer } from "./answers.js";
import type { Command } from "./commands.js";
import type { Event, Issue, State, Step } from "./state.js";

export interface StateInvariant {
  readonly name: string;
  /** Where the rule is written down. */
  readonly doc: string;
  readonly check: (state: State) => string | null;
}

export interface TransitionInvariant {
  readonly name: string;
  readonly doc: string;
  /**
   * Whether it can fail on a transition that changes nothing and writes no
   * event (a refusal): only rules about the answer can. The others hold
   * vacuously there, and the exploration skips them (most transitions are refusals).
   */
  readonly onRefusals?: boolean;
  readonly check: (before: State, command: Command, step: Step<Answer>) => string | null;
}

/** The first failure of `fn` over the items, or null. */
export function firstFailure<T>(items: readonly T[], fn: (item: T) => string | null): string | null {
  for (const item of items) {
    const failure = fn(item);
    if (failure) return failure;
  }
  return null;
}

/** The fields of an issue whose change must be written to the ledger (board-only fields — assignee, key, maxAttempts, the work graph's — are not). */
export const lockChanged = (a: Issue, b: Issue): boolean =>
  a.status !== b.status ||
  a.checkoutRunId !== b.checkoutRunId ||
  a.executionRunId !== b.executionRunId ||
  a.attemptCount !== b.attemptCount ||
  a.lockEpoch !== b.lockEpoch;

type Changes = { before: Issue; after: Issue; events: Event[] }[];

/** The issues a transition changed (not those it created: `created`), with their events: [before, after, events]. */
export function changes(before: State, step: Step<Answer>): Changes {
  if (memo.before === before && memo.step === step) return memo.value;
  if (step.state.issues === before.issues && step.events.length === 0) return remember(before, step, []);
  const value = step.state.issues.flatMap((after) => {
    const was = before.issues.find((i) => i.id === after.id);
    if (!was) return [];
    const events = step.events.filter((e) => e.issueId === after.id);
    return was === after && events.length === 0 ? [] : [{ before: was, after, events }];
  });
  return remember(before, step, value);
}

// changes() of the last transition, which every transition invariant asks for in turn
let memo: { before: State | null; step: Step<Answer> | null; value: Changes } = { before: null, step: null, value: [] };
function remember(before: State, step: Step<Answer>, value: Changes): Changes {
  memo = { before, step, value };
  return value;
}

/** The issues a transition created (createIssues, createSubIssues). */
export const created = (before: State, step: Step<Answer>): Issue[] =>
  step.state.issues === before.issues || step.state.issues.length === before.issues.length
    ? []
    : step.state.issues.filter((a) => !before.issues.some((b) => b.id === a.id));

/** The agent and run a command acts as, or null (the board, time, recovery). */
export const actingRun = (c: Command): { agentId: string; runId: string } | null =>
  "runId" in c && "agentId" in c && c.runId !== undefined && c.agentId !== undefined ? { agentId: c.agentId, runId: c.runId } : null;
