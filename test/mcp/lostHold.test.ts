// A lost hold is said (the MCP issue): once the session's run no longer holds
// an issue it claimed — force-released by the board, recovered after a stall,
// its key revoked — every tool call about that issue answers problem HoldLost
// with who holds it now, over stdio and over HTTP, and nothing the session
// does changes the issue again. A stalled session's next claim starts a new
// run; a revoked key is refused on /mcp (401, no stack) and its HTTP session
// is ended by the instances' keeper, its hold given back (RUN_FINISHED).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { RotateAgentKeyDocument } from "../../src/client/generated/graphql.js";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { closeAllSessions, connectHttp, connectStdio, mcpUrl, textOf } from "../helpers/mcp.js";
import type { McpSession, ToolIssue } from "../helpers/mcp.js";
import { eventually } from "../helpers/race.js";

let h: Harness;

// A 6 s lease: the instances keep MCP sessions (and end revoked ones) every 2 s.
beforeAll(async () => {
  h = await startHarness({ leaseSeconds: 6 });
});
afterEach(() => closeAllSessions());
afterAll(() => h?.close());

type One = { issue: ToolIssue | null };

const transports: [string, (key: string) => Promise<McpSession>][] = [
  ["stdio", (key) => connectStdio(h.url, key)],
  ["HTTP", (key) => connectHttp(h.url, key)],
];

/** Two agents; agent 0's session holds `held` (epoch 1); `other` is an OPEN issue beside it. */
async function sessionHolding<S extends McpSession>(connect: (key: string) => Promise<S>) {
  const co = await createCompany(h, 2);
  const { createIssue: held } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "held", assigneeAgentId: null } });
  const { createIssue: other } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "other", assigneeAgentId: null } });
  const session = await connect(co.agents[0]!.client.token!);
  expect((await session.tool<One>("checkout_issue", { issueId: held.id })).issue).toMatchObject({ id: held.id, lockEpoch: 1 });
  const { run } = await h.one<{ run: string }>("SELECT checkout_run_id AS run FROM issues WHERE id = $1", [held.id]);
  return { co, session, held: held.id, other: other.id, run };
}

/** The tables a session's call could change, but heartbeat_runs (its run's lease moves on its own). */
async function unchanged() {
  const { heartbeat_runs: _leases, ...rest } = await h.snapshot();
  return rest;
}

const issueRow = (id: string) => h.one("SELECT * FROM issues WHERE id = $1", [id]);

/** Every tool call about `issueId` answers HoldLost (epoch 1) with `holder`, changing nothing. */
async function everyCallSaysLost(
  session: McpSession,
  issueId: string,
  other: string,
  holder: { runId: string | null; agentId: string | null; live: boolean } | null,
  says: RegExp,
) {
  const rowBefore = await issueRow(issueId);
  const before = await unchanged();
  const lost = { problem: "HoldLost", message: expect.stringMatching(says), holder };
  const lead = `this session no longer holds issue ${issueId} (it claimed it at epoch 1); `;

  const released = await session.tool<One>("release_issue", { issueId, outcome: "DONE", reason: "finished" });
  expect(released).toEqual({ issue: null, ...lost });
  expect(released.message!.startsWith(lead)).toBe(true);
  expect(await session.tool("create_sub_issues", { parentId: issueId, issues: [{ title: "part" }] })).toEqual({ parent: null, issues: [], ...lost });
  expect(await session.tool("add_dependency", { issueId, blockedById: other })).toEqual({ issue: null, ...lost });
  const read = await session.tool<One>("get_issue", { issueId });
  expect(read).toMatchObject(lost);
  expect(read.holder).toEqual(holder);
  // Checking it out again while another run (or a key that no longer works) keeps it: told the same.
  if (holder?.runId !== null) expect(await session.tool<One>("checkout_issue", { issueId })).toMatchObject({ issue: null, ...lost });

  expect(await issueRow(issueId)).toEqual(rowBefore);
  expect(await unchanged()).toEqual(before);
  return read;
}

describe.each(transports)("over %s", (_name, connect) => {
  it("force-released, then taken by another agent: every call about the issue answers HoldLost naming the holder, and changes nothing", async () => {
    const { co, session, held, other, run } = await sessionHolding(connect);
    const { forceReleaseIssue } = await co.board.ok(Ops.ForceReleaseDocument, { issueId: held, reason: "operator" });
    expect(forceReleaseIssue.__typename).toBe("IssueReleased");

    // Nobody holds it yet.
    const nobody = await session.tool<One>("get_issue", { issueId: held });
    expect(nobody).toMatchObject({ issue: { id: held, status: "OPEN" }, problem: "HoldLost", holder: { runId: null, agentId: null, live: false } });
    expect(nobody.message).toMatch(/nobody holds it now/);

    // Another agent takes it: that run and agent, live.
    const agentB = co.agents[1]!;
    const runB = (await agentB.client.ok(Ops.StartRunDocument)).startRun.id;
    const { claimIssue } = await agentB.client.ok(Ops.ClaimIssueDocument, { runId: runB, issueId: held });
    expect(claimIssue.__typename).toBe("IssueClaimed");
    const read = await everyCallSaysLost(
      session,
      held,
      other,
      { runId: runB, agentId: agentB.id, live: true },
      new RegExp(`run ${runB} of agent ${agentB.id} holds it now`),
    );
    expect(read.issue).toMatchObject({ id: held, status: "CLAIMED", lockEpoch: 2 });
    expect(await h.one("SELECT checkout_run_id FROM issues WHERE id = $1", [held])).toEqual({ checkout_run_id: runB });
    expect(runB).not.toBe(run);
    // The answer also says why the API refused the call itself.
    const again = await session.tool<One>("release_issue", { issueId: held, outcome: "DONE" });
    expect(again.message).toMatch(/ This call was refused: NotLockOwner: .+ Do not go on with its work/);

    // The session's own run still works for anything else.
    expect((await session.tool<One>("checkout_issue", { issueId: other })).issue).toMatchObject({ id: other, status: "IN_PROGRESS" });
  });

  it("a stalled session (lease run out, recovered by the sweep): HoldLost, then claim_next_issue works with a new run", async () => {
    const { session, held, other, run } = await sessionHolding(connect);
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [run]);
    const counts = await sweep(h.db.prisma, h.bus);
    expect(counts.recoveredIssues).toBeGreaterThanOrEqual(1);
    expect(await h.one("SELECT status::text, checkout_run_id FROM issues WHERE id = $1", [held])).toEqual({ status: "OPEN", checkout_run_id: null });

    await everyCallSaysLost(session, held, other, { runId: null, agentId: null, live: false }, /nobody holds it now/);

    const again = await session.tool<One>("claim_next_issue", { includeUnassigned: true });
    expect(again.problem).toBeUndefined();
    expect(again.issue).toMatchObject({ id: held, status: "IN_PROGRESS", lockEpoch: 2 });
    const { run: now } = await h.one<{ run: string }>("SELECT checkout_run_id AS run FROM issues WHERE id = $1", [held]);
    expect(now).not.toBe(run);
    expect(await h.one("SELECT status::text FROM heartbeat_runs WHERE id = $1", [now])).toEqual({ status: "RUNNING" });
    expect(await h.one("SELECT status::text FROM heartbeat_runs WHERE id = $1", [run])).toEqual({ status: "TIMED_OUT" });
    // Held again at the new epoch: no longer lost.
    const read = await session.tool<One>("get_issue", { issueId: held });
    expect(read.problem).toBeUndefined();
    expect((await session.tool<One>("release_issue", { issueId: held, outcome: "DONE" })).issue?.status).toBe("DONE");
  });

  it("a stalled session whose next call is claim_next_issue: it claims with a new run at once", async () => {
    const { session, held, run } = await sessionHolding(connect);
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [run]);
    expect((await sweep(h.db.prisma, h.bus)).recoveredIssues).toBeGreaterThanOrEqual(1);
    const again = await session.tool<One>("claim_next_issue", { includeUnassigned: true });
    expect(again.problem).toBeUndefined();
    expect(again.issue).toMatchObject({ id: held, status: "IN_PROGRESS", lockEpoch: 2 });
    const { run: now } = await h.one<{ run: string }>("SELECT checkout_run_id AS run FROM issues WHERE id = $1", [held]);
    expect(now).not.toBe(run);
  });
});

describe("a revoked key", () => {
  it("over HTTP: the next request is 401 with a plain message; the keeper ends the session and gives its hold back (RUN_FINISHED)", async () => {
    const { co, session, held, run } = await sessionHolding((key) => connectHttp(h.url, key));
    const key = co.agents[0]!.client.token!;
    await co.board.ok(RotateAgentKeyDocument, { agentId: co.agents[0]!.id });

    const next = session.call("get_issue", { issueId: held });
    await expect(next).rejects.toMatchObject({ code: 401 });
    await expect(next).rejects.toThrow(/UNAUTHENTICATED: send an agent key as `Authorization: Bearer <key>` \(a revoked key no longer works\)/);
    const raw = await fetch(mcpUrl(h.url), {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": session.transport.sessionId!,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "get_issue", arguments: { issueId: held } } }),
    });
    expect(raw.status).toBe(401);
    expect(raw.headers.get("www-authenticate")).toBe("Bearer");
    const text = await raw.text();
    expect(JSON.parse(text)).toEqual({
      jsonrpc: "2.0",
      error: { code: -32001, message: expect.stringMatching(/^UNAUTHENTICATED: /), data: { code: "UNAUTHENTICATED" } },
      id: null,
    });
    expect(text).not.toMatch(/at |\.ts:|\.js:/);

    await eventually(
      async () => ((await h.sql("SELECT 1 FROM mcp_sessions WHERE company_id = $1", [co.id])).length ? undefined : true),
      "the keeper to end the session",
    );
    // The keeper deletes the session, then finishes its run.
    const holderNow = async () => (await h.one<{ run: string | null }>("SELECT checkout_run_id AS run FROM issues WHERE id = $1", [held])).run;
    await eventually(async () => ((await holderNow()) ? undefined : true), "the keeper to finish the session's run");
    expect(await h.one("SELECT status::text, checkout_run_id FROM issues WHERE id = $1", [held])).toEqual({ status: "OPEN", checkout_run_id: null });
    const last = await h.one("SELECT kind::text, run_id, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq DESC LIMIT 1", [held]);
    expect(last).toEqual({ kind: "RELEASED", run_id: run, reason: "RUN_FINISHED" });
  });

  it("over stdio: a call about the held issue answers HoldLost (holder unknown), any other is refused UNAUTHENTICATED, and nothing changes", async () => {
    const { co, session, held, other } = await sessionHolding((key) => connectStdio(h.url, key));
    await co.board.ok(RotateAgentKeyDocument, { agentId: co.agents[0]!.id });
    const read = await everyCallSaysLost(session, held, other, null, /who holds it now is unknown: this session's key no longer works/);
    expect(read.issue).toBeNull();

    const refused = await session.call("list_issues", {});
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/^UNAUTHENTICATED: /);
    expect(textOf(refused)).not.toMatch(/at |\.ts:|\.js:/);
  });
});
