// The invariants of docs/invariants.md as predicates: over one state, or over
// one transition (before, command, step) where they concern change. Each
// returns null when it holds, or a sentence saying what is wrong. The
// exploration (explore.ts) checks every one in every reachable state and on
// every transition.
import type { Command, Verb } from "./commands.js";
import { describe } from "./commands.js";
import { GRAPH_STATE_INVARIANTS, GRAPH_TRANSITION_INVARIANTS } from "./graphInvariants.js";
import type { StateInvariant, TransitionInvariant } from "./invariantKit.js";
import { actingRun, changes, firstFailure, lockChanged } from "./invariantKit.js";
import { EXECUTION_TIMED_OUT, executionOverdue, sweep, tick } from "./recovery.js";
import { isActive, isExpired, isLive } from "./rules.js";
import type { Event, Issue, IssueStatus, LockEventKind, State } from "./state.js";
import { findIssue, findRun } from "./state.js";

export type { StateInvariant, TransitionInvariant } from "./invariantKit.js";
export { actingRun, changes, created, firstFailure, lockChanged } from "./invariantKit.js";

// ---------------------------------------------------------------------------
// The transition table: docs/lifecycle.md, "Every transition", by verb. Each
// row is a change of one issue's status (or of its holder, for an adoption)
// and the events that change writes, in order.

export interface TransitionRow {
  readonly verb: Verb;
  readonly from: IssueStatus;
  readonly to: IssueStatus;
  readonly events: readonly LockEventKind[];
}

const rows = (verbs: readonly Verb[], pairs: readonly [IssueStatus, IssueStatus][], events: readonly LockEventKind[]): TransitionRow[] =>
  verbs.flatMap((verb) => pairs.map(([from, to]) => ({ verb, from, to, events })));

const HOLD_ENDS_TO_OPEN_OR_ESCALATED: [IssueStatus, IssueStatus][] = [
  ["CLAIMED", "OPEN"],
  ["CLAIMED", "ESCALATED"],
  ["IN_PROGRESS", "OPEN"],
  ["IN_PROGRESS", "ESCALATED"],
];

export const TRANSITIONS: readonly TransitionRow[] = [
  ...rows(["claimIssue", "claimIssues", "runHeartbeat"], [["OPEN", "CLAIMED"]], ["CLAIMED"]),
  ...rows(["claimIssues"], [["OPEN", "IN_PROGRESS"]], ["CLAIMED", "EXECUTION_ACQUIRED"]),
  ...rows(
    ["claimIssue"],
    [
      ["CLAIMED", "CLAIMED"],
      ["IN_PROGRESS", "CLAIMED"],
    ],
    ["ADOPTED"],
  ),
  ...rows(
    ["claimIssue"],
    [
      ["CLAIMED", "ESCALATED"],
      ["IN_PROGRESS", "ESCALATED"],
    ],
    ["ESCALATED"],
  ),
  ...rows(["acquireExecution"], [["CLAIMED", "IN_PROGRESS"]], ["EXECUTION_ACQUIRED"]),
  ...rows(
    ["releaseIssue", "releaseIssues"],
    [["IN_PROGRESS", "DONE"], ["IN_PROGRESS", "BLOCKED"], ["CLAIMED", "BLOCKED"], ...HOLD_ENDS_TO_OPEN_OR_ESCALATED],
    ["RELEASED"],
  ),
  ...rows(["finishRun"], HOLD_ENDS_TO_OPEN_OR_ESCALATED, ["RELEASED"]),
  ...rows(["forceReleaseIssue"], HOLD_ENDS_TO_OPEN_OR_ESCALATED, ["FORCE_RELEASED"]),
  ...rows(
    ["sweep"],
    [
      ["CLAIMED", "OPEN"],
      ["IN_PROGRESS", "OPEN"],
    ],
    ["RECOVERED"],
  ),
  ...rows(
    ["sweep"],
    [
      ["CLAIMED", "ESCALATED"],
      ["IN_PROGRESS", "ESCALATED"],
      ["OPEN", "ESCALATED"],
    ],
    ["ESCALATED"],
  ),
  ...rows(
    ["disableAgent"],
    [
      ["CLAIMED", "OPEN"],
      ["IN_PROGRESS", "OPEN"],
    ],
    ["RECOVERED"],
  ),
  ...rows(
    ["disableAgent"],
    [
      ["CLAIMED", "ESCALATED"],
      ["IN_PROGRESS", "ESCALATED"],
    ],
    ["ESCALATED"],
  ),
  ...rows(
    ["updateIssue"],
    [
      ["BACKLOG", "OPEN"],
      ["BLOCKED", "OPEN"],
      ["BLOCKED", "ESCALATED"],
      ["ESCALATED", "OPEN"],
      ...(["BACKLOG", "OPEN", "CLAIMED", "IN_PROGRESS", "BLOCKED", "ESCALATED"] as const).map((s): [IssueStatus, IssueStatus] => [s, "CANCELLED"]),
    ],
    ["STATUS_CHANGED"],
  ),
];

/**
 * The attempt each event charges (docs/lifecycle.md, Attempts): entering
 * IN_PROGRESS, and the end of a hold whose holder died CLAIMED (adoption or
 * recovery, or disableAgent's, which recovers as the sweep does); and the one
 * a release with REQUEUE and retryAfterSeconds gives back from IN_PROGRESS
 * (−1: "not now" is not a failure). Nothing else.
 */
export function attemptsCharged(event: Event, before: Issue, command?: Command): number {
  if (event.kind === "EXECUTION_ACQUIRED") return 1;
  if (event.kind === "RELEASED" && command && (command.verb === "releaseIssue" || command.verb === "releaseIssues")) {
    const givesBack = command.outcome === "REQUEUE" && command.retryAfterSeconds !== undefined && command.retryAfterSeconds !== null;
    return givesBack && before.status === "IN_PROGRESS" ? -1 : 0;
  }
  const holderDied =
    event.kind === "ADOPTED" ||
    event.kind === "RECOVERED" ||
    (event.kind === "ESCALATED" &&
      event.reason !== null &&
      ["HOLDER_DEAD", "LEASE_EXPIRED", "RUN_FINISHED", "RUN_MISSING", "AGENT_DISABLED", EXECUTION_TIMED_OUT].includes(event.reason));
  return holderDied && before.status === "CLAIMED" ? 1 : 0;
}

const AGENT_VERBS: readonly Verb[] = [
  "claimIssue",
  "claimIssues",
  "acquireExecution",
  "releaseIssue",
  "releaseIssues",
  "createSubIssues",
  "finishRun",
  "heartbeatRun",
];

// ---------------------------------------------------------------------------
// Invariants over one state.

export const STATE_INVARIANTS: readonly StateInvariant[] = [
  {
    name: "lock pair: CLAIMED has only the checkout, IN_PROGRESS both for one run, every other status neither",
    doc: "docs/invariants.md #2, #3 (issues_lock_pair)",
    check: (s) =>
      firstFailure(s.issues, (i) => {
        const ok =
          i.status === "CLAIMED"
            ? i.checkoutRunId !== null && i.executionRunId === null
            : i.status === "IN_PROGRESS"
              ? i.checkoutRunId !== null && i.executionRunId === i.checkoutRunId
              : i.checkoutRunId === null && i.executionRunId === null;
        return ok ? null : `${i.id} is ${i.status} with checkout ${i.checkoutRunId} and execution ${i.executionRunId}`;
      }),
  },
  {
    name: "at most one holder, and the holder is a run of the company",
    doc: "docs/invariants.md #1",
    check: (s) =>
      firstFailure(s.issues, (i) => (i.checkoutRunId !== null && !findRun(s, i.checkoutRunId) ? `${i.id} is held by unknown run ${i.checkoutRunId}` : null)),
  },
  {
    name: "counters in range: attemptCount >= 0, lockEpoch >= 0, maxAttempts 1–100",
    doc: "docs/invariants.md #9, #13 (issues_attempt_count_nonnegative, issues_lock_epoch_nonnegative, issues_max_attempts_range)",
    check: (s) =>
      firstFailure(s.issues, (i) =>
        i.attemptCount >= 0 && i.lockEpoch >= 0 && i.maxAttempts >= 1 && i.maxAttempts <= 100 ? null : `${i.id} has counters out of range`,
      ),
  },
  {
    name: "an IN_PROGRESS issue has counted its attempt; a held issue has been claimed (lockEpoch >= 1)",
    doc: "docs/lifecycle.md, Attempts and lockEpoch",
    check: (s) =>
      firstFailure(s.issues, (i) =>
        (i.status === "IN_PROGRESS" && i.attemptCount < 1) || (isActive(i.status) && i.lockEpoch < 1)
          ? `${i.id} is ${i.status} with attempts ${i.attemptCount}, epoch ${i.lockEpoch}`
          : null,
      ),
  },
  {
    name: "a run is RUNNING exactly while it has no finishedAt, and its lease is at most one lease ahead",
    doc: "docs/invariants.md #5 (heartbeat_runs_finished), #6",
    check: (s) =>
      firstFailure(s.runs, (r) =>
        (r.status === "RUNNING") !== (r.finishedAt === null) || (r.status === "RUNNING" && r.leaseExpiresAt > s.clock + s.leaseLength)
          ? `run ${r.id} is ${r.status} with finishedAt ${r.finishedAt}, lease ${r.leaseExpiresAt} at clock ${s.clock}`
          : null,
      ),
  },
  {
    name: "no concurrency key has more active issues than its limit",
    doc: "docs/invariants.md #15",
    check: (s) =>
      firstFailure(Object.entries(s.limits), ([key, max]) => {
        const active = s.issues.filter((i) => i.concurrencyKey === key && isActive(i.status)).length;
        return active > max ? `key ${key} has ${active} active issues, limit ${max}` : null;
      }),
  },
  {
    name: "a disabled agent has no RUNNING run, and no run of it holds a checkout or execution lock",
    doc: "docs/invariants.md #17; docs/access.md, Rotating and revoking keys",
    check: (s) =>
      firstFailure(s.disabled, (agent) => {
        if (!s.agents.includes(agent)) return `unknown agent ${agent} is disabled`;
        const running = s.runs.find((r) => r.agentId === agent && r.status === "RUNNING");
        if (running) return `disabled agent ${agent} has RUNNING run ${running.id}`;
        const ours = (runId: string | null) => runId !== null && findRun(s, runId)?.agentId === agent;
        const held = s.issues.find((i) => ours(i.checkoutRunId) || ours(i.executionRunId));
        return held ? `${held.id} is held by run ${held.checkoutRunId ?? held.executionRunId} of disabled agent ${agent}` : null;
      }),
  },
  ...GRAPH_STATE_INVARIANTS,
];

// ---------------------------------------------------------------------------
// Invariants over one transition.

export const TRANSITION_INVARIANTS: readonly TransitionInvariant[] = [
  {
    name: "every change is a row of the transition table, made by its verb, and writes exactly its events",
    doc: "docs/lifecycle.md, Every transition; docs/invariants.md #10, #11",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a, events }) => {
        if (!lockChanged(b, a)) return events.length === 0 ? null : `${a.id} did not change but ${c.verb} wrote ${events.map((e) => e.kind).join(", ")}`;
        const row = TRANSITIONS.find((r) => r.verb === c.verb && r.from === b.status && r.to === a.status);
        if (!row) return `${c.verb} moved ${a.id} ${b.status} -> ${a.status}, which is not in the table`;
        const kinds = events.map((e) => e.kind).join(",");
        if (kinds !== row.events.join(",")) return `${c.verb} moved ${a.id} ${b.status} -> ${a.status} writing [${kinds}], not [${row.events.join(",")}]`;
        const last = events[events.length - 1]!;
        if (last.status !== a.status || last.checkoutRunId !== a.checkoutRunId || last.executionRunId !== a.executionRunId) {
          return `${c.verb}'s event for ${a.id} does not show the issue as it became`;
        }
        return null;
      }),
  },
  {
    name: "lockEpoch never decreases, and goes up by one per change of hands (CLAIMED or ADOPTED event)",
    doc: "docs/invariants.md #13",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a, events }) => {
        const handovers = events.filter((e) => e.kind === "CLAIMED" || e.kind === "ADOPTED").length;
        return a.lockEpoch === b.lockEpoch + handovers
          ? null
          : `${c.verb}: ${a.id} epoch ${b.lockEpoch} -> ${a.lockEpoch} with ${handovers} change(s) of hands`;
      }),
  },
  {
    name: "attemptCount goes up by exactly the attempts its events charge",
    doc: "docs/lifecycle.md, Attempts; docs/invariants.md #9",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a, events }) => {
        const charged = events.reduce((n, e) => n + attemptsCharged(e, b, c), 0);
        return a.attemptCount === b.attemptCount + charged
          ? null
          : `${c.verb}: ${a.id} attempts ${b.attemptCount} -> ${a.attemptCount}, events charge ${charged}`;
      }),
  },
  {
    name: "a dead run never gains a lock",
    doc: "docs/invariants.md #5",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a }) => {
        for (const [was, now] of [
          [b.checkoutRunId, a.checkoutRunId],
          [b.executionRunId, a.executionRunId],
        ] as const) {
          if (now === null || now === was) continue;
          // a run started by this very command (runHeartbeat) did not exist before: it must be live after
          const existed = findRun(before, now);
          if ((existed && !isLive(existed, before.clock)) || !isLive(findRun(step.state, now), step.state.clock)) {
            return `${c.verb} gave ${a.id} to run ${now}, which is dead`;
          }
        }
        return null;
      }),
  },
  {
    name: "a dead, missing or foreign run acts on nothing",
    doc: "docs/invariants.md #5; docs/lifecycle.md, claimIssue check 1",
    onRefusals: true,
    check: (before, c, step) => {
      const acting = actingRun(c);
      if (!acting || !AGENT_VERBS.includes(c.verb) || c.verb === "heartbeatRun") return null;
      const run = findRun(before, acting.runId);
      if (run && run.agentId === acting.agentId && isLive(run, before.clock)) return null;
      if (step.events.length > 0 || step.state.issues !== before.issues) return `${c.verb} by dead or foreign run ${acting.runId} changed issues`;
      const answer = step.answer.__typename;
      return answer === "RunNotActive" || answer === "Error" ? null : `${c.verb} by dead or foreign run ${acting.runId} answered ${answer}`;
    },
  },
  {
    name: "only the checkout holder releases, and DONE needs the execution lock",
    doc: "docs/invariants.md #4",
    check: (before, c, step) => {
      if (c.verb !== "releaseIssue" && c.verb !== "releaseIssues") return null;
      return firstFailure(changes(before, step), ({ before: b, after: a }) =>
        b.checkoutRunId !== c.runId
          ? `${c.runId} released ${a.id}, held by ${b.checkoutRunId}`
          : a.status === "DONE" && b.status !== "IN_PROGRESS"
            ? `${a.id} went DONE from ${b.status}`
            : null,
      );
    },
  },
  {
    name: "an exhausted issue is never claimed, never starts an attempt, and never returns to OPEN",
    doc: "docs/invariants.md #9",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a }) => {
        if (b.status === "OPEN" && isActive(a.status) && b.attemptCount >= b.maxAttempts) return `${c.verb} claimed exhausted ${a.id}`;
        if (a.status === "IN_PROGRESS" && b.status !== "IN_PROGRESS" && a.attemptCount > a.maxAttempts)
          return `${c.verb} started attempt ${a.attemptCount} of ${a.maxAttempts} on ${a.id}`;
        if (a.status === "OPEN" && b.status !== "OPEN" && a.attemptCount >= a.maxAttempts) return `${c.verb} returned exhausted ${a.id} to OPEN`;
        return null;
      }),
  },
  {
    name: "recovery never touches a live lock but an execution past maxExecutionSeconds (EXECUTION_TIMED_OUT); the clock moving changes nothing else",
    doc: "docs/invariants.md #8; issue 29, Runaway executions end",
    check: (before, c, step) => {
      if (c.verb === "tick") {
        return step.state.issues === before.issues && step.state.runs === before.runs && step.events.length === 0 ? null : "tick changed more than the clock";
      }
      if (c.verb !== "sweep") return null;
      return firstFailure(changes(before, step), ({ before: b, events }) => {
        if (b.checkoutRunId === null || !isLive(findRun(before, b.checkoutRunId), before.clock)) return null;
        const overdue = executionOverdue(b, before.clock) && events.length === 1 && events[0]!.reason === EXECUTION_TIMED_OUT;
        return overdue ? null : `sweep took ${b.id} from live run ${b.checkoutRunId}${b.status === "IN_PROGRESS" ? " before its execution was overdue" : ""}`;
      });
    },
  },
  {
    name: "a lease is extended only while live; a run times out only when expired; a terminal run stays as it is",
    doc: "docs/invariants.md #6, #7, #17",
    check: (before, c, step) =>
      step.state.runs === before.runs
        ? null
        : firstFailure(step.state.runs, (r) => {
            const was = before.runs.find((x) => x.id === r.id);
            if (!was) {
              const starts = c.verb === "startRun" || c.verb === "runHeartbeat";
              return starts && r.leaseExpiresAt === before.clock + before.leaseLength ? null : `${c.verb} created run ${r.id}`;
            }
            if (was === r) return null;
            if (was.status !== "RUNNING") return `${c.verb} changed terminal run ${r.id}`;
            if (r.leaseExpiresAt !== was.leaseExpiresAt && !(r.status === "RUNNING" && isLive(was, before.clock)))
              return `${c.verb} moved the lease of dead run ${r.id}`;
            if (r.status === "TIMED_OUT" && isExpired(was, before.clock)) return null;
            if (r.status !== "RUNNING") {
              // disableAgent cancels every RUNNING run of its agent, live or expired
              if (c.verb === "disableAgent" && r.agentId === c.agentId && r.status === "CANCELLED") return null;
              const finishing = (c.verb === "finishRun" && c.runId === r.id) || c.verb === "runHeartbeat";
              return finishing && isLive(was, before.clock) ? null : `${c.verb} ended run ${r.id} (${r.status})`;
            }
            return null;
          }),
  },
  {
    name: "finishRun releases everything the run held, at no attempt's cost",
    doc: "docs/invariants.md #7",
    check: (_before, c, step) => {
      if (c.verb !== "finishRun" || step.answer.__typename !== "RunUpdated") return null;
      const held = step.state.issues.find((i) => i.checkoutRunId === c.runId);
      return held ? `finished run ${c.runId} still holds ${held.id}` : null;
    },
  },
  {
    name: "every event names the right run and agent, with the documented reason",
    doc: "docs/lifecycle.md, decisions 6 and 7, and the disableAgent row",
    check: (before, c, step) =>
      firstFailure(step.events, (e) => {
        const b = before.issues.find((i) => i.id === e.issueId);
        if (!b) return `${c.verb} wrote ${e.kind} for ${e.issueId}, which did not exist before it`;
        const holder = b.checkoutRunId;
        const holderAgent = findRun(before, holder)?.agentId ?? null;
        let expected: { runId: string | null; agentId: string | null; reasons: (string | null)[] };
        switch (e.kind) {
          case "CLAIMED":
          case "EXECUTION_ACQUIRED":
            expected =
              c.verb === "runHeartbeat"
                ? { runId: e.runId, agentId: findRun(step.state, e.runId)?.agentId ?? "?", reasons: [null] }
                : { ...actingRun(c)!, reasons: [null] };
            break;
          case "ADOPTED":
            expected = { ...actingRun(c)!, reasons: ["HOLDER_DEAD"] };
            break;
          case "RELEASED":
            expected =
              c.verb === "finishRun"
                ? { ...actingRun(c)!, reasons: ["RUN_FINISHED"] }
                : {
                    ...actingRun(c)!,
                    reasons: [
                      c.verb === "releaseIssue" || c.verb === "releaseIssues" ? (c.reason?.trim() ? `${c.outcome}: ${c.reason.trim()}` : c.outcome) : "?",
                    ],
                  };
            break;
          case "RECOVERED":
            expected =
              c.verb === "disableAgent"
                ? { runId: holder, agentId: c.agentId, reasons: ["AGENT_DISABLED"] }
                : { runId: holder, agentId: holderAgent, reasons: ["LEASE_EXPIRED", "RUN_FINISHED", "RUN_MISSING", EXECUTION_TIMED_OUT] };
            break;
          case "ESCALATED":
            expected =
              c.verb === "claimIssue"
                ? { ...actingRun(c)!, reasons: ["HOLDER_DEAD"] }
                : c.verb === "disableAgent"
                  ? { runId: holder, agentId: c.agentId, reasons: ["AGENT_DISABLED"] }
                  : holder === null
                    ? { runId: null, agentId: null, reasons: ["ATTEMPTS_EXHAUSTED"] }
                    : { runId: holder, agentId: holderAgent, reasons: ["LEASE_EXPIRED", "RUN_FINISHED", "RUN_MISSING", EXECUTION_TIMED_OUT] };
            break;
          case "FORCE_RELEASED":
            expected = { runId: holder, agentId: holderAgent, reasons: [c.verb === "forceReleaseIssue" ? c.reason.trim() : "?"] };
            break;
          case "STATUS_CHANGED":
            expected = { runId: holder, agentId: holderAgent, reasons: [`${b.status} -> ${e.status}`] };
            break;
        }
        return e.runId === expected.runId && e.agentId === expected.agentId && expected.reasons.includes(e.reason)
          ? null
          : `${c.verb}'s ${e.kind} event for ${e.issueId} names run ${e.runId}, agent ${e.agentId}, reason ${e.reason}`;
      }),
  },
  {
    name:
      "disableAgent cancels every RUNNING run of the agent and recovers every lock its runs hold, one AGENT_DISABLED event each; " +
      "enableAgent changes only the flag",
    doc: "docs/invariants.md #17; docs/access.md, Rotating and revoking keys; docs/lifecycle.md, the disableAgent row",
    onRefusals: true,
    check: (before, c, step) => {
      if (c.verb !== "disableAgent" && c.verb !== "enableAgent") return null;
      const answer = step.answer;
      const reason = c.verb === "disableAgent" ? c.reason.trim() : null;
      const refusal =
        reason === "" || (reason !== null && [...reason].length > 1000) ? "BAD_USER_INPUT" : before.agents.includes(c.agentId) ? null : "NOT_FOUND";
      if (refusal) {
        if (answer.__typename !== "Error" || answer.code !== refusal) return `${describe(c)} answered ${answer.__typename}, not Error ${refusal}`;
        return step.state === before && step.events.length === 0 ? null : `${describe(c)} was refused but changed something`;
      }
      const disabling = c.verb === "disableAgent";
      if (answer.__typename !== "Agent" || answer.agentId !== c.agentId || answer.disabled !== disabling || answer.disabledReason !== reason) {
        return `${describe(c)} answered ${JSON.stringify(answer)}`;
      }
      const others = (s: State) => s.disabled.filter((a) => a !== c.agentId).join(",");
      if (step.state.disabled.includes(c.agentId) !== disabling || others(step.state) !== others(before)) {
        return `${describe(c)} left the disabled agents [${step.state.disabled.join(",")}]`;
      }
      if (!disabling)
        return step.state.issues === before.issues && step.state.runs === before.runs && step.events.length === 0
          ? null
          : "enableAgent changed more than the flag";
      if (step.state.runs.length !== before.runs.length) return `disableAgent changed the number of runs`;
      const runFailure = firstFailure(before.runs, (r) => {
        const now = step.state.runs.find((x) => x.id === r.id)!;
        const ends = r.agentId === c.agentId && r.status === "RUNNING";
        const want = ends ? { status: "CANCELLED", finishedAt: before.clock } : { status: r.status, finishedAt: r.finishedAt };
        return now.status === want.status && now.finishedAt === want.finishedAt && now.leaseExpiresAt === r.leaseExpiresAt && now.agentId === r.agentId
          ? null
          : `disableAgent(${c.agentId}) left run ${r.id} ${now.status} (finishedAt ${now.finishedAt}), not ${want.status}`;
      });
      if (runFailure) return runFailure;
      return firstFailure(before.issues, (b) => {
        const a = step.state.issues.find((i) => i.id === b.id)!;
        const events = step.events.filter((e) => e.issueId === b.id);
        const held = b.checkoutRunId !== null && findRun(before, b.checkoutRunId)?.agentId === c.agentId;
        if (!held) return a === b && events.length === 0 ? null : `disableAgent(${c.agentId}) changed ${b.id}, which no run of the agent held`;
        // as the sweep recovers a dead run's lock: a CLAIMED holder's attempt charged, OPEN or ESCALATED
        const attempts = b.attemptCount + (b.status === "CLAIMED" ? 1 : 0);
        const status: IssueStatus = attempts >= b.maxAttempts ? "ESCALATED" : "OPEN";
        if (a.status !== status || a.attemptCount !== attempts || a.checkoutRunId !== null || a.executionRunId !== null || a.lockEpoch !== b.lockEpoch) {
          return (
            `disableAgent(${c.agentId}) left ${b.id} ${a.status} with attempts ${a.attemptCount}, locks ${a.checkoutRunId}/${a.executionRunId}; ` +
            `recovery gives ${status} with attempts ${attempts}`
          );
        }
        const e = events[0];
        const kind: LockEventKind = status === "ESCALATED" ? "ESCALATED" : "RECOVERED";
        return events.length === 1 &&
          e!.kind === kind &&
          e!.reason === "AGENT_DISABLED" &&
          e!.runId === b.checkoutRunId &&
          e!.agentId === c.agentId &&
          e!.status === status
          ? null
          : `disableAgent(${c.agentId}) wrote [${events.map((x) => `${x.kind} ${x.reason} ${x.runId}/${x.agentId}`).join("; ")}] for ${b.id}, ` +
              `not one ${kind} AGENT_DISABLED naming ${b.checkoutRunId}/${c.agentId}`;
      });
    },
  },
  ...GRAPH_TRANSITION_INVARIANTS,
];

// ---------------------------------------------------------------------------
// lockAudit, and what recovery promises from any state.

/**
 * lockAudit's figures that a state alone determines (doubleClaims needs the
 * ledger: the transition invariants stand for it), with two of the model's
 * own: executions past maxExecutionSeconds (overdueExecutions) and OPEN
 * issues waiting on a CANCELLED blocker (waitingOnCancelled, which no sweep
 * clears: someone must act).
 */
export function lockAudit(state: State): {
  locksHeldByDeadRuns: number;
  halfReleasedLocks: number;
  unescalatedExhausted: number;
  overdueExecutions: number;
  waitingOnCancelled: number;
} {
  const dead = (runId: string | null) => runId !== null && !isLive(findRun(state, runId), state.clock);
  const cancelled = (id: string) => findIssue(state, id)?.status === "CANCELLED";
  return {
    locksHeldByDeadRuns: state.issues.filter((i) => dead(i.checkoutRunId) || dead(i.executionRunId)).length,
    halfReleasedLocks: state.issues.filter((i) => STATE_INVARIANTS[0]!.check({ ...state, issues: [i] }) !== null).length,
    unescalatedExhausted: state.issues.filter((i) => i.status === "OPEN" && i.attemptCount >= i.maxAttempts).length,
    overdueExecutions: state.issues.filter((i) => executionOverdue(i, state.clock)).length,
    waitingOnCancelled: state.issues.filter((i) => i.status === "OPEN" && i.blockedBy.some(cancelled)).length,
  };
}

/** After one sweep, from any state: no lock held by a dead run, no execution overdue, and every exhausted OPEN issue escalated (lockAudit reads zeros). */
export function oneSweepCleansUp(state: State): string | null {
  const audit = lockAudit(sweep(state).state);
  return audit.locksHeldByDeadRuns === 0 && audit.unescalatedExhausted === 0 && audit.halfReleasedLocks === 0 && audit.overdueExecutions === 0
    ? null
    : `after one sweep, lockAudit reads ${JSON.stringify(audit)}`;
}

/** From any state, the clock moving past every lease and then one sweep frees every lock, and no OPEN issue is left exhausted. */
export function recoveryFreesEverything(state: State): string | null {
  const after = sweep(tick(state, { by: state.leaseLength }).state).state;
  const held = after.issues.find((i) => i.checkoutRunId !== null || i.executionRunId !== null || isActive(i.status));
  if (held) return `after every lease ran out and one sweep, ${held.id} is still ${held.status} held by ${held.checkoutRunId}`;
  const exhausted = after.issues.find((i) => i.status === "OPEN" && i.attemptCount >= i.maxAttempts);
  if (exhausted) return `after every lease ran out and one sweep, ${exhausted.id} is OPEN without an attempt left`;
  const running = after.runs.find((r) => r.status === "RUNNING");
  return running ? `after every lease ran out and one sweep, run ${running.id} is still RUNNING` : null;
}

/** The state invariants plus the two recovery promises, as one list (every reachable state must pass them all). */
export const REACHABLE_STATE_CHECKS: readonly StateInvariant[] = [
  ...STATE_INVARIANTS,
  {
    name: "every exhausted issue escalates, and every dead run's lock is freed, after one sweep",
    doc: "docs/invariants.md #8, #9; SEMANTICS.md, lockAudit",
    check: oneSweepCleansUp,
  },
  { name: "no state from which recovery cannot free everything", doc: "docs/invariants.md #8", check: recoveryFreesEverything },
];

/** The initial state's promises: nothing held, nothing counted yet. */
export function checkInitial(state: State): string | null {
  return firstFailure(state.issues, (i) =>
    i.attemptCount === 0 &&
    i.lockEpoch === 0 &&
    i.checkoutRunId === null &&
    i.executionLockedAt === null &&
    i.result === null &&
    (i.status === "OPEN" || i.status === "BACKLOG")
      ? null
      : `initial ${i.id} is not as createIssue leaves it`,
  );
}
