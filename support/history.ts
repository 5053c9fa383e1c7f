// The history checker: from a company's ledger, its issues' final rows, and
// what clients were told, it proves per issue that
//   - the checkout changed hands only as the rules allow (a claim only of a
//     free issue, an adoption only from another run, a release only by the
//     holder): no two runs ever held it at once;
//   - lockEpoch counted exactly the claims and adoptions, so it only ever
//     increased, by one per change of hands;
//   - every attempt charged (attempt_count) has its event: an execution
//     acquired, or a CLAIMED holder's death (adopted, recovered, escalated);
//   - every answer a client received agrees with the ledger: a claim answered
//     with epoch k is the k-th claim or adoption, by that run; a release
//     answered IssueReleased is a release of that run's hold;
//   - never early (docs/lifecycle.md, Ready): every CLAIMED of an issue comes,
//     in the ledger, after its blockers' DONE: at the claim each blocker's
//     latest event says DONE. Edges come from issue_dependencies; an edge
//     binds the claims that began after it was made (a held issue keeps its
//     lock when it gains a blocker: the edge matters from the next claim).
// It returns the violations (none: the history is consistent). Used after the
// race tests, the fault tests and the bench's soak.
import pg from "pg";

export type Told = { kind: "claimed"; runId: string; issueId: string; lockEpoch: number } | { kind: "released"; runId: string; issueId: string };

interface Event {
  seq: string;
  issue_id: string;
  kind: string;
  status: string;
  run_id: string | null;
  checkout_run_id: string | null;
  execution_run_id: string | null;
  reason: string | null;
  /** When the event was written (µs since the epoch, decimal); left out, every edge binds the event. */
  at_us?: string;
}

/** issue_id waits on blocked_by_id. */
export interface Edge {
  issue_id: string;
  blocked_by_id: string;
  /**
   * When the edge was made (µs since the epoch, decimal: its transaction's
   * start); it binds the claims written after that. Left out: every claim.
   * An edge the board adds while a claim of its issue is in flight cannot be
   * ordered against that claim by time: tests that race claims add edges
   * only to issues no claim can take at that moment.
   */
  since_us?: string;
}

interface IssueRow {
  id: string;
  status: string;
  lock_epoch: number;
  attempt_count: number;
  checkout_run_id: string | null;
  execution_run_id: string | null;
}

const HELD = new Set(["CLAIMED", "IN_PROGRESS"]);

/** A timestamptz column as µs since the epoch, exactly (a JavaScript Date keeps only ms). */
const MICROS = (column: string) => `(extract(epoch FROM ${column}) * 1000000)::bigint::text`;

export async function checkHistory(databaseUrl: string, companyId: string, told: readonly Told[] = []): Promise<string[]> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const events = (
      await db.query<Event>(
        `SELECT e.seq::text AS seq, e.issue_id, e.kind::text AS kind, e.status::text AS status, e.run_id, e.checkout_run_id, e.execution_run_id, e.reason,
                ${MICROS("e.at")} AS at_us
           FROM lock_events e WHERE e.company_id = $1 ORDER BY e.seq`,
        [companyId],
      )
    ).rows;
    const issues = (
      await db.query<IssueRow>("SELECT id, status::text, lock_epoch, attempt_count, checkout_run_id, execution_run_id FROM issues WHERE company_id = $1", [
        companyId,
      ])
    ).rows;
    const edges = (
      await db.query<Edge>(`SELECT d.issue_id, d.blocked_by_id, ${MICROS("d.created_at")} AS since_us FROM issue_dependencies d WHERE d.company_id = $1`, [
        companyId,
      ])
    ).rows;
    return judge(events, issues, told, edges);
  } finally {
    await db.end();
  }
}

/** The checks themselves, on rows already read: no database needed. */
export function judge(events: readonly Event[], issues: readonly IssueRow[], told: readonly Told[], edges: readonly Edge[] = []): string[] {
  const violations: string[] = [];
  const byIssue = new Map<string, Event[]>();
  let previousSeq = 0n;
  for (const e of events) {
    // Seqs increase (not gaplessly: docs/events.md); the order of one issue's
    // events is what the transition checks below hold to the rules.
    if (BigInt(e.seq) <= previousSeq) violations.push(`seq ${e.seq} follows ${previousSeq}: the ledger repeats or goes back`);
    previousSeq = BigInt(e.seq);
    (byIssue.get(e.issue_id) ?? byIssue.set(e.issue_id, []).get(e.issue_id)!).push(e);
  }
  /** Per issue, the run of each claim or adoption, in epoch order (index 0 is epoch 1). */
  const holders = new Map<string, string[]>();

  for (const issue of issues) {
    const history = byIssue.get(issue.id) ?? [];
    const say = (e: Event | null, what: string) => violations.push(`issue ${issue.id}${e ? ` at seq ${e.seq} (${e.kind})` : ""}: ${what}`);
    let holder: string | null = null;
    let executor: string | null = null;
    let status = "OPEN";
    let charged = 0;
    const epochs: string[] = [];
    for (const e of history) {
      switch (e.kind) {
        case "CLAIMED":
          if (holder !== null) say(e, `claimed by run ${e.run_id} while run ${holder} held it`);
          if (e.checkout_run_id !== e.run_id) say(e, "a claim that leaves another run holding the checkout");
          epochs.push(e.run_id ?? "?");
          break;
        case "ADOPTED":
          if (holder === null) say(e, "adopted while nobody held it");
          else if (holder === e.run_id) say(e, "adopted from itself");
          if (status === "CLAIMED") charged++; // the dead holder's attempt
          epochs.push(e.run_id ?? "?");
          break;
        case "EXECUTION_ACQUIRED":
          if (holder !== e.run_id) say(e, `execution taken by run ${e.run_id}, which does not hold the checkout (${holder})`);
          if (executor !== null) say(e, `execution taken while run ${executor} had it`);
          charged++;
          break;
        case "RELEASED":
        case "FORCE_RELEASED":
        case "RECOVERED":
          if (holder === null) say(e, "released while nobody held it");
          else if (e.run_id !== holder) say(e, `the event names run ${e.run_id}, but run ${holder} held it`);
          if (e.kind === "RECOVERED" && status === "CLAIMED") charged++;
          break;
        case "ESCALATED":
          // From a dead holder (recovery, or an adopter finding no attempt left), or from OPEN (the sweep's last step).
          if (holder !== null && status === "CLAIMED") charged++;
          if (holder === null && status !== "OPEN") say(e, `escalated from ${status} with no holder`);
          break;
        case "STATUS_CHANGED":
          break;
        default:
          say(e, "an event kind the checker does not know");
      }
      holder = e.checkout_run_id;
      executor = e.execution_run_id;
      status = e.status;
      if (HELD.has(status) !== (holder !== null)) say(e, `status ${status} with checkout ${holder ?? "free"}`);
      if (executor !== null && executor !== holder) say(e, `execution held by run ${executor}, checkout by ${holder}`);
    }
    holders.set(issue.id, epochs);
    const say0 = (what: string) => say(null, what);
    if (history.length > 0 && (status !== issue.status || holder !== issue.checkout_run_id || executor !== issue.execution_run_id)) {
      say0(`the ledger ends ${status}/${holder}/${executor}, the row is ${issue.status}/${issue.checkout_run_id}/${issue.execution_run_id}`);
    }
    if (issue.lock_epoch !== epochs.length) say0(`lockEpoch is ${issue.lock_epoch}, but the ledger has ${epochs.length} claims and adoptions`);
    if (issue.attempt_count !== charged) say0(`${issue.attempt_count} attempts used, but the ledger accounts for ${charged}`);
  }

  for (const t of told) {
    const epochs = holders.get(t.issueId);
    if (!epochs) {
      violations.push(`a client was told about issue ${t.issueId}, which has no history here`);
      continue;
    }
    if (t.kind === "claimed" && epochs[t.lockEpoch - 1] !== t.runId) {
      violations.push(
        `run ${t.runId} was told it claimed issue ${t.issueId} at epoch ${t.lockEpoch}; the ledger gives that epoch to ${epochs[t.lockEpoch - 1] ?? "nobody"}`,
      );
    }
    if (t.kind === "released") {
      const releases = (byIssue.get(t.issueId) ?? []).filter((e) => e.kind === "RELEASED" && e.run_id === t.runId);
      if (releases.length === 0) violations.push(`run ${t.runId} was told it released issue ${t.issueId}; the ledger has no such release`);
    }
  }
  violations.push(...claimsBeforeBlockersDone(byIssue, edges));
  return violations;
}

/**
 * Never early: each CLAIMED of an issue that an edge binds (written after the
 * edge was made) has, before it in the ledger, an event of the blocker whose
 * status is DONE, and no later one of the blocker's events before the claim
 * takes it out of DONE. (Adoption is not checked: taking over a dead holder's
 * issue ignores dependencies.) Seqs order transactions by their first write,
 * and a claim can see a blocker's DONE only once it committed, so a claim
 * made after the DONE always has the greater seq.
 */
function claimsBeforeBlockersDone(byIssue: ReadonlyMap<string, Event[]>, edges: readonly Edge[]): string[] {
  const violations: string[] = [];
  for (const edge of edges) {
    const blocker = byIssue.get(edge.blocked_by_id) ?? [];
    for (const claim of byIssue.get(edge.issue_id) ?? []) {
      if (claim.kind !== "CLAIMED") continue;
      if (edge.since_us !== undefined && claim.at_us !== undefined && BigInt(claim.at_us) <= BigInt(edge.since_us)) continue;
      const seq = BigInt(claim.seq);
      let last: Event | null = null;
      for (const e of blocker) if (BigInt(e.seq) < seq) last = e;
      if (last?.status !== "DONE") {
        violations.push(
          `issue ${edge.issue_id} at seq ${claim.seq} (CLAIMED): claimed before its blocker ${edge.blocked_by_id} was DONE ` +
            `(${last ? `${last.status} since seq ${last.seq}` : "no event of it yet"})`,
        );
      }
    }
  }
  return violations;
}
