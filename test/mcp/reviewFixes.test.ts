// What a review of the MCP server found, each now a rule: a session that ends
// starts no run after its run is finished; a client gone from stdout ends the
// session; a batch is refused, not admitted as one request; an initialize the
// transport refuses opens no session; a lost hold claimed again says the
// earlier one was lost.
import { PassThrough, Writable } from "node:stream";
import type { OperationDefinitionNode } from "graphql";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { request } from "../../src/client/request.js";
import type { GraphQLCall } from "../../src/mcp/calls.js";
import { serveStdio } from "../../src/mcp/stdio.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { closeAllSessions, connectHttp, mcpUrl } from "../helpers/mcp.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterEach(() => closeAllSessions());
afterAll(() => h?.close());

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
};
const runsOf = async (agentId: string) =>
  Object.fromEntries(
    (await h.sql<{ status: string; n: number }>("SELECT status::text, count(*)::int AS n FROM heartbeat_runs WHERE agent_id = $1 GROUP BY 1", [agentId])).map(
      (r) => [r.status, r.n],
    ),
  );

it("stdin closing while a claim is on its way: the claim ends with the session's run, and no run starts after it", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "a", assigneeAgentId: agent.id },
      { title: "b", assigneeAgentId: agent.id },
    ],
  });
  const endpoint = { url: h.url, token: agent.client.token! };
  // The second claim waits at a gate the test opens once stdin has closed: a claim on its way as the session ends.
  let claims = 0;
  let reachedGate!: () => void;
  const atGate = new Promise<void>((resolve) => (reachedGate = resolve));
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const call = (async (document: { definitions: readonly OperationDefinitionNode[] }, variables: Record<string, unknown>) => {
    if (document.definitions[0]!.name!.value === "McpClaimNext" && ++claims === 2) {
      reachedGate();
      await gate;
    }
    return request(endpoint, document as never, variables);
  }) as unknown as GraphQLCall;
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const answers: { id?: number }[] = [];
  let buffer = "";
  stdout.on("data", (chunk: Buffer) => {
    buffer += chunk.toString();
    for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
      answers.push(JSON.parse(buffer.slice(0, i)));
      buffer = buffer.slice(i + 1);
    }
  });
  const served = serveStdio({ call, log: () => {}, stdin, stdout });
  const send = (m: unknown) => stdin.write(`${JSON.stringify(m)}\n`);
  send(INITIALIZE);
  send({ jsonrpc: "2.0", method: "notifications/initialized" });
  send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "claim_next_issue", arguments: {} } });
  await eventually(() => (answers.some((a) => a.id === 2) ? true : undefined), "the first claim's answer");
  send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "claim_next_issue", arguments: {} } });
  await atGate;
  stdin.end();
  await eventually(async () => (((await runsOf(agent.id)).RUNNING ?? 0) === 1 ? true : undefined), "the session's run, still running");
  open();
  await served;
  // Every run of the session finished, nothing held.
  expect(await runsOf(agent.id)).toEqual({ SUCCEEDED: 1 });
  const held = await h.sql("SELECT 1 FROM issues WHERE company_id = $1 AND checkout_run_id IS NOT NULL", [co.id]);
  expect(held).toEqual([]);
});

it("a client gone from stdout (EPIPE) ends the session: its run finished, what it held given back", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: [{ title: "a", assigneeAgentId: agent.id }] });
  const endpoint = { url: h.url, token: agent.client.token! };
  const call = ((document: never, variables: Record<string, unknown>) => request(endpoint, document, variables)) as unknown as GraphQLCall;
  const stdin = new PassThrough();
  // stdout as a pipe whose reader has gone once the first answer is read: every later write fails with EPIPE.
  let written = "";
  let gone = false;
  const stdout = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (gone) return done(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
      written += chunk.toString();
      done();
    },
  });
  const served = serveStdio({ call, log: () => {}, stdin, stdout });
  stdin.write(`${JSON.stringify(INITIALIZE)}\n`);
  await eventually(() => (written.includes('"id":1') ? true : undefined), "initialize's answer");
  gone = true;
  stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
  stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "claim_next_issue", arguments: {} } })}\n`);
  // stdin stays open: only the failed write can end the session.
  await served;
  expect(await runsOf(agent.id)).toEqual({ SUCCEEDED: 1 });
  expect(await h.sql("SELECT status::text FROM issues WHERE company_id = $1", [co.id])).toEqual([{ status: "OPEN" }]);
  stdin.end();
});

it("a JSON-RPC batch is refused before any work; an initialize the transport refuses opens no session", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: [{ title: "a", assigneeAgentId: agent.id }] });
  const session = await connectHttp(h.url, agent.client.token!);
  const headers = {
    authorization: `Bearer ${agent.client.token}`,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-session-id": session.transport.sessionId!,
    "mcp-protocol-version": "2025-06-18",
  };
  const before = await h.snapshot();
  const claim = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "claim_next_issue", arguments: {} } });
  const batch = await fetch(mcpUrl(h.url), { method: "POST", headers, body: JSON.stringify([claim(1), claim(2)]) });
  expect(batch.status).toBe(400);
  expect(await batch.json()).toMatchObject({ error: { code: -32600 } });
  expect(await h.snapshot()).toEqual(before);

  const sessions = async () => (await h.sql("SELECT 1 FROM mcp_sessions WHERE agent_id = $1", [agent.id])).length;
  const open = await sessions();
  for (const accept of ["application/json", "text/html"]) {
    const refused = await fetch(mcpUrl(h.url), { method: "POST", headers: { ...headers, accept, "mcp-session-id": "" }, body: JSON.stringify(INITIALIZE) });
    expect(refused.status).toBe(406);
    expect(refused.headers.get("mcp-session-id")).toBeNull();
  }
  const halfInitialize = await fetch(mcpUrl(h.url), {
    method: "POST",
    headers: { ...headers, "mcp-session-id": "" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "initialize" }),
  });
  expect(halfInitialize.status).toBe(400);
  expect(await sessions()).toBe(open);
});

it("a hold lost and claimed again by the session says the earlier one was lost", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "X", assigneeAgentId: agent.id } });
  const session = await connectHttp(h.url, agent.client.token!);
  const first = await session.call("claim_next_issue");
  expect(first.structuredContent).toMatchObject({ issue: { id: createIssue.id, lockEpoch: 1 } });
  expect(first.structuredContent).not.toHaveProperty("earlierHoldLost");
  await co.board.ok(Ops.ForceReleaseDocument, { issueId: createIssue.id, reason: "stop: this is wrong" });
  const again = await session.call("claim_next_issue");
  expect(again.structuredContent).toMatchObject({ issue: { id: createIssue.id, lockEpoch: 2 }, earlierHoldLost: 1 });
  // Checked out again by the holder: the same hold, nothing lost.
  const same = await session.call("checkout_issue", { issueId: createIssue.id, expectedStatuses: ["OPEN", "IN_PROGRESS"] });
  expect(same.structuredContent).toMatchObject({ issue: { lockEpoch: 2 } });
  expect(same.structuredContent).not.toHaveProperty("earlierHoldLost");
});
