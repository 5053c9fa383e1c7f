// The MCP server's seven tools, one at a time, over Streamable HTTP (/mcp)
// with the official SDK client, against a real server and database. The
// client has listed the tools first, so it validates every answer's
// structuredContent against the tool's outputSchema; structured() checks the
// text carries the same JSON. A domain problem is an answer (isError false)
// with `problem`; what each tool did is read back from the database.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { closeAllSessions, connectHttp, TOOL_NAMES } from "../helpers/mcp.js";
import type { HttpSession, ToolIssue } from "../helpers/mcp.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterEach(() => closeAllSessions());
afterAll(() => h?.close());

async function issue(co: Company, input: Partial<Ops.CreateIssueInput> = {}) {
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "work", assigneeAgentId: co.agents[0]!.id, ...input } });
  return createIssue;
}

/** A company of two agents, and an MCP session over HTTP for each. */
async function company(): Promise<{ co: Company; a: HttpSession; b: HttpSession }> {
  const co = await createCompany(h, 2);
  const [a, b] = await Promise.all(co.agents.map((agent) => connectHttp(h.url, agent.client.token!)));
  return { co, a: a!, b: b! };
}

const row = (id: string) =>
  h.one<{ status: string; checkout_run_id: string | null; execution_run_id: string | null; lock_epoch: number; attempt_count: number }>(
    "SELECT status::text, checkout_run_id, execution_run_id, lock_epoch, attempt_count FROM issues WHERE id = $1",
    [id],
  );

/** The run of the agent's one MCP session (started by its first tool call that needed one). */
const sessionRun = async (agentId: string) => (await h.one<{ run_id: string }>("SELECT run_id FROM mcp_sessions WHERE agent_id = $1", [agentId])).run_id;

const events = (issueId: string) =>
  h.sql<{ kind: string; status: string; run_id: string | null; reason: string | null }>(
    "SELECT kind::text, status::text, run_id, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq",
    [issueId],
  );

/** Seconds from now to the issue's not_before, on the database clock. */
const delaySeconds = async (id: string) =>
  Number((await h.one<{ s: string }>("SELECT extract(epoch FROM not_before - now()) AS s FROM issues WHERE id = $1", [id])).s);

type One = { issue: ToolIssue | null };

describe("tools/list", () => {
  it("names the seven tools, each with a description, an inputSchema and an outputSchema", async () => {
    const { a } = await company();
    const { tools } = await a.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOL_NAMES].sort());
    for (const tool of tools) {
      expect(tool.description, tool.name).toMatch(/\w/);
      expect(tool.inputSchema.type, tool.name).toBe("object");
      expect(tool.outputSchema?.type, tool.name).toBe("object");
      expect(Object.keys(tool.outputSchema?.properties ?? {}).length, tool.name).toBeGreaterThan(0);
    }
    // What the tools answer about: an issue, a list of them, or a parent and its parts.
    const out = Object.fromEntries(tools.map((t) => [t.name, Object.keys(t.outputSchema!.properties!)]));
    expect(out.list_issues).toEqual(["issues"]);
    expect(out.create_sub_issues).toEqual(expect.arrayContaining(["parent", "issues", "problem", "message"]));
    for (const name of ["claim_next_issue", "checkout_issue", "get_issue", "release_issue", "add_dependency"]) {
      expect(out[name]).toEqual(expect.arrayContaining(["issue", "problem", "message", "holder"]));
    }
  });
});

describe("claim_next_issue", () => {
  it("claims the agent's next issue with both locks for the session's run; NoIssueAvailable when there is none; includeUnassigned takes nobody's", async () => {
    const { co, a } = await company();
    const mine = await issue(co, { title: "mine", priority: "LOW" });
    const nobodys = await issue(co, { title: "nobody's", priority: "CRITICAL", assigneeAgentId: null });

    const claimed = await a.tool<One>("claim_next_issue");
    expect(claimed.problem).toBeUndefined();
    expect(claimed.issue).toEqual({
      id: mine.id,
      title: "mine",
      description: null,
      priority: "LOW",
      status: "IN_PROGRESS",
      lockEpoch: 1,
      parentId: null,
      concurrencyKey: null,
    });
    const run = await sessionRun(co.agents[0]!.id);
    expect(await row(mine.id)).toMatchObject({ status: "IN_PROGRESS", checkout_run_id: run, execution_run_id: run, lock_epoch: 1 });
    expect(await events(mine.id)).toEqual([
      { kind: "CLAIMED", status: "CLAIMED", run_id: run, reason: null },
      { kind: "EXECUTION_ACQUIRED", status: "IN_PROGRESS", run_id: run, reason: null },
    ]);

    const none = await a.tool<One>("claim_next_issue");
    expect(none).toEqual({ issue: null, problem: "NoIssueAvailable", message: expect.any(String) });
    expect((await row(nobodys.id)).status).toBe("OPEN");

    const other = await a.tool<One>("claim_next_issue", { includeUnassigned: true });
    expect(other.issue).toMatchObject({ id: nobodys.id, status: "IN_PROGRESS", lockEpoch: 1 });
    // One session, one run: both claims are its.
    expect(await row(nobodys.id)).toMatchObject({ checkout_run_id: run, execution_run_id: run });
  });
});

describe("checkout_issue", () => {
  it("takes a named OPEN issue; again for the holder answers it again; another run is refused as claimIssue refuses it, naming the live holder", async () => {
    const { co, a, b } = await company();
    const x = await issue(co, { title: "named", assigneeAgentId: null });

    const taken = await a.tool<One>("checkout_issue", { issueId: x.id });
    expect(taken.problem).toBeUndefined();
    expect(taken.issue).toMatchObject({ id: x.id, status: "IN_PROGRESS", lockEpoch: 1 });
    const runA = await sessionRun(co.agents[0]!.id);
    expect(await row(x.id)).toMatchObject({ status: "IN_PROGRESS", checkout_run_id: runA, execution_run_id: runA, lock_epoch: 1, attempt_count: 1 });

    // The holder asks again: the same hold, no new epoch, no new attempt.
    const again = await a.tool<One>("checkout_issue", { issueId: x.id });
    expect(again.problem).toBeUndefined();
    expect(again.issue).toMatchObject({ id: x.id, status: "IN_PROGRESS", lockEpoch: 1 });
    expect(await row(x.id)).toMatchObject({ checkout_run_id: runA, lock_epoch: 1, attempt_count: 1 });

    // Another agent, default expectedStatuses [OPEN]: the issue is IN_PROGRESS, so claimIssue's answer is UnexpectedStatus.
    const theirs = await issue(co, { title: "a's", assigneeAgentId: co.agents[0]!.id });
    await b.tool("list_issues");
    const before = await h.snapshot();
    const refused = await b.tool<One>("checkout_issue", { issueId: x.id });
    expect(refused).toEqual({ issue: null, problem: "UnexpectedStatus", message: `issue ${x.id} is IN_PROGRESS, expected one of [OPEN]` });

    // Expecting IN_PROGRESS too, the hold itself refuses it: CheckoutConflict names the holder, live.
    const conflict = await b.tool<One>("checkout_issue", { issueId: x.id, expectedStatuses: ["OPEN", "IN_PROGRESS"] });
    expect(conflict).toEqual({
      issue: null,
      problem: "CheckoutConflict",
      message: expect.stringContaining(runA),
      holder: { runId: runA, agentId: co.agents[0]!.id, live: true },
    });
    // The same as claimIssue answers b's run for it.
    const runB = await sessionRun(co.agents[1]!.id);
    const api = await co.agents[1]!.client.ok(Ops.ClaimIssueDocument, { runId: runB, issueId: x.id });
    expect(api.claimIssue.__typename).toBe("UnexpectedStatus");
    const apiConflict = await co.agents[1]!.client.ok(Ops.ClaimIssueDocument, { runId: runB, issueId: x.id, expectedStatuses: ["OPEN", "IN_PROGRESS"] });
    expect(apiConflict.claimIssue.__typename).toBe("CheckoutConflict");

    // An OPEN issue assigned to another agent: CheckoutConflict naming that agent, no run, not live.
    const assigned = await b.tool<One>("checkout_issue", { issueId: theirs.id });
    expect(assigned).toEqual({
      issue: null,
      problem: "CheckoutConflict",
      message: `issue ${theirs.id} is assigned to agent ${co.agents[0]!.id}`,
      holder: { runId: null, agentId: co.agents[0]!.id, live: false },
    });
    // None of these refusals changed anything but b's session starting its run.
    const after = await h.snapshot();
    expect({ ...after, heartbeat_runs: "" }).toEqual({ ...before, heartbeat_runs: "" });
    expect(await row(x.id)).toMatchObject({ checkout_run_id: runA, lock_epoch: 1, attempt_count: 1 });
  });
});

describe("get_issue", () => {
  it("reads blockedBy, waitingOn and sub-issues", async () => {
    const { co, a } = await company();
    const open = await issue(co, { title: "still open" });
    const done = await issue(co, { title: "done already", assigneeAgentId: null });
    await a.tool("checkout_issue", { issueId: done.id });
    await a.tool("release_issue", { issueId: done.id, outcome: "DONE" });
    const x = await issue(co, { title: "waits", description: "the one read", priority: "HIGH", blockedBy: [open.id, done.id] });
    const { createIssues: parts } = await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: [
        { title: "part 1", parentId: x.id },
        { title: "part 2", parentId: x.id },
      ],
    });

    const read = await a.tool<{ issue: ToolIssue & { blockedBy: string[]; waitingOn: string[]; subIssues: unknown[]; events: unknown[] } }>("get_issue", {
      issueId: x.id,
    });
    expect(read.problem).toBeUndefined();
    expect(read.issue).toMatchObject({ id: x.id, title: "waits", description: "the one read", priority: "HIGH", status: "OPEN", lockEpoch: 0, parentId: null });
    expect([...read.issue.blockedBy].sort()).toEqual([open.id, done.id].sort());
    expect(read.issue.waitingOn).toEqual([open.id]);
    expect(read.issue.subIssues).toEqual(expect.arrayContaining(parts.map((p, i) => ({ id: p.id, title: `part ${i + 1}`, status: "OPEN" }))));
    expect(read.issue.subIssues).toHaveLength(2);
    expect(read.issue.events).toEqual([]);
  });

  it("lists the issue's last 20 lock events, newest first", async () => {
    const { co, a } = await company();
    const x = await issue(co, { title: "busy", maxAttempts: 10 });
    // Eight holds given back, each spending an attempt: 24 events (CLAIMED, EXECUTION_ACQUIRED, RELEASED each).
    for (let i = 0; i < 8; i++) {
      expect((await a.tool<One>("checkout_issue", { issueId: x.id })).issue?.lockEpoch).toBe(i + 1);
      expect((await a.tool<One>("release_issue", { issueId: x.id, outcome: "REQUEUE", reason: `round ${i}` })).issue?.status).toBe("OPEN");
    }
    await h.settled(co.id);
    const ledger = await h.sql<{ seq: string; kind: string; status: string; reason: string | null }>(
      "SELECT seq::text, kind::text, status::text, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq DESC",
      [x.id],
    );
    expect(ledger).toHaveLength(24);

    const read = await a.tool<{ issue: { events: { seq: string; kind: string; status: string; reason: string | null; at: string }[] } }>("get_issue", {
      issueId: x.id,
    });
    expect(read.issue.events.map(({ seq, kind, status, reason }) => ({ seq, kind, status, reason }))).toEqual(ledger.slice(0, 20));
    expect(read.issue.events[0]).toMatchObject({ kind: "RELEASED", reason: "REQUEUE: round 7" });
  });
});

describe("list_issues", () => {
  it("lists the company's issues oldest first, by status, by readiness and up to `first`", async () => {
    const { co, a } = await company();
    const ready1 = await issue(co, { title: "ready 1" });
    const ready2 = await issue(co, { title: "ready 2" });
    const waiting = await issue(co, { title: "waiting", blockedBy: [ready1.id] });
    const backlog = await issue(co, { title: "later", status: "BACKLOG" });
    const held = await issue(co, { title: "held" });
    await a.tool("checkout_issue", { issueId: held.id });

    const ids = async (args: Record<string, unknown>) => (await a.tool<{ issues: ToolIssue[] }>("list_issues", args)).issues.map((i) => i.id);
    expect(await ids({})).toEqual([ready1.id, ready2.id, waiting.id, backlog.id, held.id]);
    expect(await ids({ status: ["OPEN"] })).toEqual([ready1.id, ready2.id, waiting.id]);
    expect(await ids({ status: ["IN_PROGRESS", "BACKLOG"] })).toEqual([backlog.id, held.id]);
    expect(await ids({ ready: true })).toEqual([ready1.id, ready2.id]);
    expect(await ids({ ready: false })).toEqual([waiting.id, backlog.id, held.id]);
    expect(await ids({ first: 2 })).toEqual([ready1.id, ready2.id]);
    const list = await a.tool<{ issues: ToolIssue[] }>("list_issues", { status: ["IN_PROGRESS"] });
    expect(list).toEqual({
      issues: [
        { id: held.id, title: "held", description: null, priority: "MEDIUM", status: "IN_PROGRESS", lockEpoch: 1, parentId: null, concurrencyKey: null },
      ],
    });
  });
});

describe("release_issue", () => {
  it("gives back each outcome as releaseIssue does, retryAfterSeconds delaying FAILED and REQUEUE; a second release is refused", async () => {
    const { co, a } = await company();
    const [done, blocked, failed, requeued] = await Promise.all(["done", "blocked", "failed", "requeued"].map((title) => issue(co, { title })));
    for (const x of [done!, blocked!, failed!, requeued!]) expect((await a.tool<One>("checkout_issue", { issueId: x.id })).issue?.status).toBe("IN_PROGRESS");
    const run = await sessionRun(co.agents[0]!.id);

    const release = (id: string, args: Record<string, unknown>) => a.tool<One>("release_issue", { issueId: id, ...args });
    expect((await release(done!.id, { outcome: "DONE", reason: "fixed" })).issue).toMatchObject({ id: done!.id, status: "DONE" });
    expect((await release(blocked!.id, { outcome: "BLOCKED", reason: "needs a person" })).issue).toMatchObject({ status: "BLOCKED" });
    expect((await release(failed!.id, { outcome: "FAILED", reason: "broke", retryAfterSeconds: 120 })).issue).toMatchObject({ status: "OPEN" });
    expect((await release(requeued!.id, { outcome: "REQUEUE", retryAfterSeconds: 60 })).issue).toMatchObject({ status: "OPEN" });

    for (const x of [done!, blocked!, failed!, requeued!]) expect(await row(x.id)).toMatchObject({ checkout_run_id: null, execution_run_id: null });
    // FAILED spends the attempt; REQUEUE with a delay gives it back ("not now" is not a failure).
    expect((await row(failed!.id)).attempt_count).toBe(1);
    expect((await row(requeued!.id)).attempt_count).toBe(0);
    expect(await delaySeconds(failed!.id)).toBeGreaterThan(110);
    expect(await delaySeconds(failed!.id)).toBeLessThanOrEqual(120);
    expect(await delaySeconds(requeued!.id)).toBeGreaterThan(50);
    expect(await delaySeconds(requeued!.id)).toBeLessThanOrEqual(60);
    const last = async (id: string) => (await events(id)).at(-1);
    expect(await last(done!.id)).toEqual({ kind: "RELEASED", status: "DONE", run_id: run, reason: "DONE: fixed" });
    expect(await last(blocked!.id)).toEqual({ kind: "RELEASED", status: "BLOCKED", run_id: run, reason: "BLOCKED: needs a person" });
    expect(await last(failed!.id)).toMatchObject({ kind: "RELEASED", status: "OPEN", run_id: run, reason: expect.stringMatching(/^FAILED: broke/) });
    // Delayed: neither is claimable now.
    expect((await a.tool<One>("claim_next_issue")).problem).toBe("NoIssueAvailable");

    // The session no longer holds it: released again, the API's own answer (not HoldLost: nothing was lost).
    const before = await h.snapshot();
    const again = await release(done!.id, { outcome: "DONE" });
    expect(again).toMatchObject({ issue: null, problem: "NotLockOwner" });
    expect(await h.snapshot()).toEqual(before);
  });

  it("retryAfterSeconds with DONE is refused as bad input (isError, the API's code) and changes nothing", async () => {
    const { co, a } = await company();
    const x = await issue(co);
    await a.tool("checkout_issue", { issueId: x.id });
    const before = await h.snapshot();
    const refused = await a.call("release_issue", { issueId: x.id, outcome: "DONE", retryAfterSeconds: 10 });
    expect(refused.isError).toBe(true);
    expect(refused.content).toEqual([{ type: "text", text: expect.stringMatching(/^BAD_USER_INPUT: .*retryAfterSeconds/) }]);
    expect(await h.snapshot()).toEqual(before);
    expect((await row(x.id)).status).toBe("IN_PROGRESS");
  });
});

describe("create_sub_issues", () => {
  it("splits a held issue; with parentWaits, released REQUEUE, the parent comes back once every part is DONE", async () => {
    const { co, a } = await company();
    const parent = await issue(co, { title: "big job" });
    expect((await a.tool<One>("claim_next_issue")).issue?.id).toBe(parent.id);

    const split = await a.tool<{ parent: ToolIssue; issues: ToolIssue[] }>("create_sub_issues", {
      parentId: parent.id,
      parentWaits: true,
      issues: [
        { title: "part 1", priority: "HIGH" },
        { title: "part 2", description: "the second" },
      ],
    });
    expect(split.problem).toBeUndefined();
    expect(split.parent).toMatchObject({ id: parent.id, status: "IN_PROGRESS" });
    expect(split.issues).toMatchObject([
      { title: "part 1", priority: "HIGH", status: "OPEN", parentId: parent.id },
      { title: "part 2", description: "the second", status: "OPEN", parentId: parent.id },
    ]);
    const parts = split.issues.map((i) => i.id);
    const graph = await co.board.ok(Ops.IssueGraphDocument, { id: parent.id });
    expect([...graph.issue!.waitingOn].sort()).toEqual([...parts].sort());

    const back = await a.tool<One>("release_issue", { issueId: parent.id, outcome: "REQUEUE" });
    expect(back.issue).toMatchObject({ id: parent.id, status: "OPEN" });
    // The parent waits: the next claims take the parts (nobody's: includeUnassigned), never the parent.
    const taken = [];
    for (let i = 0; i < 2; i++) taken.push((await a.tool<One>("claim_next_issue", { includeUnassigned: true })).issue?.id);
    expect(taken.sort()).toEqual([...parts].sort());
    // Both parts are held now; nothing else is ready.
    expect((await a.tool<One>("claim_next_issue", { includeUnassigned: true })).problem).toBe("NoIssueAvailable");
    for (const id of parts) expect((await a.tool<One>("release_issue", { issueId: id, outcome: "DONE" })).issue?.status).toBe("DONE");
    const again = await a.tool<One>("claim_next_issue");
    expect(again.issue).toMatchObject({ id: parent.id, status: "IN_PROGRESS", lockEpoch: 2 });
  });
});

describe("add_dependency", () => {
  it("makes a held issue wait on another, still held; the edge that would close a cycle is refused with DependencyCycle and its path", async () => {
    const { co, a } = await company();
    const first = await issue(co, { title: "first" });
    const second = await issue(co, { title: "second" });
    await a.tool("checkout_issue", { issueId: first.id });
    const run = await sessionRun(co.agents[0]!.id);

    const added = await a.tool<{ issue: ToolIssue & { blockedBy: string[]; waitingOn: string[] } }>("add_dependency", {
      issueId: first.id,
      blockedById: second.id,
    });
    expect(added.problem).toBeUndefined();
    expect(added.issue).toMatchObject({ id: first.id, status: "IN_PROGRESS", blockedBy: [second.id], waitingOn: [second.id] });
    expect(await row(first.id)).toMatchObject({ status: "IN_PROGRESS", checkout_run_id: run });

    await a.tool("checkout_issue", { issueId: second.id });
    const before = await h.snapshot();
    const cycle = await a.tool<{ issue: null; path: string[] }>("add_dependency", { issueId: second.id, blockedById: first.id });
    expect(cycle).toMatchObject({ issue: null, problem: "DependencyCycle", message: expect.any(String) });
    // The path the new edge would close: first already waits on second.
    expect(cycle.path).toEqual([first.id, second.id]);
    expect(await h.snapshot()).toEqual(before);
    expect(await h.sql("SELECT 1 FROM issue_dependencies WHERE issue_id = $1", [second.id])).toEqual([]);
  });
});
