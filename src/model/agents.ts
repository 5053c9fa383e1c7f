// The board's agent switches (docs/access.md, "Rotating and revoking keys";
// docs/lifecycle.md, the disableAgent row; src/locks/operator/disableAgent.ts):
// disableAgent and enableAgent. Keys are not modelled: disabling an agent here
// is what it does to runs and locks (its keys stop working too, in the API).
import type { AgentResult } from "./answers.js";
import { badInput, notFound } from "./answers.js";
import { inStatementOrder } from "./rules.js";
import { recoverLock } from "./recovery.js";
import type { Event, Issue, Run, State, Step } from "./state.js";

/** The event reason of a lock taken back from a disabled agent's run. */
export const AGENT_DISABLED = "AGENT_DISABLED";

/** The agents disabled after `agentId` is (or is no longer, with `on` false), in creation order. */
const disabledWith = (state: State, agentId: string, on: boolean): readonly string[] =>
  state.disabled.includes(agentId) === on ? state.disabled : state.agents.filter((a) => (a === agentId ? on : state.disabled.includes(a)));

/**
 * disableAgent(agentId, reason): stopAgent, then takeBackLocks. A blank reason
 * (or one over 1000 characters) is BAD_USER_INPUT, checked first; an unknown
 * agent NOT_FOUND; both change nothing. Disabling a disabled agent changes
 * only its reason, and takes back anything its runs still hold.
 */
export function disableAgent(state: State, args: { agentId: string; reason: string }): Step<AgentResult> {
  const stopped = stopAgent(state, args);
  if (stopped.answer.__typename !== "Agent") return stopped;
  const back = takeBackLocks(stopped.state, args.agentId);
  return { answer: stopped.answer, state: back.state, events: back.events };
}

/**
 * The first of disableAgent's two commits (LOCK_AGENT, DISABLE_AGENT): the
 * agent is disabled, and every RUNNING run of it (live, or expired but not
 * yet written down) becomes CANCELLED. No events. Between this and
 * takeBackLocks another statement may run (src/locks/operator/disableAgent.ts says why).
 */
export function stopAgent(state: State, args: { agentId: string; reason: string }): Step<AgentResult> {
  const reason = args.reason.trim();
  if (!reason || [...reason].length > 1000) return { answer: badInput("reason must not be empty: say why the agent is disabled"), state, events: [] };
  if (!state.agents.includes(args.agentId)) return { answer: notFound(`agent ${args.agentId} not found`), state, events: [] };
  const answer: AgentResult = { __typename: "Agent", agentId: args.agentId, disabled: true, disabledReason: reason };
  let ended = false;
  const runs = state.runs.map((r): Run => {
    if (r.agentId !== args.agentId || r.status !== "RUNNING") return r;
    ended = true;
    return { ...r, status: "CANCELLED", finishedAt: state.clock };
  });
  const disabled = disabledWith(state, args.agentId, true);
  if (disabled === state.disabled && !ended) return { answer, state, events: [] };
  return { answer, state: { ...state, disabled, runs: ended ? runs : state.runs }, events: [] };
}

/**
 * The second (RECOVER_LOCKS_OF_DISABLED_RUNS): every issue whose checkout a
 * run of the agent holds (none of them is RUNNING now) is recovered as the
 * sweep recovers a dead run's lock (recoverLock: a CLAIMED holder's attempt
 * counted, both locks cleared, OPEN after its backoff, or ESCALATED), one RECOVERED (or
 * ESCALATED) event each naming the holding run and the agent, reason
 * AGENT_DISABLED.
 */
export function takeBackLocks(state: State, agentId: string): { state: State; events: Event[] } {
  const ours = new Set(state.runs.filter((r) => r.agentId === agentId && r.status !== "RUNNING").map((r) => r.id));
  const events: Event[] = [];
  const issues = state.issues.map((i): Issue => {
    if (i.checkoutRunId === null || !ours.has(i.checkoutRunId)) return i;
    const recovered = recoverLock(state, i, agentId, AGENT_DISABLED);
    events.push(recovered.event);
    return recovered.issue;
  });
  if (events.length === 0) return { state, events: [] };
  return { state: { ...state, issues }, events: inStatementOrder(events) };
}

/** enableAgent(agentId) (ENABLE_AGENT): the agent may start runs again. Enabling an enabled agent changes nothing; an unknown agent is NOT_FOUND. */
export function enableAgent(state: State, args: { agentId: string }): Step<AgentResult> {
  if (!state.agents.includes(args.agentId)) return { answer: notFound(`agent ${args.agentId} not found`), state, events: [] };
  const disabled = disabledWith(state, args.agentId, false);
  return {
    answer: { __typename: "Agent", agentId: args.agentId, disabled: false, disabledReason: null },
    state: disabled === state.disabled ? state : { ...state, disabled },
    events: [],
  };
}
