// What the MCP server refuses, and that a refusal does nothing: unknown tools
// and bad arguments (isError, before any request), another company's issue
// (IssueNotFound), keys that are not an agent's (401 / 403, and `baton mcp`
// exits 3), and its bounds, each before any work: a body over mcpMaxBodyBytes
// (413), GET (405), sessions past mcpSessionsPerKey and mcpSessionsPerInstance
// (429), requests past mcpRequestsPerMinute (429 with Retry-After), and
// made-up keys past unknownKeysPerMinute (429). No answer carries a stack.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { spawnBaton } from "../helpers/cli.js";
import { ADMIN_TOKEN, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { closeAllSessions, connectHttp, connectStdio, mcpUrl, textOf } from "../helpers/mcp.js";
import type { McpSession, ToolIssue } from "../helpers/mcp.js";

let h: Harness;
/** An instance with small MCP bounds (sessions, body, made-up keys), on the same database. */
let small: string;
/** An instance allowing 6 MCP requests a minute per key. */
let slow: string;

const BODY_BYTES = 2048;
const REQUESTS_PER_MINUTE = 6;

beforeAll(async () => {
  h = await startHarness();
  small = (await h.startInstance({ limits: { mcpMaxBodyBytes: BODY_BYTES, mcpSessionsPerKey: 2, mcpSessionsPerInstance: 3, unknownKeysPerMinute: 2 } })).url;
  slow = (await h.startInstance({ limits: { mcpRequestsPerMinute: REQUESTS_PER_MINUTE } })).url;
});
afterEach(() => closeAllSessions());
afterAll(() => h?.close());

type One = { issue: ToolIssue | null };

/** Stack text: a frame ("    at f (file.ts:1:2)") or a source position. */
const STACK = /\bat \S+ \(|\.ts:\d|\.js:\d|node:internal/;

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

/** A raw POST to /mcp of `url`'s instance; its status, headers and body (text and JSON). */
async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(mcpUrl(url), {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  expect(text).not.toMatch(/\bat |\.ts:|\.js:/);
  return {
    status: response.status,
    headers: response.headers,
    text,
    json: JSON.parse(text) as { error?: { code: number; message: string; data?: Record<string, unknown> } },
  };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** A token shaped as an agent key (so that it is looked up), of no agent. */
const madeUpKey = (i: number) => `baton_agent_${`madeup${i}`.padEnd(43, "x")}`;

/** The tables a refused call could change: equal digests, and as many runs (the keeper may move a live run's lease). */
async function state() {
  const { heartbeat_runs: runs, ...rest } = await h.snapshot();
  return { ...rest, runs: runs!.split(":")[0] };
}

/** A company with one agent holding `held` through an MCP session. */
async function holding<S extends McpSession>(session: (key: string) => Promise<S>) {
  const co = await createCompany(h, 1);
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "held", assigneeAgentId: co.agents[0]!.id } });
  const s = await session(co.agents[0]!.client.token!);
  expect((await s.tool<One>("claim_next_issue")).issue?.id).toBe(createIssue.id);
  return { co, session: s, held: createIssue.id };
}

describe.each([
  ["HTTP", (key: string) => connectHttp(h.url, key)],
  ["stdio", (key: string) => connectStdio(h.url, key)],
] as const)("bad calls over %s", (_name, connect) => {
  it("an unknown tool and wrong argument types are isError answers, refused before any request: nothing changes, not even a run started", async () => {
    const co = await createCompany(h, 1);
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "x", assigneeAgentId: co.agents[0]!.id } });
    const s = await connect(co.agents[0]!.client.token!);
    const before = await h.snapshot();
    const refusals: [string, Record<string, unknown>, RegExp][] = [
      ["no_such_tool", {}, /Tool no_such_tool not found/],
      ["get_issue", { issueId: 5 }, /Input validation error: .*expected string, received number at issueId/],
      ["get_issue", { issueId: "not-an-id" }, /Input validation error: .*must be an issue id \(a UUID\)/],
      ["release_issue", { issueId: createIssue.id, outcome: "MAYBE" }, /Input validation error: .*"DONE"\|"BLOCKED"\|"FAILED"\|"REQUEUE" at outcome/],
      ["release_issue", { issueId: createIssue.id }, /Input validation error: .*outcome/],
      ["list_issues", { first: 1000 }, /Input validation error: .*first/],
      ["claim_next_issue", { includeUnassigned: "yes" }, /Input validation error: .*includeUnassigned/],
      ["checkout_issue", { issueId: createIssue.id, expectedStatuses: ["SOMEWHERE"] }, /Input validation error: .*expectedStatuses/],
      ["create_sub_issues", { parentId: createIssue.id, issues: [] }, /Input validation error: .*issues/],
    ];
    for (const [name, args, says] of refusals) {
      const answer = await s.call(name, args);
      expect(answer.isError, name).toBe(true);
      expect(answer.structuredContent, name).toBeUndefined();
      expect(textOf(answer), name).toMatch(says);
      expect(textOf(answer), name).not.toMatch(STACK);
    }
    expect(await h.snapshot()).toEqual(before);
  });
});

describe("another company's issue", () => {
  it("is IssueNotFound to every tool, and nothing changes", async () => {
    const { co, session } = await holding((key) => connectHttp(h.url, key));
    const theirs = await createCompany(h, 1);
    const { createIssue: foreign } = await theirs.board.ok(Ops.CreateIssueDocument, { input: { title: "theirs", assigneeAgentId: null } });
    const { createIssue: mine } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "mine" } });
    const before = await state();

    expect(await session.tool("get_issue", { issueId: foreign.id })).toEqual({
      issue: null,
      problem: "IssueNotFound",
      message: `no issue ${foreign.id} in your company`,
    });
    expect(await session.tool("checkout_issue", { issueId: foreign.id })).toMatchObject({ issue: null, problem: "IssueNotFound" });
    expect(await session.tool("release_issue", { issueId: foreign.id, outcome: "DONE" })).toMatchObject({ issue: null, problem: "IssueNotFound" });
    expect(await session.tool("create_sub_issues", { parentId: foreign.id, issues: [{ title: "part" }] })).toMatchObject({
      parent: null,
      issues: [],
      problem: "IssueNotFound",
    });
    expect(await session.tool("add_dependency", { issueId: foreign.id, blockedById: mine.id })).toMatchObject({ issue: null, problem: "IssueNotFound" });
    // Nor is it listed or claimed.
    expect((await session.tool<{ issues: ToolIssue[] }>("list_issues")).issues.map((i) => i.id)).not.toContain(foreign.id);

    expect(await state()).toEqual(before);
    expect(await h.one("SELECT status::text, lock_epoch FROM issues WHERE id = $1", [foreign.id])).toEqual({ status: "OPEN", lock_epoch: 0 });
  });
});

describe("keys", () => {
  it("/mcp without a key, with a made-up key, with a board key or the admin token: 401 / 403 JSON-RPC errors, no stack", async () => {
    const co = await createCompany(h, 0);
    const none = await post(h.url, INITIALIZE);
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe("Bearer");
    expect(none.json).toEqual({
      jsonrpc: "2.0",
      error: { code: -32001, message: expect.stringMatching(/^UNAUTHENTICATED: send an agent key/), data: { code: "UNAUTHENTICATED" } },
      id: null,
    });

    const madeUp = await post(h.url, INITIALIZE, bearer(madeUpKey(0)));
    expect(madeUp.status).toBe(401);
    expect(madeUp.json.error).toMatchObject({ code: -32001, data: { code: "UNAUTHENTICATED" } });

    const board = await post(h.url, INITIALIZE, bearer(co.board.token!));
    expect(board.status).toBe(403);
    expect(board.json).toEqual({
      jsonrpc: "2.0",
      error: { code: -32001, message: "FORBIDDEN: /mcp is for agents, and this is a board key", data: { code: "FORBIDDEN" } },
      id: null,
    });

    const admin = await post(h.url, INITIALIZE, bearer(ADMIN_TOKEN));
    expect(admin.status).toBe(403);
    expect(admin.json.error?.message).toBe("FORBIDDEN: /mcp is for agents, and this is the admin token");

    // The SDK client is refused too, with the server's words.
    await expect(connectHttp(h.url, co.board.token!)).rejects.toMatchObject({ code: 403, message: expect.stringContaining("/mcp is for agents") });
    expect(await h.sql("SELECT 1 FROM mcp_sessions WHERE company_id = $1", [co.id])).toEqual([]);
  });

  it("without a valid key nothing of the body is read: a body over mcpMaxBodyBytes is 401, not 413", async () => {
    const big = JSON.stringify({ ...INITIALIZE, padding: "x".repeat(BODY_BYTES * 4) });
    expect((await post(small, big)).status).toBe(401);
    const co = await createCompany(h, 0);
    expect((await post(small, big, bearer(co.board.token!))).status).toBe(403);
  });

  it.each([
    ["a board key", "board", /^baton: baton mcp needs an agent key \(this token is the board's\)$/],
    ["a made-up key", "made-up", /^baton: UNAUTHENTICATED: /],
  ])("`baton mcp` with %s exits 3 with one line on stderr", async (_what, which, line) => {
    const co = await createCompany(h, 0);
    const token = which === "board" ? co.board.token! : madeUpKey(1);
    const run = spawnBaton(h.url, ["mcp"], token);
    expect(await run.exited, run.stderr()).toBe(3);
    expect(run.stderr().trim().split("\n")).toEqual([expect.stringMatching(line)]);
    expect(run.stdout()).toBe("");
  });
});

describe("bounds", () => {
  it("a body over mcpMaxBodyBytes is 413 LIMIT_EXCEEDED, declared or not, and does nothing", async () => {
    const { co, session, held } = await holding((key) => connectHttp(small, key));
    const agentKey = co.agents[0]!.client.token!;
    const before = await state();

    // Through the SDK client: a call whose arguments make the body too big.
    const call = session.call("create_sub_issues", { parentId: held, issues: [{ title: "part", description: "d".repeat(BODY_BYTES) }] });
    await expect(call).rejects.toMatchObject({ code: 413 });
    await expect(call).rejects.toThrow(/LIMIT_EXCEEDED|request body is larger than 2048 bytes \(limit mcpMaxBodyBytes = 2048\)/);

    // Raw: declared by content-length, and streamed without one (counted as it arrives).
    const token = session.transport.sessionId!;
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "release_issue", arguments: { issueId: held, outcome: "DONE", reason: "r".repeat(BODY_BYTES) } },
    });
    const declared = await post(small, body, { ...bearer(agentKey), "mcp-session-id": token });
    expect(declared.status).toBe(413);
    expect(declared.json.error).toEqual({
      code: -32000,
      message: `request body is larger than ${BODY_BYTES} bytes (limit mcpMaxBodyBytes = ${BODY_BYTES})`,
      data: { code: "LIMIT_EXCEEDED", limit: "mcpMaxBodyBytes", max: BODY_BYTES },
    });
    const chunks = [body.slice(0, 1000), body.slice(1000, 2000), body.slice(2000)];
    const streamed = await fetch(mcpUrl(small), {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...bearer(agentKey), "mcp-session-id": token },
      body: new ReadableStream({
        pull(controller) {
          const next = chunks.shift();
          if (next === undefined) controller.close();
          else controller.enqueue(new TextEncoder().encode(next));
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(JSON.parse(await streamed.text()).error.data).toEqual({ code: "LIMIT_EXCEEDED", limit: "mcpMaxBodyBytes", max: BODY_BYTES });

    expect(await state()).toEqual(before);
    expect(await h.one("SELECT status::text FROM issues WHERE id = $1", [held])).toEqual({ status: "IN_PROGRESS" });
    // A call within the bound still works.
    expect((await session.tool<One>("release_issue", { issueId: held, outcome: "DONE" })).issue?.status).toBe("DONE");
  });

  it("over stdio, a message over 1 MB ends the session: the call fails, `baton mcp` exits and its run is finished (RUN_FINISHED)", async () => {
    const { session, held } = await holding((key) => connectStdio(h.url, key));
    const { run } = await h.one<{ run: string }>("SELECT checkout_run_id AS run FROM issues WHERE id = $1", [held]);
    const call = session.call("release_issue", { issueId: held, outcome: "DONE", reason: "r".repeat(1024 * 1024) });
    await expect(call).rejects.toThrow(/Connection closed/);
    await session.exited;
    expect(await h.one("SELECT status::text, checkout_run_id FROM issues WHERE id = $1", [held])).toEqual({ status: "OPEN", checkout_run_id: null });
    const last = await h.one("SELECT kind::text, run_id, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq DESC LIMIT 1", [held]);
    expect(last).toEqual({ kind: "RELEASED", run_id: run, reason: "RUN_FINISHED" });
  });

  it("GET /mcp is 405 (no event stream), with or without a key", async () => {
    const co = await createCompany(h, 1);
    for (const headers of [{}, bearer(co.agents[0]!.client.token!)]) {
      const response = await fetch(mcpUrl(h.url), { headers: { accept: "text/event-stream", ...headers } });
      expect(response.status).toBe(405);
      expect(response.headers.get("allow")).toBe("POST, DELETE");
      const text = await response.text();
      expect(JSON.parse(text)).toMatchObject({ jsonrpc: "2.0", error: { code: -32000, message: expect.stringMatching(/^Method not allowed/) }, id: null });
      expect(text).not.toMatch(STACK);
    }
  });

  it("more sessions than mcpSessionsPerKey, on any instance, are 429 LIMIT_EXCEEDED until one ends; other keys are not counted", async () => {
    const co = await createCompany(h, 2);
    const [a, b] = co.agents.map((x) => x.client.token!) as [string, string];
    // One on each instance: counted together, in the database.
    const first = await connectHttp(h.url, a);
    await connectHttp(small, a);
    const before = await state();
    const refused = await post(small, INITIALIZE, bearer(a));
    expect(refused.status).toBe(429);
    expect(refused.json.error).toEqual({
      code: -32000,
      message: "too many MCP sessions open for this key: end one (DELETE) or let it idle out (limit mcpSessionsPerKey = 2)",
      data: { code: "LIMIT_EXCEEDED", limit: "mcpSessionsPerKey", max: 2 },
    });
    await expect(connectHttp(small, a)).rejects.toMatchObject({ code: 429 });
    expect(await state()).toEqual(before);
    expect(await h.sql("SELECT 1 FROM mcp_sessions WHERE agent_id = $1", [co.agents[0]!.id])).toHaveLength(2);

    // Another key opens its own.
    await connectHttp(small, b);
    // Once one ends, the key may open another.
    await first.terminate();
    await connectHttp(small, a);
  });

  it("more sessions than mcpSessionsPerInstance on one instance are 429 LIMIT_EXCEEDED", async () => {
    // Every session of this file is ended after its test: the instance starts with none.
    expect(await h.sql("SELECT 1 FROM mcp_sessions")).toEqual([]);
    const co = await createCompany(h, 2);
    const [a, b] = co.agents.map((x) => x.client.token!) as [string, string];
    await connectHttp(small, a);
    await connectHttp(small, a);
    await connectHttp(small, b);
    const refused = await post(small, INITIALIZE, bearer(b));
    expect(refused.status).toBe(429);
    expect(refused.json.error?.data).toEqual({ code: "LIMIT_EXCEEDED", limit: "mcpSessionsPerInstance", max: 3 });
    expect(await h.sql("SELECT 1 FROM mcp_sessions")).toHaveLength(3);
  });

  it("made-up keys past unknownKeysPerMinute are 429 LIMIT_EXCEEDED with Retry-After, before any lookup or body", async () => {
    const statuses = [];
    for (let i = 0; i < 4; i++) {
      const answer = await post(small, INITIALIZE, bearer(madeUpKey(10 + i)));
      statuses.push(answer.status);
      if (answer.status === 429) {
        expect(answer.json.error?.data).toEqual({ code: "LIMIT_EXCEEDED", limit: "unknownKeysPerMinute", max: 2 });
        expect(Number(answer.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      }
    }
    expect(statuses).toEqual([401, 401, 429, 429]);
  });

  it("requests past mcpRequestsPerMinute are 429 with Retry-After before any work: the refused release changes nothing", async () => {
    const { co, session, held } = await holding((key) => connectHttp(slow, key));
    const key = co.agents[0]!.client.token!;
    // initialize, notifications/initialized, tools/list, claim_next_issue: 4 of the 6; one more read leaves 1.
    expect((await session.tool("get_issue", { issueId: held })).problem).toBeUndefined();
    expect((await session.tool<{ issues: unknown[] }>("list_issues")).issues).toHaveLength(1);
    const before = await state();
    const refused = await post(
      slow,
      { jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "release_issue", arguments: { issueId: held, outcome: "DONE" } } },
      { ...bearer(key), "mcp-session-id": session.transport.sessionId! },
    );
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60 / REQUESTS_PER_MINUTE);
    expect(refused.json.error).toEqual({
      code: -32000,
      message: `too many MCP requests for this key; retry later (limit mcpRequestsPerMinute = ${REQUESTS_PER_MINUTE})`,
      data: { code: "LIMIT_EXCEEDED", limit: "mcpRequestsPerMinute", max: REQUESTS_PER_MINUTE },
    });
    await expect(session.call("release_issue", { issueId: held, outcome: "DONE" })).rejects.toMatchObject({ code: 429 });
    expect(await state()).toEqual(before);
    expect(await h.one("SELECT status::text FROM issues WHERE id = $1", [held])).toEqual({ status: "IN_PROGRESS" });
    // The bucket is the key's on this instance: another instance still answers it.
    const elsewhere = await connectHttp(h.url, key);
    expect((await elsewhere.tool<{ issues: unknown[] }>("list_issues")).issues).toHaveLength(1);
  });
});
