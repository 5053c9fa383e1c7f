// MCP clients for the tests, with the official SDK's Client: over stdio (the
// built `baton mcp`, as an LLM client starts it) and over Streamable HTTP
// (/mcp, the agent key as Bearer), optionally spread over several API
// instances request by request (no session affinity). Each connects, then
// lists the tools, so that the SDK client validates every tool answer's
// structuredContent against the tool's outputSchema from then on.
import path from "node:path";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

export const TOOL_NAMES = ["claim_next_issue", "checkout_issue", "get_issue", "list_issues", "release_issue", "create_sub_issues", "add_dependency"];

/** /mcp beside an instance's /graphql URL. */
export const mcpUrl = (graphqlUrl: string) => graphqlUrl.replace(/\/graphql$/, "/mcp");

/** The fields every tool's answer may carry when the call did not do what it asked. */
export interface Problem {
  problem?: string;
  message?: string;
  holder?: { runId: string | null; agentId: string | null; live: boolean } | null;
}

export interface ToolIssue {
  id: string;
  title: string;
  description: string | null;
  priority: string;
  status: string;
  lockEpoch: number;
  parentId: string | null;
  concurrencyKey: string | null;
}

export interface McpSession {
  client: McpClient;
  /** tools/call as it came back (isError included); the SDK client has validated its structuredContent. */
  call(name: string, args?: Record<string, unknown>): Promise<CallToolResult>;
  /** A tool's structuredContent; fails on isError, or when the text does not carry the same JSON. */
  tool<T = Record<string, unknown>>(name: string, args?: Record<string, unknown>): Promise<T & Problem>;
  close(): Promise<void>;
}

const open = new Set<McpSession>();

/** Closes every session the file opened and has not closed (afterAll / afterEach). */
export async function closeAllSessions(): Promise<void> {
  const all = [...open];
  open.clear();
  await Promise.all(all.map((s) => s.close().catch(() => {})));
}

/** The structuredContent of a tool answer that is not an error, checked against its text (a sentence, then the same JSON). */
export function structured<T>(result: CallToolResult): T & Problem {
  if (result.isError) throw new Error(`the tool answered isError: ${JSON.stringify(result.content)}`);
  const content = result.structuredContent as (T & Problem) | undefined;
  if (!content) throw new Error(`no structuredContent: ${JSON.stringify(result)}`);
  const text = result.content[0];
  if (text?.type !== "text") throw new Error(`no text content: ${JSON.stringify(result.content)}`);
  const json = text.text.slice(text.text.indexOf("\n") + 1);
  if (JSON.stringify(JSON.parse(json)) !== JSON.stringify(content)) throw new Error(`the text's JSON is not the structuredContent: ${text.text}`);
  return content;
}

/** The text of an answer (all its text parts). */
export const textOf = (result: CallToolResult) =>
  result.content
    .filter((c) => c.type === "text")
    .map((c) => (c as { text: string }).text)
    .join("\n");

async function connected<S extends McpSession>(client: McpClient, transport: Transport, extra: Omit<S, keyof McpSession>): Promise<S> {
  await client.connect(transport);
  // The listing caches each tool's outputSchema: every callTool answer is validated against it.
  await client.listTools();
  const session = {
    client,
    call: (name: string, args: Record<string, unknown> = {}) => client.callTool({ name, arguments: args }) as Promise<CallToolResult>,
    async tool<T>(name: string, args: Record<string, unknown> = {}) {
      return structured<T>((await client.callTool({ name, arguments: args })) as CallToolResult);
    },
    async close() {
      open.delete(session as unknown as S);
      await client.close();
    },
    ...extra,
  } as unknown as S;
  open.add(session);
  return session;
}

export interface HttpSession extends McpSession {
  transport: StreamableHTTPClientTransport;
  /** Requests sent to each of the URLs, by index (POST, GET and DELETE alike). */
  hits: number[];
  /** The statuses /mcp answered, in order. */
  statuses: number[];
  /** HTTP DELETE of the session (its run is finished). */
  terminate(): Promise<void>;
}

/**
 * An MCP session over Streamable HTTP as the agent whose key is `key`. With
 * several URLs, each request goes to the next instance in turn: no affinity.
 */
export async function connectHttp(graphqlUrls: string | string[], key: string, name = "test"): Promise<HttpSession> {
  const urls = (Array.isArray(graphqlUrls) ? graphqlUrls : [graphqlUrls]).map((u) => new URL(mcpUrl(u)));
  const hits = urls.map(() => 0);
  const statuses: number[] = [];
  let next = 0;
  const roundRobin = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const i = next++ % urls.length;
    hits[i]!++;
    const target = new URL(input instanceof Request ? input.url : input);
    target.host = urls[i]!.host;
    const response = await fetch(target, init);
    statuses.push(response.status);
    return response;
  };
  const transport = new StreamableHTTPClientTransport(urls[0]!, { requestInit: { headers: { authorization: `Bearer ${key}` } }, fetch: roundRobin });
  const client = new McpClient({ name, version: "1.0.0" });
  const session = await connected<HttpSession>(client, transport, {
    transport,
    hits,
    statuses,
    terminate: () => transport.terminateSession(),
  });
  // Closed by the test file: ended on the server too (DELETE), so that nothing it held outlives the test.
  const close = session.close;
  session.close = async () => {
    if (transport.sessionId) await transport.terminateSession().catch(() => {});
    await close();
  };
  return session;
}

export interface StdioSession extends McpSession {
  transport: StdioClientTransport;
  pid: number;
  /** What `baton mcp` wrote on stderr so far. */
  stderr(): string;
  /** Resolves once the process has exited (the client saw its transport close). */
  exited: Promise<void>;
}

/** `baton mcp` (the built CLI) as the agent whose key is `key`, against the API at `graphqlUrl`. */
export async function connectStdio(graphqlUrl: string, key: string, name = "test"): Promise<StdioSession> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["dist/cli/main.js", "mcp"],
    cwd: ROOT,
    env: { BATON_URL: graphqlUrl, BATON_TOKEN: key },
    stderr: "pipe",
  });
  let err = "";
  transport.stderr?.on("data", (c: Buffer) => (err += c.toString()));
  const client = new McpClient({ name, version: "1.0.0" });
  let exit!: () => void;
  const exited = new Promise<void>((resolve) => (exit = resolve));
  client.onclose = exit;
  const session = await connected<StdioSession>(client, transport, { transport, pid: 0, stderr: () => err, exited });
  session.pid = transport.pid!;
  return session;
}
