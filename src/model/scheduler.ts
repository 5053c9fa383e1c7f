// The scheduler tick (the board's runHeartbeat mutation; src/locks/runs/schedulerTick.ts).
import type { HeartbeatTick, IssueClaimed } from "./answers.js";
import { claimNext } from "./claims.js";
import { isReady } from "./rules.js";
import { finishRun, startRun } from "./runs.js";
import type { Event, Run, State, Step } from "./state.js";

/**
 * For each enabled agent, in creation order, with ready work assigned to it
 * (AGENTS_WITH_CLAIMABLE_WORK: `claimable`, so ready, and assigned to it; key
 * room is not looked at here): start a run, claim the agent's next issue
 * (claimIssue without an issue id, includeUnassigned false), and finish the
 * run SUCCEEDED if it got nothing. The SQL serves the agents concurrently; the
 * model serves them one after another, which is one of those interleavings
 * (each agent's claim takes only its own work, so only key room can make one
 * agent's claim depend on another's).
 */
export function runHeartbeat(state: State): Step<HeartbeatTick> {
  const agents = state.agents.filter((a) => !state.disabled.includes(a) && state.issues.some((i) => i.assigneeAgentId === a && isReady(state, i)));
  let s = state;
  const runs: Run[] = [];
  const claims: IssueClaimed[] = [];
  const events: Event[] = [];
  for (const agentId of agents) {
    const started = startRun(s, { agentId });
    if (started.answer.__typename !== "HeartbeatRun") throw new Error("unreachable: the agent exists and is enabled");
    const run = started.answer.run;
    s = started.state;
    const claimed = claimNext(s, { agentId, runId: run.id });
    s = claimed.state;
    events.push(...claimed.events);
    if (claimed.answer.__typename === "IssueClaimed") {
      runs.push(s.runs.find((r) => r.id === run.id)!);
      claims.push(claimed.answer);
      continue;
    }
    const finished = finishRun(s, { agentId, runId: run.id, status: "SUCCEEDED" });
    s = finished.state;
    events.push(...finished.events);
    runs.push(finished.answer.__typename === "RunUpdated" ? finished.answer.run : run);
  }
  return { answer: { __typename: "HeartbeatTick", runs, claims }, state: s, events };
}
