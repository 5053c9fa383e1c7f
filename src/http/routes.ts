// Every HTTP request's route: /healthz, /readyz, /metrics, /board, / and
// /favicon.ico (src/http/landing.ts), /mcp (src/mcp/http/route.ts), and
// /graphql (GraphQL over HTTP and SSE, GraphiQL) through yoga. Security headers go on every answer.
//
// A request to /graphql is authenticated from its headers before its body is
// read, so that a caller without a valid key gets the small limits
// (src/bounds/settings.ts) before it can cost memory or CPU.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { YogaServerInstance } from "graphql-yoga";
import { principalKey } from "../auth/principal.js";
import type { PrincipalResolver } from "../auth/principal.js";
import type { Principal } from "../domain/types.js";
import type { Db } from "../db/client.js";
import type { EventBus } from "../events/bus.js";
import type { TransportContext } from "../bounds/documents.js";
import { LimitExceededError } from "../bounds/settings.js";
import type { Limits } from "../bounds/settings.js";
import type { Metrics } from "../metrics.js";
import type { Admission } from "../bounds/admission.js";
import { boardAssets, isBoardPath } from "./board.js";
import { isLandingPath, serveLanding } from "./landing.js";
import { answerExpectContinue, bodyLimitOf, discardRest } from "../bounds/body.js";
import { setSecurityHeaders } from "./headers.js";
import { MCP_PATH } from "../mcp/http/route.js";

export interface RouteDeps {
  yoga: YogaServerInstance<TransportContext, object>;
  /** /mcp: MCP over Streamable HTTP (src/mcp/http/route.ts). */
  mcp: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  resolver: PrincipalResolver;
  admission: Admission;
  limits: Limits;
  metrics: Metrics;
  /** What /readyz checks. */
  db: Db;
  bus: EventBus;
  onRefused: (limit: string) => void;
}

/** Answers a request that GraphQL never sees, with a GraphQL-shaped error. */
export function refuse(res: ServerResponse, status: number, message: string, extensions: Record<string, unknown>, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
  return new Promise<void>((resolve) => res.end(JSON.stringify({ errors: [{ message, extensions }] }), () => resolve()));
}

const wantsEventStream = (req: IncomingMessage) => (req.headers.accept ?? "").includes("text/event-stream");

/** The handler of every HTTP request; a rejection is the server's to answer (src/http/server.ts). */
export function routes(deps: RouteDeps): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const { yoga, resolver, admission, limits, metrics, onRefused } = deps;
  const serveBoard = boardAssets();

  async function ready(): Promise<{ ok: boolean; checks: Record<string, string> }> {
    const checks: Record<string, string> = {};
    try {
      await deps.db.$queryRaw`SELECT 1`;
      checks.database = "up";
    } catch {
      checks.database = "down";
    }
    checks.pubsub = deps.bus.healthy() ? "up" : "down";
    return { ok: Object.values(checks).every((v) => v === "up"), checks };
  }

  /** /graphql: authenticate from the headers first, so that the body is read within the caller's limit (bodyLimit). */
  async function graphql(req: IncomingMessage, res: ServerResponse) {
    const address = req.socket.remoteAddress ?? "unknown";
    let principal: Principal | null;
    try {
      principal = await resolver.resolve(req.headers.authorization, address);
      if (wantsEventStream(req)) res.once("close", admission.openConnection(principalKey(principal, address)));
    } catch (err) {
      if (!(err instanceof LimitExceededError)) throw err;
      onRefused(err.limit);
      discardRest(req);
      const retry = err.retryAfterSeconds;
      return refuse(res, 429, err.message, err.extensions, retry === undefined ? {} : { "retry-after": String(retry) });
    }
    answerExpectContinue(req, res, limits[bodyLimitOf(principal)]);
    // Whatever of the body was left unread when the answer went (a 413) is thrown away, within bounds.
    res.once("finish", () => discardRest(req));
    return yoga(req, res, { principal } satisfies TransportContext);
  }

  return async function handle(req: IncomingMessage, res: ServerResponse) {
    setSecurityHeaders(req, res);
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ status: "ok" }));
      return;
    }
    if (path === "/readyz") {
      const { ok, checks } = await ready();
      res.writeHead(ok ? 200 : 503, { "content-type": "application/json" }).end(JSON.stringify({ status: ok ? "ready" : "unavailable", ...checks }));
      return;
    }
    if (isBoardPath(path)) return serveBoard(req, res, path);
    if (isLandingPath(path)) return serveLanding(req, res, path);
    if (path === "/metrics") {
      res.writeHead(200, { "content-type": metrics.registry.contentType }).end(await metrics.registry.metrics());
      return;
    }
    if (path === MCP_PATH) {
      const timer = metrics.requestSeconds.startTimer({ path });
      res.once("finish", () => timer({ status: String(res.statusCode) }));
      return deps.mcp(req, res);
    }
    if (path === yoga.graphqlEndpoint || path === `${yoga.graphqlEndpoint}/`) {
      const timer = metrics.requestSeconds.startTimer({ path });
      res.once("finish", () => timer({ status: String(res.statusCode) }));
      return graphql(req, res);
    }
    return yoga(req, res, { principal: null } satisfies TransportContext);
  };
}
