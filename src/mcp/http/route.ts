// /mcp on every API instance: MCP over Streamable HTTP, for an agent key in
// `Authorization: Bearer`. Any instance answers any request: the session lives
// in PostgreSQL (sessions.ts), and each request gets its own MCP server and
// stateless transport, answered as one JSON message (no server-sent stream).
// In order, before any work: the key (401 without one, 403 for a key that is
// not an agent's; nothing of the body is read), the key's request rate (429),
// the body within mcpMaxBodyBytes counted as it arrives (413), the JSON
// (400), then the session: `initialize` opens one (mcpSessionsPerKey,
// mcpSessionsPerInstance), any other message names its Mcp-Session-Id (404
// once it has ended: the client starts a new one). DELETE ends the session:
// its run is finished and what it held goes back to the queue.
import type { IncomingMessage, ServerResponse } from "node:http";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { PrincipalResolver } from "../../auth/principal.js";
import { discardRest } from "../../bounds/body.js";
import { LimitExceededError } from "../../bounds/settings.js";
import type { Limits } from "../../bounds/settings.js";
import { Bucket } from "../../bounds/unknownKeys.js";
import type { Principal } from "../../domain/types.js";
import type { LockDeps } from "../../locks/shared/deps.js";
import type { Logger } from "../../log.js";
import { errorFields } from "../../log.js";
import { callInProcess } from "../calls.js";
import { McpFinishRunDocument, McpStartRunDocument } from "../generated/graphql.js";
import { mcpServer } from "../server.js";
import { endSession, openSession, touchSession } from "./sessions.js";

export interface McpRouteDeps {
  resolver: PrincipalResolver;
  limits: Limits;
  locks: LockDeps;
  /** The instance's GraphQL, run as `principal`. */
  graphql: (request: Request, principal: Principal) => Promise<Response>;
  log: Logger;
  onRefused: (limit: string) => void;
}

export const MCP_PATH = "/mcp";

/** Request-rate buckets remembered per key; the least recently used is forgotten first. */
const MAX_TRACKED_KEYS = 10_000;

/** A JSON-RPC error answered over HTTP, as the MCP spec shapes one (`id` null: it answers no one request). */
function rpcError(res: ServerResponse, status: number, code: number, message: string, data?: Record<string, unknown>, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message, ...(data ? { data } : {}) }, id: null }));
}

/** Reads the body, at most `max` bytes counted as they arrive; null past that. */
async function readBody(req: IncomingMessage, max: number): Promise<Buffer | null> {
  if (Number(req.headers["content-length"] ?? 0) > max) return null;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** What the Streamable HTTP transport requires of a POST (the SDK answers 406 or 415 otherwise): checked before a session is opened for it. */
function acceptable(req: IncomingMessage): boolean {
  const accept = req.headers.accept ?? "";
  return accept.includes("application/json") && accept.includes("text/event-stream") && (req.headers["content-type"] ?? "").includes("application/json");
}

export function mcpRoute(deps: McpRouteDeps): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const { limits } = deps;
  const rates = new Map<string, Bucket>();

  /** Takes one request from the key's bucket, or throws mcpRequestsPerMinute with when to retry. */
  function admit(keyId: string): void {
    const now = performance.now();
    let bucket = rates.get(keyId);
    if (bucket) rates.delete(keyId);
    else {
      bucket = new Bucket(limits.mcpRequestsPerMinute, now);
      if (rates.size >= MAX_TRACKED_KEYS) rates.delete(rates.keys().next().value!);
    }
    rates.set(keyId, bucket);
    if (bucket.level(now) < 1) {
      throw new LimitExceededError(
        "mcpRequestsPerMinute",
        limits.mcpRequestsPerMinute,
        "too many MCP requests for this key; retry later",
        bucket.secondsToNext(now),
      );
    }
    bucket.take(now);
  }

  function refuseLimit(res: ServerResponse, err: LimitExceededError, status = 429) {
    deps.onRefused(err.limit);
    const retry = err.retryAfterSeconds;
    rpcError(res, status, -32000, err.message, err.extensions, retry === undefined ? {} : { "retry-after": String(retry) });
  }

  return async function mcp(req, res) {
    const method = req.method ?? "GET";
    if (method !== "POST" && method !== "DELETE") {
      discardRest(req);
      return rpcError(
        res,
        405,
        -32000,
        "Method not allowed: send MCP messages with POST and end a session with DELETE (this server opens no event stream)",
        undefined,
        {
          allow: "POST, DELETE",
        },
      );
    }
    let principal: Principal | null;
    try {
      principal = await deps.resolver.resolve(req.headers.authorization, req.socket.remoteAddress ?? "unknown");
      if (principal?.role === "AGENT") admit(principal.keyId);
    } catch (err) {
      discardRest(req);
      if (err instanceof LimitExceededError) return refuseLimit(res, err);
      throw err;
    }
    if (!principal) {
      discardRest(req);
      return rpcError(
        res,
        401,
        -32001,
        "UNAUTHENTICATED: send an agent key as `Authorization: Bearer <key>` (a revoked key no longer works)",
        { code: "UNAUTHENTICATED" },
        {
          "www-authenticate": "Bearer",
        },
      );
    }
    if (principal.role !== "AGENT") {
      discardRest(req);
      return rpcError(res, 403, -32001, `FORBIDDEN: /mcp is for agents, and this is ${principal.role === "BOARD" ? "a board key" : "the admin token"}`, {
        code: "FORBIDDEN",
      });
    }
    const agent = principal;
    const key = { companyId: agent.companyId, agentId: agent.agentId, keyId: agent.keyId };
    const sessionId = req.headers["mcp-session-id"];

    if (method === "DELETE") {
      discardRest(req);
      if (typeof sessionId !== "string") return rpcError(res, 400, -32000, "Bad Request: DELETE needs the Mcp-Session-Id header");
      const ended = await endSession(deps.locks, sessionId, agent.keyId);
      if (!ended) return rpcError(res, 404, -32001, "Session not found: it has ended");
      res.writeHead(200).end();
      return;
    }

    const raw = await readBody(req, limits.mcpMaxBodyBytes);
    if (raw === null) {
      discardRest(req);
      return refuseLimit(
        res,
        new LimitExceededError("mcpMaxBodyBytes", limits.mcpMaxBodyBytes, `request body is larger than ${limits.mcpMaxBodyBytes} bytes`),
        413,
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch {
      return rpcError(res, 400, -32700, "Parse error: the body is not JSON");
    }
    // One message per request (batches left the protocol in 2025-06-18): each is admitted, and costs, on its own.
    if (Array.isArray(body)) return rpcError(res, 400, -32600, "Invalid Request: send one JSON-RPC message per request (batches are not accepted)");
    if (!acceptable(req)) {
      return rpcError(res, 406, -32000, "Not Acceptable: send Content-Type: application/json and Accept: application/json, text/event-stream");
    }

    const call = callInProcess((request) => deps.graphql(request, agent));
    let id: string;
    const initializing = isInitializeRequest(body);
    if (initializing) {
      try {
        const opened = await openSession(deps.locks.db, key, limits);
        if (!opened) return rpcError(res, 401, -32001, "UNAUTHENTICATED: this key was revoked", { code: "UNAUTHENTICATED" });
        id = opened;
      } catch (err) {
        if (err instanceof LimitExceededError) return refuseLimit(res, err);
        throw err;
      }
    } else if (typeof sessionId === "string" && sessionId !== "") {
      id = sessionId;
    } else {
      return rpcError(res, 400, -32000, "Bad Request: no Mcp-Session-Id header: send initialize first, then its session id with every message");
    }
    const found = await touchSession(deps.locks.db, id, agent.keyId);
    if (!found) return rpcError(res, 404, -32001, "Session not found: it has ended (DELETE, idle past the limit, or its key revoked): initialize a new one");
    const session = found.withRuns(
      async () => (await call(McpStartRunDocument, {})).startRun.id,
      async (runId) => void (await call(McpFinishRunDocument, { runId })),
    );

    const server = mcpServer({ call, session, companyId: agent.companyId }, (err) => deps.log("error", "MCP tool failed", errorFields(err)));
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    try {
      await server.connect(transport);
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) if (typeof value === "string") headers.set(name, value);
      const answer = await transport.handleRequest(new Request(`http://mcp${MCP_PATH}`, { method: "POST", headers, body: raw.toString("utf8") }), {
        parsedBody: body,
      });
      const ok = answer.status >= 200 && answer.status < 300;
      // A session is named only by an answer that served it; an initialize the transport refused opened none.
      const out: Record<string, string> = ok ? { "mcp-session-id": id } : {};
      answer.headers.forEach((value, name) => {
        out[name] = value;
      });
      const text = await answer.text();
      if (!ok && initializing) await endSession(deps.locks, id, agent.keyId).catch(() => {});
      res.writeHead(answer.status, out).end(text);
    } finally {
      await server.close().catch(() => {});
    }
  };
}
