// The lock protocol as an executable model (issue 17): one company's issues and
// runs, every verb of the contract as a pure function, the invariants of
// docs/invariants.md as predicates, and an exhaustive explorer. Read it beside
// docs/lifecycle.md: state.ts (what there is), rules.ts (the shared rules),
// claims.ts, execution.ts, release.ts, runs.ts, board.ts, recovery.ts,
// scheduler.ts, agents.ts, graph.ts (the verbs), commands.ts (verbs as data),
// fused.ts (issue 31: claimIssue with startExecution, releaseIssue with next, as their verbs in sequence),
// invariants.ts and graphInvariants.ts, explore.ts. docs/invariants.md, "The executable model", says how to run it.
export * from "./state.js";
export * from "./answers.js";
export * from "./rules.js";
export {
  claimCandidates,
  keyTurns,
  serveKeys,
  takeInClaimOrder,
  claimNext,
  checkoutIfExpected,
  claimIssue,
  claimIssues,
  startedAnswer,
  CLAIMABLE_STATUSES,
} from "./claims.js";
export { acquireExecution } from "./execution.js";
export { releaseIssue, releaseIssues, releasedWithNext } from "./release.js";
export { refuseRun, startRun, heartbeatRun, finishRun, releaseAllHeldBy } from "./runs.js";
export { BOARD_TRANSITIONS, forceReleaseIssue, refuseDurations, updateIssue } from "./board.js";
export type { UpdateIssueInput } from "./board.js";
export { tick, sweep, recoverLock, executionOverdue, EXECUTION_TIMED_OUT } from "./recovery.js";
export { createIssues, createSubIssues, addDependency, removeDependency, issueWithKey } from "./graph.js";
export type { CreateInput } from "./state.js";
export type { ClaimNext, ReleaseArgs } from "./release.js";
export { AGENT_DISABLED, disableAgent, enableAgent, stopAgent, takeBackLocks } from "./agents.js";
export { runHeartbeat } from "./scheduler.js";
export * from "./commands.js";
export { FUSED_IS_A_SEQUENCE, asSequence, firstOf, fusedAnswer, isFused, isSplit, notItsSequence, thenOf } from "./fused.js";
export type { Fused, FusedClaim, FusedRelease, Transition } from "./fused.js";
export * from "./invariants.js";
export * from "./explore.js";
