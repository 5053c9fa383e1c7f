// Runs and leases (docs/lifecycle.md, decisions 10 and 11; src/locks/runs/runs.ts):
// startRun, heartbeatRun, finishRun, and refuseRun, the check every agent verb
// makes on the run it names.
import type { ErrorAnswer, RunNotActive, RunResult, RunStarted } from "./answers.js";
import { badInput, forbidden, runNotActive } from "./answers.js";
import { agentOf, clearLocks, eventFor, inStatementOrder, isExpired, isLive, reopenOrEscalate } from "./rules.js";
import type { Event, Issue, Run, RunStatus, State, Step } from "./state.js";
import { findRun, withRun } from "./state.js";

/**
 * refuseRun, in its order: a run missing from the company is RunNotActive with
 * status null; another agent's run is FORBIDDEN; a dead run is RunNotActive
 * (TIMED_OUT for an expired lease, whether or not it was written down). null:
 * the run may act.
 */
export function refuseRun(state: State, agentId: string, runId: string): RunNotActive | ErrorAnswer | null {
  const run = findRun(state, runId);
  if (!run) return runNotActive(runId, null);
  if (run.agentId !== agentId) return forbidden(`run ${runId} belongs to another agent`);
  if (!isLive(run, state.clock)) return runNotActive(runId, run.status);
  return null;
}

/**
 * START_RUN: a RUNNING run for the agent, its lease leaseLength past the
 * clock. Runs are numbered r1, r2, … An unknown or disabled agent gets no run
 * (FORBIDDEN: the agent row START_RUN reads is missing, or disabled).
 */
export function startRun(state: State, args: { agentId: string }): Step<RunStarted | ErrorAnswer> {
  if (!state.agents.includes(args.agentId)) return { answer: forbidden(`no agent ${args.agentId}`), state, events: [] };
  if (state.disabled.includes(args.agentId)) return { answer: forbidden("this agent is disabled: it may not start runs"), state, events: [] };
  const run: Run = {
    id: `r${state.runs.length + 1}`,
    agentId: args.agentId,
    status: "RUNNING",
    leaseExpiresAt: state.clock + state.leaseLength,
    finishedAt: null,
  };
  return { answer: { __typename: "HeartbeatRun", run }, state: withRun(state, run), events: [] };
}

/**
 * EXTEND_LEASE_IF_LIVE: a live run's lease is renewed. Otherwise (decision
 * 10) an expired RUNNING run of the caller is written down TIMED_OUT (its
 * locks stay for adoption or recovery), and the answer is RunNotActive; a
 * missing run is RunNotActive (null), another agent's run FORBIDDEN.
 */
export function heartbeatRun(state: State, args: { agentId: string; runId: string }): Step<RunResult> {
  const run = findRun(state, args.runId);
  if (run && run.agentId === args.agentId && isLive(run, state.clock)) {
    const beat: Run = { ...run, leaseExpiresAt: state.clock + state.leaseLength };
    return { answer: { __typename: "RunUpdated", run: beat }, state: withRun(state, beat), events: [] };
  }
  if (!run) return { answer: runNotActive(args.runId, null), state, events: [] };
  if (run.agentId !== args.agentId) return { answer: forbidden(`run ${args.runId} belongs to another agent`), state, events: [] };
  if (isExpired(run, state.clock)) {
    const timedOut: Run = { ...run, status: "TIMED_OUT", finishedAt: state.clock };
    return { answer: runNotActive(args.runId, "TIMED_OUT"), state: withRun(state, timedOut), events: [] };
  }
  return { answer: runNotActive(args.runId, run.status), state, events: [] };
}

const FINAL_RUN_STATUSES: readonly RunStatus[] = ["SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"];

/**
 * FINISH_IF_LIVE + RELEASE_ALL_HELD_BY_RUN (decision 11): a live run becomes
 * terminal and every issue it holds returns to OPEN (or ESCALATED with no
 * attempt left), both locks cleared, no attempt counted, one RELEASED event
 * each, reason RUN_FINISHED. RUNNING is BAD_USER_INPUT. A dead run changes
 * nothing, not even an expired one (its locks wait for adoption or recovery).
 */
export function finishRun(state: State, args: { agentId: string; runId: string; status: RunStatus }): Step<RunResult> {
  if (!FINAL_RUN_STATUSES.includes(args.status)) return { answer: badInput(`status must be one of ${FINAL_RUN_STATUSES.join(", ")}`), state, events: [] };
  const run = findRun(state, args.runId);
  if (!run || run.agentId !== args.agentId || !isLive(run, state.clock)) {
    // diagnose(record: false): nothing is written
    if (!run) return { answer: runNotActive(args.runId, null), state, events: [] };
    if (run.agentId !== args.agentId) return { answer: forbidden(`run ${args.runId} belongs to another agent`), state, events: [] };
    return { answer: runNotActive(args.runId, run.status), state, events: [] };
  }
  const finished: Run = { ...run, status: args.status, finishedAt: state.clock };
  const released = releaseAllHeldBy(withRun(state, finished), run.id, "RUN_FINISHED");
  return { answer: { __typename: "RunUpdated", run: finished }, state: released.state, events: released.events };
}

/** RELEASE_ALL_HELD_BY_RUN: every issue whose checkout the run holds, back to OPEN or ESCALATED; a voluntary end costs no attempt. */
export function releaseAllHeldBy(state: State, runId: string, reason: string): { state: State; events: Event[] } {
  const events: Event[] = [];
  const issues = state.issues.map((i): Issue => {
    if (i.checkoutRunId !== runId) return i;
    const after = { ...clearLocks(i), status: reopenOrEscalate(i.attemptCount, i.maxAttempts) };
    events.push(eventFor(after, "RELEASED", runId, agentOf(state, runId), reason));
    return after;
  });
  return events.length === 0 ? { state, events } : { state: { ...state, issues }, events: inStatementOrder(events) };
}
