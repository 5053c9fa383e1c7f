// What the board knows: the company's issues, runs, agents and the newest
// ledger events, kept current by the live stream. Views read it and subscribe
// to `changed`; nothing here touches the DOM.
import { BOARD_TRANSITIONS } from "../domain/transitions.js";
import type { BoardAgentFragment, BoardEventFragment, BoardIssueFragment, BoardRunFragment, IssueStatus } from "./generated/graphql.js";

export type Issue = BoardIssueFragment;
export type Run = BoardRunFragment;
export type LockEvent = BoardEventFragment;
export type Agent = BoardAgentFragment;

export const STATUSES: readonly IssueStatus[] = ["OPEN", "CLAIMED", "IN_PROGRESS", "BLOCKED", "ESCALATED", "BACKLOG", "DONE", "CANCELLED"];
export const PRIORITY_ORDER = { CRITICAL: 0, HIGH: 1, MEDIUM: 2, LOW: 3 } as const;

/** DONE and CANCELLED: no lock verb or board move leaves them. */
export const TERMINAL: ReadonlySet<IssueStatus> = new Set(["DONE", "CANCELLED"]);

/**
 * The operator actions an issue's status allows: force release while a run holds it (CLAIMED,
 * IN_PROGRESS); requeue where updateIssue may move it to OPEN (an ESCALATED issue needs an attempt
 * left: raising max attempts reopens it); cancel where it may move to CANCELLED; changing the key or
 * max attempts while it is not finished.
 */
export function actionsFor(issue: Pick<Issue, "status" | "attemptCount" | "maxAttempts">) {
  const moves = BOARD_TRANSITIONS[issue.status];
  return {
    forceRelease: issue.status === "CLAIMED" || issue.status === "IN_PROGRESS",
    requeue: moves.includes("OPEN") && !(issue.status === "ESCALATED" && issue.attemptCount >= issue.maxAttempts),
    cancel: moves.includes("CANCELLED"),
    edit: !TERMINAL.has(issue.status),
  };
}

/**
 * Why an OPEN issue is not ready (claim-next passes it by), as the board can
 * tell at `serverNow`: the blockers not DONE, oldest edge first (a CANCELLED
 * one never will be: it waits until someone removes the dependency); a delay
 * still ahead on the server's clock; no attempt left.
 */
export interface Waiting {
  on: { id: string; issue: Issue | undefined }[];
  until: string | null;
  exhausted: boolean;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** How many events the tail keeps in memory; older ones are a "load older" away. */
const TAIL_KEEP = 2_000;

/**
 * A holder's health, from its run: "ok" while its lease has more than a third
 * left, "warn" in the last third (a heartbeat is overdue), "dead" once the
 * lease has run out or the run has ended. A dead holder's locks are what
 * recovery frees.
 */
export type Health = "ok" | "warn" | "dead" | "unknown";

export function health(run: Run | undefined, now: number): Health {
  if (!run) return "unknown";
  if (run.status !== "RUNNING") return "dead";
  const expires = Date.parse(run.leaseExpiresAt);
  if (now >= expires) return "dead";
  const lease = expires - Date.parse(run.lastHeartbeatAt);
  return expires - now < lease / 3 ? "warn" : "ok";
}

/** Sorts events newest first: seqs are decimal strings of any length. */
export function newerFirst(a: LockEvent, b: LockEvent): number {
  return a.seq.length !== b.seq.length ? b.seq.length - a.seq.length : a.seq < b.seq ? 1 : a.seq > b.seq ? -1 : 0;
}

export class Store {
  readonly issues = new Map<string, Issue>();
  readonly runs = new Map<string, Run>();
  /** By id; an agent is never deleted, only disabled. */
  readonly agents = new Map<string, Agent>();
  /** Newest first. */
  tail: LockEvent[] = [];
  /** The highest seq applied: where the live stream resumes. */
  lastSeq = "0";
  /** Issues changed in the last moments, for the row highlight. */
  readonly recentlyChanged = new Map<string, number>();
  private readonly listeners = new Set<() => void>();

  onChange(listener: () => void): void {
    this.listeners.add(listener);
  }

  changed(): void {
    for (const listener of this.listeners) listener();
  }

  /**
   * An issue as read by a query: a copy older (by updatedAt) than the one held
   * is dropped, which matters while the first pages load alongside live events.
   */
  putIssue(issue: Issue): void {
    const known = this.issues.get(issue.id);
    if (known && Date.parse(known.updatedAt) > Date.parse(issue.updatedAt)) return;
    this.issues.set(issue.id, issue);
  }

  /** The company's agents as read (agents): their names, and whether each is enabled. */
  putAgents(agents: readonly Agent[]): void {
    for (const agent of agents) this.agents.set(agent.id, agent);
  }

  putRun(run: Run): void {
    this.runs.set(run.id, run);
  }

  /**
   * The runs RUNNING now. A run that was RUNNING and left the list has ended
   * or expired: it is forgotten, and read again (unknownRuns) if an issue
   * still points at it. So the map holds the live runs and the holders only.
   */
  putRunning(runs: readonly Run[]): void {
    const running = new Set(runs.map((r) => r.id));
    for (const [id, run] of this.runs) if (run.status === "RUNNING" && !running.has(id)) this.runs.delete(id);
    for (const run of runs) this.runs.set(run.id, run);
  }

  /** The tail as first read, newest first. */
  setTail(events: readonly LockEvent[]): void {
    this.tail = [...events];
    if (events[0] && BigInt(events[0].seq) > BigInt(this.lastSeq)) this.lastSeq = events[0].seq;
  }

  /**
   * The tail read again after the ledger was pruned past `lastSeq` (EVENTS_PRUNED):
   * the live stream resumes after its newest event, or after `prunedThrough` if that
   * is later (nothing kept lies at or below it).
   */
  restartTail(events: readonly LockEvent[], prunedThrough: string): void {
    this.tail = [...events];
    const newest = events[0]?.seq ?? "0";
    this.lastSeq = BigInt(newest) > BigInt(prunedThrough) ? newest : prunedThrough;
  }

  /** A live event: applied once (a replay after a reconnect may repeat one), its issue updated in place. */
  apply(event: LockEvent, issue: Issue, now: number): boolean {
    if (BigInt(event.seq) <= BigInt(this.lastSeq)) return false;
    this.lastSeq = event.seq;
    this.tail.unshift(event);
    if (this.tail.length > TAIL_KEEP) this.tail.length = TAIL_KEEP;
    // The event's issue was read as the event was delivered: it is the newest copy.
    this.issues.set(issue.id, issue);
    this.recentlyChanged.set(issue.id, now);
    return true;
  }

  /** The run holding an issue: its checkout, or its execution lock. */
  holderRun(issue: Issue): Run | undefined {
    const id = issue.checkoutRunId ?? issue.executionRunId;
    return id ? this.runs.get(id) : undefined;
  }

  agentName(id: string | null | undefined): string {
    if (!id) return "";
    return this.agents.get(id)?.name ?? id.slice(0, 8);
  }

  /** Issues held by each run. */
  heldByRun(): Map<string, Issue[]> {
    const held = new Map<string, Issue[]>();
    for (const issue of this.issues.values()) {
      for (const runId of new Set([issue.checkoutRunId, issue.executionRunId])) {
        if (!runId) continue;
        const list = held.get(runId) ?? [];
        list.push(issue);
        held.set(runId, list);
      }
    }
    return held;
  }

  /** Run ids that issues point at but the board has not read yet. */
  unknownRuns(): string[] {
    const unknown = new Set<string>();
    for (const issue of this.issues.values()) {
      for (const runId of [issue.checkoutRunId, issue.executionRunId]) if (runId && !this.runs.has(runId)) unknown.add(runId);
    }
    return [...unknown];
  }

  /**
   * The blockers of `issue` not DONE now: the server's waitingOn, less those
   * this page has since seen reach DONE. A blocker's DONE writes a ledger event
   * for the blocker only, not its dependents, so the board counts it here.
   * (DONE is final: a blocker never comes back to waitingOn without an edge
   * added, and an added edge is announced with its issue.)
   */
  waitingOn(issue: Issue): string[] {
    return issue.waitingOn.filter((id) => this.issues.get(id)?.status !== "DONE");
  }

  /** Why an OPEN issue is not ready at `serverNow` (ms, the server's clock); null when it is ready or not OPEN. */
  waiting(issue: Issue, serverNow: number): Waiting | null {
    if (issue.status !== "OPEN") return null;
    const on = issue.waitingOn.length === 0 ? [] : this.waitingOn(issue).map((id) => ({ id, issue: this.issues.get(id) }));
    const until = issue.notBefore !== null && Date.parse(issue.notBefore) > serverNow ? issue.notBefore : null;
    const exhausted = issue.attemptCount >= issue.maxAttempts;
    return on.length > 0 || until !== null || exhausted ? { on, until, exhausted } : null;
  }

  /** The issues split from `parentId` (their parentId), oldest first. */
  subIssues(parentId: string): Issue[] {
    const subs: Issue[] = [];
    for (const issue of this.issues.values()) if (issue.parentId === parentId) subs.push(issue);
    return subs.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1));
  }

  /**
   * The issue an operator means by `typed`: its id, a unique start of an id (8
   * characters or more, as the board shows them), or (with `titles`) its exact
   * title; or what is wrong, in words. A whole id this page has not read is
   * taken as typed: the server says whether it exists.
   */
  findIssue(typed: string, titles: boolean): { id: string } | string {
    const text = typed.trim();
    const lower = text.toLowerCase();
    if (this.issues.has(lower)) return { id: lower };
    if (/^[0-9a-f-]{8,36}$/.test(lower)) {
      const ids = [...this.issues.keys()].filter((id) => id.startsWith(lower));
      if (ids.length === 1) return { id: ids[0]! };
      if (ids.length > 1) return `${ids.length} issues have an id that starts with ${text}: type more of it.`;
      if (UUID.test(lower)) return { id: lower };
    }
    if (titles) {
      const exact = [...this.issues.values()].filter((i) => i.title === text);
      const titled = exact.length > 0 ? exact : [...this.issues.values()].filter((i) => i.title.toLowerCase() === lower);
      if (titled.length === 1) return { id: titled[0]!.id };
      if (titled.length > 1) return `${titled.length} issues are titled “${text}”: give the id of the one you mean.`;
      return `no issue of this company has the id or title “${text}”.`;
    }
    return `no issue of this company has an id that starts with “${text}”.`;
  }

  /** A short name for an issue in a sentence: its title, or the start of its id when this page has not read it. */
  issueName(id: string): string {
    const issue = this.issues.get(id);
    return issue ? `“${issue.title}”` : `issue ${id.slice(0, 8)}`;
  }

  counts(): Map<IssueStatus, number> {
    const counts = new Map<IssueStatus, number>(STATUSES.map((s) => [s, 0]));
    for (const issue of this.issues.values()) counts.set(issue.status, (counts.get(issue.status) ?? 0) + 1);
    return counts;
  }
}
