// The work graph's invariants (issue 29): over one state (the graph has no
// cycle, one issue per idempotency key, an execution's start kept while it is
// held) and over one transition (never early, IssueWaiting, claim-next passing
// over nothing ready, delays and backoff, the edges and creation). Each rule is
// stated again here, from the state, rather than through the verbs' helpers
// (waitingOn, isReady, backoffDelay, cyclePath): a verb and its check share no
// code that could be wrong for both. invariants.ts lists these with its own.
import type { Command } from "./commands.js";
import { describe } from "./commands.js";
import type { StateInvariant, TransitionInvariant } from "./invariantKit.js";
import { actingRun, changes, created, firstFailure } from "./invariantKit.js";
import { executionOverdue } from "./recovery.js";
import { isActive, isLive, keyRoom, maxDelay, maxExecution } from "./rules.js";
import type { Event, Issue, State } from "./state.js";
import { findIssue, findRun } from "./state.js";

/** The blockers of `issue` that are not DONE. */
const notDone = (s: State, issue: Issue): string[] => issue.blockedBy.filter((id) => s.issues.find((x) => x.id === id)?.status !== "DONE");

/** notBefore null or not after the clock. */
const due = (issue: Issue, clock: number): boolean => issue.notBefore === null || issue.notBefore <= clock;

/** Whether `to` is reached from `from` along blockedBy edges (depth first; from === to counts). */
function reachable(s: State, from: string, to: string): boolean {
  const seen = new Set<string>();
  const stack = [from];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (id === to) return true;
    if (seen.has(id)) continue;
    seen.add(id);
    stack.push(...(findIssue(s, id)?.blockedBy ?? []));
  }
  return false;
}

/** A cycle in the blockedBy graph, as a list of ids, or null. */
function findCycle(s: State): string[] | null {
  const colour = new Map<string, "grey" | "black">();
  const path: string[] = [];
  const visit = (id: string): string[] | null => {
    if (colour.get(id) === "black") return null;
    if (colour.get(id) === "grey") return [...path.slice(path.indexOf(id)), id];
    colour.set(id, "grey");
    path.push(id);
    for (const b of findIssue(s, id)?.blockedBy ?? []) {
      const cycle = visit(b);
      if (cycle) return cycle;
    }
    path.pop();
    colour.set(id, "black");
    return null;
  };
  for (const i of s.issues) {
    const cycle = visit(i.id);
    if (cycle) return cycle;
  }
  return null;
}

const isRelease = (c: Command): c is Extract<Command, { verb: "releaseIssue" | "releaseIssues" }> => c.verb === "releaseIssue" || c.verb === "releaseIssues";

/**
 * notBefore after a transition, by the rules: the board sets it; a hold that
 * ends in OPEN waits the release's retryAfterSeconds when given, else after
 * FAILED or a recovery (the sweep's, for a dead holder or an overdue
 * execution; disableAgent's) retryDelaySeconds × 2^max(attempts − 1, 0) capped
 * at a day (no delay at 0); plain REQUEUE, finishRun, forceReleaseIssue, an
 * escalation and everything else leave it.
 */
function expectedNotBefore(before: State, c: Command, b: Issue, a: Issue, events: readonly Event[]): number | null {
  if (c.verb === "updateIssue") return c.input.notBefore === undefined ? b.notBefore : c.input.notBefore;
  if (a.status !== "OPEN" || b.status === "OPEN") return b.notBefore;
  const backoff = () =>
    b.retryDelaySeconds > 0 ? before.clock + Math.min(b.retryDelaySeconds * 2 ** Math.max(a.attemptCount - 1, 0), maxDelay(before)) : b.notBefore;
  if (isRelease(c) && events.some((e) => e.kind === "RELEASED")) {
    if (c.retryAfterSeconds !== undefined && c.retryAfterSeconds !== null) return before.clock + c.retryAfterSeconds;
    return c.outcome === "FAILED" ? backoff() : b.notBefore;
  }
  if (events.some((e) => e.kind === "RECOVERED")) return backoff();
  return b.notBefore;
}

export const GRAPH_STATE_INVARIANTS: readonly StateInvariant[] = [
  {
    name: "the dependency graph has no cycle; every blocker and parent is an issue of the company, a parent older than its sub-issue",
    doc: "issue 29, No cycles, ever; Sub-issues",
    check: (s) =>
      firstFailure(s.issues, (i) => {
        for (const [k, b] of i.blockedBy.entries()) {
          if (!findIssue(s, b)) return `${i.id} is blocked by unknown ${b}`;
          if (k > 0 && !(i.blockedBy[k - 1]! < b)) return `${i.id}'s blockedBy [${i.blockedBy.join(",")}] is not sorted and distinct`;
        }
        if (i.parentId === null) return null;
        const parent = findIssue(s, i.parentId);
        if (!parent) return `${i.id}'s parent ${i.parentId} is unknown`;
        return parent.createdAt < i.createdAt ? null : `${i.id}'s parent ${parent.id} is not older than it`;
      }) ?? ((cycle) => (cycle ? `the dependency graph has the cycle ${cycle.join(" -> ")}` : null))(findCycle(s)),
  },
  {
    name: "one issue per idempotency key",
    doc: "issue 29, Idempotent creation",
    check: (s) => {
      const seen = new Map<string, string>();
      return firstFailure(s.issues, (i) => {
        if (i.idempotencyKey === null) return null;
        const other = seen.get(i.idempotencyKey);
        seen.set(i.idempotencyKey, i.id);
        return other ? `${other} and ${i.id} share the idempotency key ${i.idempotencyKey}` : null;
      });
    },
  },
  {
    name: "an execution's start is kept exactly while the issue is IN_PROGRESS, and is not after the clock; durations in range",
    doc: "issue 29, Runaway executions end; Delays and backoff",
    check: (s) =>
      firstFailure(s.issues, (i) => {
        if ((i.status === "IN_PROGRESS") !== (i.executionLockedAt !== null)) return `${i.id} is ${i.status} with executionLockedAt ${i.executionLockedAt}`;
        if (i.executionLockedAt !== null && i.executionLockedAt > s.clock)
          return `${i.id}'s execution starts at ${i.executionLockedAt}, after the clock ${s.clock}`;
        if (i.retryDelaySeconds < 0 || i.retryDelaySeconds > maxDelay(s)) return `${i.id} has retryDelaySeconds ${i.retryDelaySeconds}`;
        const m = i.maxExecutionSeconds;
        return m !== null && (m < 1 || m > maxExecution(s)) ? `${i.id} has maxExecutionSeconds ${m}` : null;
      }),
  },
];

export const GRAPH_TRANSITION_INVARIANTS: readonly TransitionInvariant[] = [
  {
    name: "never early: no issue is claimed while a blocker is not DONE, or before its notBefore (adopting a dead holder's issue aside)",
    doc: "issue 29, Ready; Never early",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a }) => {
        if (b.status !== "OPEN" || !isActive(a.status)) return null;
        const waiting = notDone(before, b);
        if (waiting.length > 0) return `${c.verb} claimed ${a.id} while its blocker(s) ${waiting.join(", ")} were not DONE`;
        return due(b, before.clock) ? null : `${c.verb} claimed ${a.id} at clock ${before.clock}, before its notBefore ${b.notBefore}`;
      }),
  },
  {
    name: "a claim by id of an OPEN issue that is not ready answers IssueWaiting (what it waits on, its notBefore) and changes nothing; no other issue gets IssueWaiting",
    doc: "issue 29, Ready (check order: after IssueNotFound and alreadyHeld)",
    onRefusals: true,
    check: (before, c, step) => {
      if (c.verb !== "claimIssue" || !c.issueId) return null;
      const run = findRun(before, c.runId);
      const issue = findIssue(before, c.issueId);
      // the run's checks and IssueNotFound answer first
      if (!run || run.agentId !== c.agentId || !isLive(run, before.clock) || !issue) return null;
      const answer = step.answer;
      const waitingOn = notDone(before, issue);
      const waits = issue.status === "OPEN" && (waitingOn.length > 0 || !due(issue, before.clock));
      if (!waits)
        return answer.__typename === "IssueWaiting"
          ? `claimIssue(${issue.id}) answered IssueWaiting for ${issue.status} ${issue.id}, which waits on nothing`
          : null;
      if (answer.__typename !== "IssueWaiting") {
        return `claimIssue(${issue.id}) answered ${answer.__typename} for ${issue.id}, which waits on [${waitingOn.join(",")}] and notBefore ${issue.notBefore}`;
      }
      if (answer.issueId !== issue.id || answer.waitingOn.join(",") !== waitingOn.join(",") || answer.notBefore !== issue.notBefore) {
        return `IssueWaiting for ${issue.id} says ${JSON.stringify(answer)}, not waitingOn [${waitingOn.join(",")}], notBefore ${issue.notBefore}`;
      }
      return step.state === before && step.events.length === 0 ? null : `claimIssue(${issue.id}) answered IssueWaiting but changed something`;
    },
  },
  {
    name: "claim-next passes over no ready issue: NoIssueAvailable only when nothing assigned to the agent (or in the pool, with includeUnassigned) is ready in a key with room",
    doc: "issue 29, Ready",
    onRefusals: true,
    check: (before, c, step) => {
      if (!((c.verb === "claimIssue" && !c.issueId) || c.verb === "claimIssues") || (c.passOver?.length ?? 0) > 0) return null;
      if (step.answer.__typename !== "NoIssueAvailable") return null;
      const missed = before.issues.find(
        (i) =>
          i.status === "OPEN" &&
          i.attemptCount < i.maxAttempts &&
          notDone(before, i).length === 0 &&
          due(i, before.clock) &&
          (i.assigneeAgentId === c.agentId || (c.includeUnassigned === true && i.assigneeAgentId === null)) &&
          (keyRoom(before, i.concurrencyKey) ?? 1) > 0,
      );
      return missed ? `${describe(c)} answered NoIssueAvailable though ${missed.id} is ready for it` : null;
    },
  },
  {
    name: "notBefore moves only as the rules say: a failed attempt that reopens the issue waits its backoff, a release's retryAfterSeconds its own delay, the board sets it; nothing else touches it",
    doc: "issue 29, Delays and backoff; Not now is not a failure",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a, events }) => {
        const want = expectedNotBefore(before, c, b, a, events);
        return a.notBefore === want
          ? null
          : `${describe(c)} left ${a.id} (${b.status} -> ${a.status}, attempts ${a.attemptCount}, retryDelaySeconds ${b.retryDelaySeconds}) ` +
              `with notBefore ${a.notBefore}, not ${want}, at clock ${before.clock}`;
      }),
  },
  {
    name: "a sweep leaves no execution overdue: one held maxExecutionSeconds is taken back, its run live or not",
    doc: "issue 29, Runaway executions end",
    onRefusals: true,
    check: (_before, c, step) => {
      if (c.verb !== "sweep") return null;
      const overdue = step.state.issues.find((i) => executionOverdue(i, step.state.clock));
      return overdue
        ? `after a sweep, ${overdue.id}'s execution has held its lock since ${overdue.executionLockedAt}, limit ${overdue.maxExecutionSeconds}`
        : null;
    },
  },
  {
    name: "an execution's start is the clock when its lock was taken, kept while it is held",
    doc: "issue 29, Runaway executions end",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a }) => {
        if (a.status !== "IN_PROGRESS") return null;
        const want = b.status === "IN_PROGRESS" && b.executionRunId === a.executionRunId ? b.executionLockedAt : before.clock;
        return a.executionLockedAt === want ? null : `${c.verb} left ${a.id}'s execution started at ${a.executionLockedAt}, not ${want}`;
      }),
  },
  {
    name: "what an issue was created with stays (parent, idempotency key, payload, creation order); its result changes only by a release of it that gives one",
    doc: "issue 29, Idempotent creation; Input and output",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a, events }) => {
        if (a.parentId !== b.parentId || a.idempotencyKey !== b.idempotencyKey || a.payload !== b.payload || a.createdAt !== b.createdAt) {
          return `${describe(c)} changed what ${a.id} was created with`;
        }
        const given = isRelease(c) && events.some((e) => e.kind === "RELEASED") && c.result !== undefined && c.result !== null;
        const want = given ? c.result : b.result;
        return a.result === want ? null : `${describe(c)} left ${a.id}'s result ${JSON.stringify(a.result)}, not ${JSON.stringify(want)}`;
      }),
  },
  {
    name: "an issue's blockers change only by addDependency or removeDependency of that edge (by the board, or an agent whose live run holds the issue), or by createSubIssues with parentWaits, which adds exactly the sub-issues it created to the parent",
    doc: "issue 29, No cycles, ever; Sub-issues",
    check: (before, c, step) =>
      firstFailure(changes(before, step), ({ before: b, after: a }) => {
        if (a.blockedBy === b.blockedBy || a.blockedBy.join(",") === b.blockedBy.join(",")) return null;
        const added = a.blockedBy.filter((x) => !b.blockedBy.includes(x));
        const removed = b.blockedBy.filter((x) => !a.blockedBy.includes(x));
        const changed = `${describe(c)} changed ${a.id}'s blockers [${b.blockedBy.join(",")}] -> [${a.blockedBy.join(",")}]`;
        if (c.verb === "addDependency" || c.verb === "removeDependency") {
          const [one, other] = c.verb === "addDependency" ? [added, removed] : [removed, added];
          if (c.issueId !== a.id || other.length > 0 || one.length !== 1 || one[0] !== c.blockedById) return changed;
          const acting = actingRun(c);
          if (!acting) return null;
          const run = findRun(before, acting.runId);
          const holds = run !== undefined && run.agentId === acting.agentId && isLive(run, before.clock) && b.checkoutRunId === run.id;
          return holds ? null : `${describe(c)} changed the blockers of ${a.id}, which its run does not hold`;
        }
        if (c.verb === "createSubIssues" && c.parentWaits && c.parentId === a.id && removed.length === 0) {
          const made = created(before, step)
            .map((i) => i.id)
            .sort();
          return added.join(",") === made.join(",")
            ? null
            : `createSubIssues added [${added.join(",")}] to ${a.id}'s blockers, not the sub-issues it created [${made.join(",")}]`;
        }
        return changed;
      }),
  },
  {
    name: "addDependency answers DependencyCycle exactly when the edge would close a cycle (a self-edge too), with the cycle's path from blockedById along blockedBy edges to issueId, each issue once, and changes nothing then",
    doc: "issue 29, No cycles, ever",
    onRefusals: true,
    check: (before, c, step) => {
      if (c.verb !== "addDependency") return null;
      const issue = findIssue(before, c.issueId);
      const closes =
        issue !== undefined &&
        findIssue(before, c.blockedById) !== undefined &&
        !issue.blockedBy.includes(c.blockedById) &&
        reachable(before, c.blockedById, c.issueId);
      const answer = step.answer;
      if (answer.__typename !== "DependencyCycle") {
        return closes && answer.__typename === "DependencyAdded" ? `addDependency(${c.issueId}, ${c.blockedById}) closed a cycle` : null;
      }
      if (!closes) return `addDependency(${c.issueId}, ${c.blockedById}) answered DependencyCycle, but the edge closes none`;
      const p = answer.path;
      const isCycle =
        p[0] === c.blockedById &&
        p.at(-1) === c.issueId &&
        new Set(p).size === p.length &&
        p.every((id, k) => k === 0 || (findIssue(before, p[k - 1]!)?.blockedBy.includes(id) ?? false));
      if (!isCycle) return `DependencyCycle's path [${p.join(",")}] is not the cycle from ${c.blockedById} to ${c.issueId}`;
      return step.state === before && step.events.length === 0 ? null : "addDependency answered DependencyCycle but changed something";
    },
  },
  {
    name:
      "only createIssues and createSubIssues make issues, each as createIssue leaves it (OPEN or BACKLOG, nothing held or counted, the newest, with the fields given) and writing no event; " +
      "an input whose idempotency key the company has (an earlier input of the call too) creates nothing and answers that issue",
    doc: "issue 29, Idempotent creation; Sub-issues",
    onRefusals: true,
    check: (before, c, step) => {
      const made = created(before, step);
      if (c.verb !== "createIssues" && c.verb !== "createSubIssues")
        return made.length === 0 ? null : `${describe(c)} created ${made.map((i) => i.id).join(",")}`;
      if (made.length === 0 && step.state === before && step.answer.__typename !== "IssuesCreated" && step.answer.__typename !== "SubIssuesCreated")
        return null;
      const newest = Math.max(-1, ...before.issues.map((i) => i.createdAt));
      const wrong = made.find(
        (i) =>
          !(
            (i.status === "OPEN" || i.status === "BACKLOG") &&
            i.checkoutRunId === null &&
            i.executionRunId === null &&
            i.executionLockedAt === null &&
            i.attemptCount === 0 &&
            i.lockEpoch === 0 &&
            i.result === null &&
            i.createdAt > newest
          ),
      );
      if (wrong) return `${describe(c)} created ${wrong.id} not as createIssue leaves it`;
      if (step.events.length > 0) return `${describe(c)} wrote events`;
      const answer = step.answer;
      if (answer.__typename !== "IssuesCreated" && answer.__typename !== "SubIssuesCreated")
        return `${describe(c)} answered ${answer.__typename} but created issues`;
      if (c.verb === "createSubIssues") {
        const run = findRun(before, c.runId);
        const parent = findIssue(before, c.parentId);
        const holds = run !== undefined && run.agentId === c.agentId && isLive(run, before.clock) && parent?.checkoutRunId === run.id;
        if (!holds) return `createSubIssues by ${c.runId} created under ${c.parentId}, which that run does not hold`;
      }
      const keys = new Map<string, string>();
      for (const i of before.issues) if (i.idempotencyKey !== null) keys.set(i.idempotencyKey, i.id);
      let fresh = 0;
      for (const [n, input] of c.inputs.entries()) {
        const got = answer.issues[n];
        if (!got) return `${describe(c)} answered ${answer.issues.length} issues for ${c.inputs.length} inputs`;
        const key = input.idempotencyKey ?? null;
        const had = key === null ? undefined : keys.get(key);
        if (had !== undefined) {
          if (got.id !== had) return `input ${n} with idempotency key ${key} answered ${got.id}, not ${had}, which has it`;
          continue;
        }
        if (!made.some((i) => i.id === got.id)) return `input ${n} answered ${got.id}, which it did not create`;
        fresh++;
        if (key !== null) keys.set(key, got.id);
        const parentId = c.verb === "createSubIssues" ? c.parentId : (input.parentId ?? null);
        const blockedBy = [...new Set(input.blockedBy ?? [])].sort().join(",");
        if (
          got.parentId !== parentId ||
          got.idempotencyKey !== key ||
          got.blockedBy.join(",") !== blockedBy ||
          got.notBefore !== (input.notBefore ?? null) ||
          got.retryDelaySeconds !== (input.retryDelaySeconds ?? 0) ||
          got.maxExecutionSeconds !== (input.maxExecutionSeconds ?? null) ||
          got.assigneeAgentId !== (input.assigneeAgentId ?? null)
        ) {
          return `input ${n} created ${got.id} with other fields than it gave`;
        }
      }
      return made.length === fresh ? null : `${describe(c)} created ${made.length} issues for ${fresh} new input(s)`;
    },
  },
];
