// docs/agents.md runs as written: its worked session (the ```json mcp-call
// and ```json mcp-answer blocks, in order) is sent by the official MCP SDK
// client to `baton mcp` (the built CLI, over stdio) and to /mcp (Streamable
// HTTP) of a real server, from the starting state the doc names; each answer
// must contain what the doc shows. Every tool the server lists has its
// section in the doc, with its arguments and answer fields.
import { readFileSync } from "node:fs";
import path from "node:path";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DOC = readFileSync(path.join(ROOT, "docs/agents.md"), "utf8");

interface Step {
  tool: string;
  arguments: Record<string, unknown>;
  answer: unknown;
}

/** The worked session: each mcp-call block with the mcp-answer block that follows it. */
function transcript(doc: string): Step[] {
  const blocks = [...doc.matchAll(/```json (mcp-call|mcp-answer)\n([\s\S]*?)```/g)].map((m) => ({ kind: m[1]!, json: JSON.parse(m[2]!) }));
  const steps: Step[] = [];
  for (let i = 0; i < blocks.length; i += 2) {
    const [call, answer] = [blocks[i]!, blocks[i + 1]];
    if (call.kind !== "mcp-call" || answer?.kind !== "mcp-answer")
      throw new Error(`docs/agents.md: block ${i + 1} is not an mcp-call followed by its mcp-answer`);
    steps.push({ tool: call.json.tool, arguments: call.json.arguments, answer: answer.json });
  }
  return steps;
}

const isName = (v: unknown): v is string => typeof v === "string" && /^<[^<>]+>$/.test(v);

/** The arguments with every name replaced by the id it was bound to. */
function bind(value: unknown, names: Map<string, string>): unknown {
  if (isName(value)) {
    const id = names.get(value);
    if (id === undefined) throw new Error(`${value} is used before an answer binds it`);
    return id;
  }
  if (Array.isArray(value)) return value.map((v) => bind(v, names));
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, bind(v, names)]));
  return value;
}

/**
 * Where `actual` differs from what `expected` shows: every field shown must be
 * there with that value (arrays element by element, of the same length); a
 * name binds the value it first meets, and must meet the same one after.
 */
function differences(expected: unknown, actual: unknown, names: Map<string, string>, at = ""): string[] {
  if (isName(expected)) {
    const bound = names.get(expected);
    if (bound === undefined) {
      if (typeof actual !== "string") return [`${at}: ${expected} stands for an id, got ${JSON.stringify(actual)}`];
      const other = [...names].find(([, id]) => id === actual);
      if (other) return [`${at}: ${expected} is the id ${other[0]} already names`];
      names.set(expected, actual);
      return [];
    }
    return bound === actual ? [] : [`${at}: expected ${expected} (${bound}), got ${JSON.stringify(actual)}`];
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return [`${at}: expected ${expected.length} items, got ${JSON.stringify(actual)}`];
    return expected.flatMap((e, i) => differences(e, actual[i], names, `${at}[${i}]`));
  }
  if (expected && typeof expected === "object") {
    if (!actual || typeof actual !== "object" || Array.isArray(actual)) return [`${at}: expected an object, got ${JSON.stringify(actual)}`];
    return Object.entries(expected).flatMap(([k, e]) => differences(e, (actual as Record<string, unknown>)[k], names, at ? `${at}.${k}` : k));
  }
  return Object.is(expected, actual) ? [] : [`${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`];
}

/** Runs the doc's session on `client`; throws at the first answer that is not what the doc shows. */
async function runTranscript(client: McpClient): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const [i, step] of transcript(DOC).entries()) {
    const result = await client.callTool({ name: step.tool, arguments: bind(step.arguments, names) as Record<string, unknown> });
    const where = `docs/agents.md, call ${i + 1} (${step.tool})`;
    if (result.isError) throw new Error(`${where} was refused: ${JSON.stringify(result.content)}`);
    const wrong = differences(step.answer, result.structuredContent, names);
    if (wrong.length)
      throw new Error(`${where} answered otherwise than the doc shows:\n  ${wrong.join("\n  ")}\nanswer: ${JSON.stringify(result.structuredContent)}`);
  }
  return names;
}

/** The starting state the doc names: a company with one agent and one issue assigned to it, "Ship the billing page", HIGH. */
async function startingState(): Promise<Company> {
  const co = await createCompany(h, 1);
  await co.board.ok(Ops.CreateIssueDocument, { input: { title: "Ship the billing page", priority: "HIGH", assigneeAgentId: co.agents[0]!.id } });
  return co;
}

/** The agent's runs, once none is RUNNING any more (a session that ended finishes its run). */
async function finishedRuns(agentId: string): Promise<string[]> {
  return eventually(async () => {
    const runs = await h.sql<{ status: string }>("SELECT status FROM heartbeat_runs WHERE agent_id = $1", [agentId]);
    return runs.some((r) => r.status === "RUNNING") ? undefined : runs.map((r) => r.status);
  }, "the session's run to be finished");
}

/** The issues of the company and their statuses, by title. */
async function statuses(co: Company): Promise<Record<string, string>> {
  const rows = await h.sql<{ title: string; status: string }>("SELECT title, status FROM issues WHERE company_id = $1", [co.id]);
  return Object.fromEntries(rows.map((r) => [r.title, r.status]));
}

const ALL_DONE = { "Ship the billing page": "DONE", "Write the migration": "DONE", "Build the form": "DONE" };

let h: Harness;
const clients: McpClient[] = [];

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await h?.close();
});

function stdioClient(co: Company): { client: McpClient; stderr: () => string; connect(): Promise<void> } {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["dist/cli/main.js", "mcp"],
    cwd: ROOT,
    env: { BATON_URL: h.url, BATON_TOKEN: co.agents[0]!.client.token! },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (c: Buffer) => (stderr += c.toString()));
  const client = new McpClient({ name: "agents-doc-test", version: "1.0.0" });
  clients.push(client);
  return { client, stderr: () => stderr, connect: () => client.connect(transport) };
}

it("the worked session runs as written over stdio (baton mcp), and closing stdin finishes its run", async () => {
  const co = await startingState();
  const { client, stderr, connect } = stdioClient(co);
  await connect();
  const names = await runTranscript(client).catch((err: Error) => {
    throw new Error(`${err.message}\nbaton mcp stderr: ${stderr()}`);
  });
  expect([...names.keys()].sort()).toEqual(["<parent>", "<sub 1>", "<sub 2>"]);
  expect(await statuses(co)).toEqual(ALL_DONE);
  await client.close();
  expect(await finishedRuns(co.agents[0]!.id)).toEqual(["SUCCEEDED"]);
});

it("the worked session runs as written over HTTP (/mcp), and DELETE ends the session and its run", async () => {
  const co = await startingState();
  const mcpUrl = new URL(h.url.replace(/\/graphql$/, "/mcp"));
  const transport = new StreamableHTTPClientTransport(mcpUrl, { requestInit: { headers: { authorization: `Bearer ${co.agents[0]!.client.token}` } } });
  const client = new McpClient({ name: "agents-doc-test", version: "1.0.0" });
  clients.push(client);
  await client.connect(transport);
  const names = await runTranscript(client);
  expect([...names.keys()].sort()).toEqual(["<parent>", "<sub 1>", "<sub 2>"]);
  expect(await statuses(co)).toEqual(ALL_DONE);
  const sessionId = transport.sessionId!;
  await transport.terminateSession();
  expect(await finishedRuns(co.agents[0]!.id)).toEqual(["SUCCEEDED"]);
  // The doc's 404: a session that has ended is not found.
  const after = await fetch(mcpUrl, {
    method: "POST",
    headers: {
      authorization: `Bearer ${co.agents[0]!.client.token}`,
      "mcp-session-id": sessionId,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  expect(after.status).toBe(404);
});

/** The text of docs/agents.md under `### \`name\``, up to the next heading. */
function toolSection(name: string): string | undefined {
  const start = DOC.indexOf(`\n### \`${name}\`\n`);
  if (start < 0) return undefined;
  const rest = DOC.slice(start + 1);
  const end = rest.slice(1).search(/\n#{2,3} /);
  return end < 0 ? rest : rest.slice(0, end + 1);
}

it("every tool the server lists has its section in docs/agents.md, naming each of its arguments and answer fields; no other tool has one", async () => {
  const co = await createCompany(h, 1);
  const { client, connect } = stdioClient(co);
  await connect();
  const { tools } = await client.listTools();
  expect(tools.length).toBeGreaterThan(0);
  // The fields every answer may carry are said once, before the first tool's section.
  const common = DOC.slice(DOC.indexOf("\n## The tools\n"), DOC.indexOf("\n### `"));
  const everyAnswer = ["problem", "message", "holder"];
  const undocumented = everyAnswer.filter((f) => !common.includes(`\`${f}\``)).map((f) => `\`${f}\` is not in "The tools"`);
  for (const tool of tools) {
    const section = toolSection(tool.name);
    if (!section) {
      undocumented.push(`${tool.name}: no "### \`${tool.name}\`" section`);
      continue;
    }
    const answers = Object.keys(tool.outputSchema?.properties ?? {}).filter((f) => !everyAnswer.includes(f));
    const fields = [...Object.keys(tool.inputSchema.properties ?? {}), ...answers];
    for (const field of fields) if (!section.includes(`\`${field}\``)) undocumented.push(`${tool.name}: \`${field}\` is not in its section`);
  }
  expect(undocumented).toEqual([]);
  const toolsPart = DOC.slice(DOC.indexOf("\n## The tools\n"), DOC.indexOf("\n## Refused calls"));
  const documented = [...toolsPart.matchAll(/^### `([a-z_]+)`$/gm)].map((m) => m[1]);
  expect(documented.sort()).toEqual(tools.map((t) => t.name).sort());
});
