// The run is the session (the MCP issue): sessions racing for the same issues
// never share one, over stdio (eight `baton mcp` processes) and over HTTP
// spread over two API instances without affinity (one run per session
// whichever instance answers); a session's end finishes its run and gives its
// holds back (RELEASED, RUN_FINISHED): stdin closed, SIGTERM, HTTP DELETE,
// idle past BATON_MCP_SESSION_IDLE_SECONDS; a SIGKILLed `baton mcp` leaves
// its hold to the lease and the recovery sweep; an idle HTTP session under
// the limit keeps its run alive across leases.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { closeAllSessions, connectHttp, connectStdio } from "../helpers/mcp.js";
import type { McpSession, ToolIssue } from "../helpers/mcp.js";
import { eventually, race } from "../helpers/race.js";

afterEach(() => closeAllSessions());

type One = { issue: ToolIssue | null };

/** `n` OPEN issues assigned to nobody: any agent claims them with includeUnassigned. */
async function unassigned(co: Company, n: number): Promise<string[]> {
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: n }, (_, i) => ({ title: `job ${i}` })) });
  return createIssues.map((i) => i.id);
}

/** Claims issues (holding each) until none is left; the ids it claimed, in order. */
async function drain(session: McpSession): Promise<string[]> {
  const claimed: string[] = [];
  for (;;) {
    const { issue, problem } = await session.tool<One>("claim_next_issue", { includeUnassigned: true });
    if (!issue) {
      expect(problem).toBe("NoIssueAvailable");
      return claimed;
    }
    expect(issue.status).toBe("IN_PROGRESS");
    claimed.push(issue.id);
  }
}

/**
 * Every issue was claimed exactly once (one CLAIMED event), and is held by the
 * run of the session that says it claimed it; each session's claims all carry
 * one run, its own. The sessions' runs.
 */
async function claimedOnceEach(h: Harness, issues: string[], bySession: string[][]): Promise<string[]> {
  const all = bySession.flat();
  expect(all).toHaveLength(issues.length);
  expect([...all].sort()).toEqual([...issues].sort());
  const claims = await h.sql<{ issue_id: string; runs: string[]; claims: number; status: string; holder: string }>(
    `SELECT e.issue_id, array_agg(e.run_id) AS runs, count(*)::int AS claims, i.status::text, i.checkout_run_id AS holder
       FROM lock_events e JOIN issues i ON i.id = e.issue_id
      WHERE e.kind = 'CLAIMED' AND e.issue_id = ANY($1::uuid[]) GROUP BY e.issue_id, i.status, i.checkout_run_id`,
    [issues],
  );
  expect(claims).toHaveLength(issues.length);
  for (const c of claims) expect(c, c.issue_id).toEqual({ issue_id: c.issue_id, runs: [c.holder], claims: 1, status: "IN_PROGRESS", holder: c.holder });
  const runOf = new Map(claims.map((c) => [c.issue_id, c.holder]));
  const runs = bySession.map((ids) => new Set(ids.map((id) => runOf.get(id))));
  for (const [i, r] of runs.entries()) if (bySession[i]!.length > 0) expect(r.size, `session ${i}'s runs`).toBe(1);
  const sessionRuns = runs.flatMap((r) => [...r]) as string[];
  expect(new Set(sessionRuns).size).toBe(sessionRuns.length);
  // Raced for real: the work was spread over the sessions.
  expect(bySession.filter((ids) => ids.length > 0).length).toBeGreaterThanOrEqual(4);
  return sessionRuns;
}

/** The issue's row and its newest event. */
async function heldNoMore(h: Harness, issueId: string, runId: string) {
  const issue = await h.one("SELECT status::text, checkout_run_id, execution_run_id FROM issues WHERE id = $1", [issueId]);
  expect(issue).toEqual({ status: "OPEN", checkout_run_id: null, execution_run_id: null });
  const last = await h.one("SELECT kind::text, status::text, run_id, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq DESC LIMIT 1", [issueId]);
  expect(last).toEqual({ kind: "RELEASED", status: "OPEN", run_id: runId, reason: "RUN_FINISHED" });
  expect((await h.one("SELECT status::text FROM heartbeat_runs WHERE id = $1", [runId])).status).toBe("SUCCEEDED");
}

const checkoutOf = async (h: Harness, issueId: string) =>
  (await h.one<{ run: string | null }>("SELECT checkout_run_id AS run FROM issues WHERE id = $1", [issueId])).run;

/** A company with one agent and one issue of its, claimed by a new session `connect` opens; the issue and the session's run. */
async function holding<S extends McpSession>(h: Harness, connect: (key: string) => Promise<S>) {
  const co = await createCompany(h, 1);
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "held", assigneeAgentId: co.agents[0]!.id } });
  const session = await connect(co.agents[0]!.client.token!);
  expect((await session.tool<One>("claim_next_issue")).issue?.id).toBe(createIssue.id);
  const runId = (await checkoutOf(h, createIssue.id))!;
  expect(runId).not.toBeNull();
  return { co, session, issueId: createIssue.id, runId };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("on one database, two instances", () => {
  let h: Harness;
  let second: string;
  beforeAll(async () => {
    h = await startHarness();
    second = (await h.startInstance()).url;
  });
  afterAll(() => h?.close());

  it("8 stdio sessions (8 `baton mcp` processes) racing over 100 issues: each claimed exactly once", async () => {
    const co = await createCompany(h, 4);
    const issues = await unassigned(co, 100);
    // Two processes per agent key: sessions of one key are separate runs too.
    const sessions = await Promise.all(Array.from({ length: 8 }, (_, i) => connectStdio(h.url, co.agents[i % 4]!.client.token!)));
    const bySession = await race(8, (i) => drain(sessions[i]!));
    await claimedOnceEach(h, issues, bySession);
  });

  it("8 HTTP sessions racing over 100 issues, each request to either instance in turn: each claimed exactly once; one run per session", async () => {
    const co = await createCompany(h, 4);
    const issues = await unassigned(co, 100);
    const sessions = await Promise.all(Array.from({ length: 8 }, (_, i) => connectHttp([h.url, second], co.agents[i % 4]!.client.token!)));
    const bySession = await race(8, (i) => drain(sessions[i]!));
    await claimedOnceEach(h, issues, bySession);
    for (const [i, s] of sessions.entries()) {
      // No affinity: both instances answered this session's requests.
      expect(s.hits[0]).toBeGreaterThan(2);
      expect(s.hits[1]).toBeGreaterThan(2);
      // The run its row names, whichever instance started it, holds every issue it claimed on either instance.
      const { run_id } = await h.one<{ run_id: string }>("SELECT run_id FROM mcp_sessions WHERE id = $1", [s.transport.sessionId]);
      const holders = await h.sql<{ run: string }>("SELECT DISTINCT checkout_run_id AS run FROM issues WHERE id = ANY($1::uuid[])", [bySession[i]]);
      expect(holders.map((r) => r.run)).toEqual(bySession[i]!.length ? [run_id] : []);
    }
  });

  it("closing a stdio session (stdin closed) finishes its run: its hold goes back to the queue, RELEASED with RUN_FINISHED", async () => {
    const { session, issueId, runId } = await holding(h, (key) => connectStdio(h.url, key));
    await session.close();
    await session.exited;
    await eventually(() => (alive(session.pid) ? undefined : true), "baton mcp to exit");
    await heldNoMore(h, issueId, runId);
  });

  it("SIGTERM to `baton mcp` finishes its run the same way, and the process exits", async () => {
    const { session, issueId, runId } = await holding(h, (key) => connectStdio(h.url, key));
    process.kill(session.pid, "SIGTERM");
    await session.exited;
    await eventually(() => (alive(session.pid) ? undefined : true), "baton mcp to exit");
    await heldNoMore(h, issueId, runId);
    expect(session.stderr()).not.toMatch(/could not finish/);
  });

  it("HTTP DELETE (terminateSession) ends the session: its run is finished (RUN_FINISHED) and the session is gone", async () => {
    const { co, session, issueId, runId } = await holding(h, (key) => connectHttp([h.url, second], key));
    const sessionId = session.transport.sessionId!;
    expect(await h.sql("SELECT 1 FROM mcp_sessions WHERE id = $1", [sessionId])).toHaveLength(1);
    await session.terminate();
    expect(session.statuses.at(-1)).toBe(200);
    await heldNoMore(h, issueId, runId);
    expect(await h.sql("SELECT 1 FROM mcp_sessions WHERE company_id = $1", [co.id])).toEqual([]);
  });
});

describe("with a 2 s lease", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ leaseSeconds: 2, mcpSessionIdleSeconds: 30 });
  });
  afterAll(() => h?.close());

  const lease = (runId: string) =>
    h.one<{ status: string; expires: Date; live: boolean; now: Date }>(
      "SELECT status::text, lease_expires_at AS expires, lease_expires_at > now() AS live, now() AS now FROM heartbeat_runs WHERE id = $1",
      [runId],
    );

  /** Watches the run's lease until more than `seconds` past its first expiry, failing if it ever lapses; the distinct expiries seen. */
  async function keptAlive(runId: string, seconds: number): Promise<number> {
    const first = await lease(runId);
    const seen = new Set<number>();
    await eventually(
      async () => {
        const now = await lease(runId);
        expect(now).toMatchObject({ status: "RUNNING", live: true });
        seen.add(now.expires.getTime());
        return now.now.getTime() > first.expires.getTime() + seconds * 1000 ? true : undefined;
      },
      "the lease to outlive its first expiry",
      (seconds + 6) * 1000,
    );
    return seen.size;
  }

  it("a SIGKILLed `baton mcp` (heartbeats until then) leaves its hold to the lease; the sweep recovers it", async () => {
    const { session, issueId, runId } = await holding(h, (key) => connectStdio(h.url, key));
    // stdio heartbeats: the run outlives its first lease.
    expect(await keptAlive(runId, 0.5)).toBeGreaterThan(1);
    process.kill(session.pid, "SIGKILL");
    await session.exited;
    // Nothing was released: the hold stays until the lease runs out.
    expect(await checkoutOf(h, issueId)).toBe(runId);
    await eventually(async () => ((await lease(runId)).live ? undefined : true), "the killed session's lease to run out");
    const counts = await sweep(h.db.prisma, h.bus);
    expect(counts).toMatchObject({ timedOutRuns: 1, recoveredIssues: 1 });
    expect(await h.one("SELECT status::text, checkout_run_id FROM issues WHERE id = $1", [issueId])).toEqual({ status: "OPEN", checkout_run_id: null });
    const last = await h.one("SELECT kind::text, status::text, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq DESC LIMIT 1", [issueId]);
    expect(last).toEqual({ kind: "RECOVERED", status: "OPEN", reason: "LEASE_EXPIRED" });
  });

  it("an HTTP session idle under the limit keeps its run alive across leases, and still holds its issue", async () => {
    const { session, issueId, runId } = await holding(h, (key) => connectHttp(h.url, key));
    const requests = session.statuses.length;
    // More than two leases without a request: the instances keep the run's lease moving.
    expect(await keptAlive(runId, 3)).toBeGreaterThan(2);
    expect(session.statuses).toHaveLength(requests);
    expect(await sweep(h.db.prisma, h.bus)).toMatchObject({ timedOutRuns: 0, recoveredIssues: 0 });
    expect(await checkoutOf(h, issueId)).toBe(runId);
    const done = await session.tool<One>("release_issue", { issueId, outcome: "DONE" });
    expect(done.issue).toMatchObject({ id: issueId, status: "DONE" });
  });
});

describe("with a 1 s idle limit", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ mcpSessionIdleSeconds: 1 });
  });
  afterAll(() => h?.close());

  it("requests renew an HTTP session; idle past the limit it is ended: its hold released (RUN_FINISHED), its next request answered 404", async () => {
    const { co, session, issueId, runId } = await holding(h, (key) => connectHttp(h.url, key));
    // Busy for more than twice the limit (by the database's clock), each request renewing it: still open, still holding.
    const { opened } = await h.one<{ opened: Date }>("SELECT created_at AS opened FROM mcp_sessions WHERE company_id = $1", [co.id]);
    for (;;) {
      expect((await session.tool<One>("get_issue", { issueId })).issue).toMatchObject({ status: "IN_PROGRESS" });
      const { now } = await h.one<{ now: Date }>("SELECT now()");
      if (now.getTime() > opened.getTime() + 2500) break;
    }
    expect(await checkoutOf(h, issueId)).toBe(runId);
    expect(await h.sql("SELECT 1 FROM mcp_sessions WHERE company_id = $1", [co.id])).toHaveLength(1);
    await eventually(
      async () => ((await h.sql("SELECT 1 FROM mcp_sessions WHERE company_id = $1", [co.id])).length ? undefined : true),
      "the idle session to end",
    );
    // The keeper deletes the session, then finishes its run.
    await eventually(async () => ((await checkoutOf(h, issueId)) ? undefined : true), "the idle session's run to be finished");
    await heldNoMore(h, issueId, runId);
    const next = session.call("get_issue", { issueId });
    await expect(next).rejects.toThrow(/Session not found: it has ended \(DELETE, idle past the limit, or its key revoked\): initialize a new one/);
    await expect(next).rejects.toMatchObject({ code: 404 });
    expect(session.statuses.at(-1)).toBe(404);
  });
});
