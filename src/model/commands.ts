// Every verb as data: a Command names a verb and its arguments, and `apply`
// runs it. The exploration (explore.ts) and, later, conformance tests drive
// the model through commands.
import { disableAgent, enableAgent } from "./agents.js";
import type { Answer } from "./answers.js";
import type { UpdateIssueInput } from "./board.js";
import { forceReleaseIssue, updateIssue } from "./board.js";
import { claimIssue, claimIssues } from "./claims.js";
import { acquireExecution } from "./execution.js";
import type { CreateInput } from "./state.js";
import { addDependency, createIssues, createSubIssues, removeDependency } from "./graph.js";
import { sweep, tick } from "./recovery.js";
import type { ClaimNext } from "./release.js";
import { releaseIssue, releaseIssues } from "./release.js";
import { finishRun, heartbeatRun, startRun } from "./runs.js";
import { runHeartbeat } from "./scheduler.js";
import type { IssueStatus, Json, ReleaseOutcome, RunStatus, State, Step } from "./state.js";

export type Command =
  // agents (each names the acting agent)
  | { verb: "startRun"; agentId: string }
  | { verb: "heartbeatRun"; agentId: string; runId: string }
  | { verb: "finishRun"; agentId: string; runId: string; status: RunStatus }
  // passOver: the rows a concurrent statement holds, which a claim without an issue id passes by (SKIP LOCKED);
  // startExecution (issue 31): acquireExecution right after a claim that succeeded (fused.ts)
  | {
      verb: "claimIssue";
      agentId: string;
      runId: string;
      issueId?: string;
      expectedStatuses?: IssueStatus[];
      includeUnassigned?: boolean;
      startExecution?: boolean;
      passOver?: string[];
    }
  | { verb: "claimIssues"; agentId: string; runId: string; limit: number; includeUnassigned?: boolean; acquireExecution?: boolean; passOver?: string[] }
  | { verb: "acquireExecution"; agentId: string; runId: string; issueId: string }
  | {
      verb: "releaseIssue";
      agentId: string;
      runId: string;
      issueId: string;
      outcome: ReleaseOutcome;
      reason?: string;
      retryAfterSeconds?: number;
      result?: Json;
      /** issue 31: once released, claimIssue without an issue id for the same run (fused.ts). */
      next?: ClaimNext;
    }
  | {
      verb: "releaseIssues";
      agentId: string;
      runId: string;
      issueIds: string[];
      outcome: ReleaseOutcome;
      reason?: string;
      retryAfterSeconds?: number;
      result?: Json;
    }
  | { verb: "createSubIssues"; agentId: string; runId: string; parentId: string; inputs: CreateInput[]; parentWaits?: boolean }
  // the work graph's edges: the board (no agent named) or an agent whose run holds the issue
  | { verb: "addDependency"; issueId: string; blockedById: string; agentId?: string; runId?: string }
  | { verb: "removeDependency"; issueId: string; blockedById: string; agentId?: string; runId?: string }
  // the board
  | { verb: "createIssues"; inputs: CreateInput[] }
  | { verb: "forceReleaseIssue"; issueId: string; reason: string }
  | { verb: "updateIssue"; issueId: string; input: UpdateIssueInput }
  | { verb: "runHeartbeat" }
  | { verb: "disableAgent"; agentId: string; reason: string }
  | { verb: "enableAgent"; agentId: string }
  // time and the recovery loop
  | { verb: "tick"; by?: number }
  | { verb: "sweep" };

export type Verb = Command["verb"];

export const VERBS: readonly Verb[] = [
  "startRun",
  "heartbeatRun",
  "finishRun",
  "claimIssue",
  "claimIssues",
  "acquireExecution",
  "releaseIssue",
  "releaseIssues",
  "createSubIssues",
  "addDependency",
  "removeDependency",
  "createIssues",
  "forceReleaseIssue",
  "updateIssue",
  "runHeartbeat",
  "disableAgent",
  "enableAgent",
  "tick",
  "sweep",
];

/** The work graph's verbs (issue 29), which an exploration tries only when its alphabet asks (Alphabet.graph). */
export const GRAPH_VERBS: readonly Verb[] = ["createSubIssues", "addDependency", "removeDependency", "createIssues"];

/** Runs one command: the answer, the next state, and the events written. */
export function apply(state: State, c: Command): Step<Answer> {
  switch (c.verb) {
    case "startRun":
      return startRun(state, c);
    case "heartbeatRun":
      return heartbeatRun(state, c);
    case "finishRun":
      return finishRun(state, c);
    case "claimIssue":
      return claimIssue(state, c);
    case "claimIssues":
      return claimIssues(state, c);
    case "acquireExecution":
      return acquireExecution(state, c);
    case "releaseIssue":
      return releaseIssue(state, c);
    case "releaseIssues":
      return releaseIssues(state, c);
    case "createSubIssues":
      return createSubIssues(state, c);
    case "addDependency":
      return addDependency(state, c);
    case "removeDependency":
      return removeDependency(state, c);
    case "createIssues":
      return createIssues(state, c);
    case "forceReleaseIssue":
      return forceReleaseIssue(state, c);
    case "updateIssue":
      return updateIssue(state, c);
    case "runHeartbeat":
      return runHeartbeat(state);
    case "disableAgent":
      return disableAgent(state, c);
    case "enableAgent":
      return enableAgent(state, c);
    case "tick":
      return tick(state, c);
    case "sweep":
      return sweep(state);
  }
}

/** A command as one line, for traces: `releaseIssue(A, r1, i1, FAILED)`, `disableAgent(A, "  ")` (a string that is blank or padded is quoted). */
export function describe(c: Command): string {
  const { verb, ...args } = c;
  const parts = Object.values(args).map((v) =>
    Array.isArray(v)
      ? `[${v.map((x) => (typeof x === "object" && x !== null ? JSON.stringify(x) : String(x))).join(",")}]`
      : typeof v === "object" && v !== null
        ? JSON.stringify(v)
        : typeof v === "string" && (v.trim() !== v || v === "")
          ? JSON.stringify(v)
          : String(v),
  );
  return `${verb}(${parts.join(", ")})`;
}
