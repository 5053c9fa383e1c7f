// buildApp(deps) → { start, stop }: the HTTP server (GraphQL over HTTP and
// SSE via yoga, GraphiQL), graphql-ws on the same path, and health endpoints.
// Knows nothing of the environment: src/bin/server.ts reads that.
//
// Every request to /graphql is authenticated from its headers before its body
// is read, so that a caller without a valid key gets the small limits
// (src/limits.ts) before it can cost memory or CPU.
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createYoga } from "graphql-yoga";
import { PrincipalResolver, principalKey } from "./auth/principal.js";
import type { Principal } from "./auth/principal.js";
import type { Db } from "./db/client.js";
import type { EventBus } from "./events/bus.js";
import { LedgerReader } from "./events/ledger.js";
import { LedgerWatcher } from "./events/watcher.js";
import type { AppServices } from "./graphql/context.js";
import { createContext } from "./graphql/context.js";
import { responseSizeLimit } from "./graphql/cost.js";
import { documentLimits } from "./graphql/documents.js";
import { emptyRefusals, maskError } from "./graphql/errors.js";
import type { TransportContext } from "./graphql/documents.js";
import { IssueLoader } from "./graphql/issueLoader.js";
import { shapeLimits } from "./graphql/limits.js";
import { schema } from "./graphql/schema.js";
import { Admission } from "./http/admission.js";
import { answerExpectContinue, bodyLimit, bodyLimitOf, discardRest } from "./http/body.js";
import { corsOption, setSecurityHeaders } from "./http/headers.js";
import { serveWebSockets } from "./http/websocket.js";
import { DEFAULT_LIMITS, LimitExceededError } from "./limits.js";
import type { Limits } from "./limits.js";
import { createLockGroups } from "./locks/groups.js";
import type { LockDeps } from "./locks/deps.js";
import type { Logger } from "./log.js";
import { boardAssets, isBoardPath } from "./http/board.js";
import { unavailability } from "./db/sql.js";
import { Metrics } from "./metrics.js";
import { errorFields } from "./log.js";

export interface AppDeps {
  db: Db;
  bus: EventBus;
  adminToken: string;
  leaseSeconds: number;
  log: Logger;
  /** How often subscriptions check the ledger for events whose publish was lost (ms). */
  ledgerPollMs?: number;
  /** Log a warning when lock events have been held back by an open transaction this long (default 10 s). */
  ledgerHoldWarningMs?: number;
  /** Live events a subscription may hold for a slow client (default 10,000). */
  subscriptionBuffer?: number;
  /** Bounds on what clients control (default: DEFAULT_LIMITS). */
  limits?: Limits;
  /** Origins allowed to call from a browser (CORS); default none. */
  corsOrigins?: readonly string[];
}

export interface App {
  readonly services: AppServices;
  /** Handles one GraphQL request (for tests that skip the socket); no body limit applies. */
  readonly fetch: (request: Request) => Promise<Response>;
  start(port: number, host?: string): Promise<{ url: string; port: number }>;
  stop(): Promise<void>;
}

/** The API answers concurrent single-issue agent requests of a company with group commits. */
function withGroupCommit(locks: LockDeps): LockDeps {
  return { ...locks, groups: createLockGroups(locks) };
}

/** Answers a request that GraphQL never sees, with a GraphQL-shaped error. */
function refuse(res: ServerResponse, status: number, message: string, extensions: Record<string, unknown>, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
  return new Promise<void>((resolve) => res.end(JSON.stringify({ errors: [{ message, extensions }] }), () => resolve()));
}

/** What GraphiQL shows first: how to sign in. */
const GRAPHIQL_WELCOME = `# Baton's GraphiQL
#
# Sign in: open "Headers" below and paste
#   { "authorization": "Bearer <a board key, an agent key or the admin token>" }
# Queries, mutations and subscriptions (over WebSocket) then run as that key.
# The admin token is printed when npm start generates one.

{
  me { role companyId agentId }
}
`;

const wantsEventStream = (req: IncomingMessage) => (req.headers.accept ?? "").includes("text/event-stream");

export function buildApp(deps: AppDeps): App {
  const limits = deps.limits ?? DEFAULT_LIMITS;
  const watcher = new LedgerWatcher(deps.db, deps.ledgerPollMs ?? 1000, deps.log, deps.ledgerHoldWarningMs);
  const ledger = new LedgerReader(deps.db);
  const metrics = new Metrics({
    events: deps.bus,
    ledger: { heldBackMs: () => watcher.heldBackMs, oldestTransactionSeconds: () => ledger.oldestTransactionSeconds() },
  });
  const resolver = new PrincipalResolver(deps.db, deps.adminToken, limits.unknownKeysPerMinute, (found) =>
    metrics.keyLookups.inc({ result: found ? "found" : "unknown" }),
  );
  const admission = new Admission(limits);
  const services: AppServices = {
    db: deps.db,
    bus: deps.bus,
    watcher,
    ledger,
    issues: new IssueLoader(deps.db),
    subscriptionBuffer: deps.subscriptionBuffer ?? 10_000,
    admission,
    log: deps.log,
    metrics,
    locks: withGroupCommit({ db: deps.db, events: deps.bus, leaseSeconds: deps.leaseSeconds }),
  };
  const onRefused = (limit: string) => metrics.limitRefusals.inc({ limit });
  let graphiqlPage: Promise<string> | null = null;
  const serveBoard = boardAssets();
  const yoga = createYoga<TransportContext>({
    schema,
    graphqlEndpoint: "/graphql",
    graphiql: { subscriptionsProtocol: "WS", title: "Baton", defaultQuery: GRAPHIQL_WELCOME },
    // GraphiQL's page with its assets inlined from the installed package (no CDN: it works offline),
    // loaded on the first visit and kept.
    renderGraphiQL: (options) => (graphiqlPage ??= import("@graphql-yoga/render-graphiql").then((m) => m.renderGraphiQL(options))),
    landingPage: false,
    maskedErrors: { maskError: maskError(deps.log, metrics) },
    logging: false,
    cors: corsOption(deps.corsOrigins ?? []),
    // Replaced by documentLimits: yoga's cache admits any document, of any size, from anyone.
    parserAndValidationCache: false,
    maxRequestBodySize: false, // bodyLimit counts instead, with the caller's limit
    // File uploads are not part of the API: a multipart body is refused (415), not half-read.
    multipart: false,
    plugins: [bodyLimit(limits, onRefused), shapeLimits, documentLimits(limits, onRefused), responseSizeLimit(limits, onRefused), emptyRefusals()],
    context: (initial) => createContext(services, initial.principal ?? null),
  });

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

  async function handle(req: IncomingMessage, res: ServerResponse) {
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
    if (path === "/metrics") {
      res.writeHead(200, { "content-type": metrics.registry.contentType }).end(await metrics.registry.metrics());
      return;
    }
    if (path === yoga.graphqlEndpoint || path === `${yoga.graphqlEndpoint}/`) {
      const timer = metrics.requestSeconds.startTimer({ path });
      res.once("finish", () => timer({ status: String(res.statusCode) }));
      return graphql(req, res);
    }
    return yoga(req, res, { principal: null } satisfies TransportContext);
  }

  let server: Server | null = null;
  let sockets: { close(): Promise<void> } | null = null;

  return {
    services,
    fetch: async (request) => yoga.fetch(request, { principal: await resolver.resolve(request.headers.get("authorization"), "local") }),
    async start(port, host = "127.0.0.1") {
      server = createServer((req, res) => {
        handle(req, res).catch((err: unknown) => {
          // The database away (while a key was looked up, say) is the client's to retry; anything else is ours.
          const away = unavailability(err);
          if (away) deps.log("warn", "request failed: database unavailable", { kind: away });
          else deps.log("error", "request failed", errorFields(err));
          if (!res.headersSent) void refuse(res, 503, "the request could not be served; try again", { code: away ? "UNAVAILABLE" : "INTERNAL_SERVER_ERROR", ...(away ? { outcome: "NOT_APPLIED" } : {}) });
          else res.destroy();
        });
      });
      // Requests that expect 100 Continue are handled like any other: graphql() sends the 100 if the body may come.
      server.on("checkContinue", (req, res) => server!.emit("request", req, res));
      server.keepAliveTimeout = 65_000;
      // A client must send its headers within 10 s and its whole request within 30 s (responses, SSE included, are not limited).
      server.headersTimeout = 10_000;
      server.requestTimeout = 30_000;
      sockets = serveWebSockets(server, { yoga, resolver, admission, limits, log: deps.log, onRefused });
      await new Promise<void>((resolve, reject) => {
        server!.once("error", reject);
        server!.listen(port, host, () => resolve());
      });
      const bound = (server.address() as AddressInfo).port;
      return { url: `http://${host}:${bound}/graphql`, port: bound };
    },
    async stop() {
      services.watcher.stop();
      await sockets?.close();
      await new Promise<void>((resolve) => {
        if (!server) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      server = null;
    },
  };
}
