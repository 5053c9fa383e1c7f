// buildApp(deps) → App: the wiring. Builds the services every resolver
// shares, yoga (GraphQL over HTTP and SSE, GraphiQL, the plugins that hold
// the limits, error masking), and hands them to the HTTP routes
// (src/http/routes.ts) and server (src/http/server.ts), which also carries
// graphql-ws (src/http/websocket.ts). Knows nothing of the environment:
// src/bin/server.ts reads that.
import { createYoga } from "graphql-yoga";
import { PrincipalResolver } from "./auth/principal.js";
import { KeyRevocations, RevocationPoll } from "./auth/revocations.js";
import type { Db } from "./db/client.js";
import type { EventBus } from "./events/bus.js";
import { LedgerReader } from "./events/history.js";
import { LedgerWatcher } from "./events/watcher.js";
import type { AppServices } from "./graphql/context.js";
import { createContext } from "./graphql/context.js";
import { responseSizeLimit } from "./bounds/cost.js";
import { documentLimits } from "./bounds/documents.js";
import { emptyRefusals, maskError } from "./graphql/errors.js";
import type { TransportContext } from "./bounds/documents.js";
import { DependencyLoader, IssueLoader } from "./graphql/issueLoader.js";
import { shapeLimits } from "./bounds/queryShape.js";
import { schema } from "./graphql/schema.js";
import { Admission } from "./bounds/admission.js";
import { bodyLimit } from "./bounds/body.js";
import { withConnectionLostMessage } from "./http/graphiqlPage.js";
import { corsOption } from "./http/headers.js";
import { routes } from "./http/routes.js";
import { httpServer } from "./http/server.js";
import { DEFAULT_LIMITS } from "./bounds/settings.js";
import type { Limits } from "./bounds/settings.js";
import { FleetSnapshots } from "./reads/fleetSnapshot.js";
import { startWaking } from "./locks/recovery/wakeDueIssues.js";
import { createLockGroups } from "./locks/groupCommit/groups.js";
import type { LockDeps } from "./locks/shared/deps.js";
import type { Logger } from "./log.js";
import { Metrics } from "./metrics.js";
import { operationSpans } from "./tracing/operations.js";
import { tracing } from "./tracing/spans.js";
import { keepLedgerPartitions } from "./retention/partitions.js";
import { mcpRoute } from "./mcp/http/route.js";
import { keepSessions, sessionKeepingMs } from "./mcp/http/sessions.js";

export type { AppServices };

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
  /** How often delayed issues whose notBefore passed are made claimable (ms; default 250; 0: never, for tests that wake them by hand). */
  wakeIntervalMs?: number;
  /** How long an MCP session over HTTP lives without a request (s; default 1800). */
  mcpSessionIdleSeconds?: number;
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

export function buildApp(deps: AppDeps): App {
  const limits = deps.limits ?? DEFAULT_LIMITS;
  const watcher = new LedgerWatcher(deps.db, deps.ledgerPollMs ?? 1000, deps.log, deps.ledgerHoldWarningMs);
  const ledger = new LedgerReader(deps.db);
  const fleet = new FleetSnapshots(deps.db);
  const metrics = new Metrics({
    events: deps.bus,
    ledger: { heldBackMs: () => watcher.heldBackMs, oldestTransactionSeconds: () => ledger.oldestTransactionSeconds() },
    fleet: () => fleet.read(),
  });
  const revocations = new KeyRevocations(deps.db, deps.log, deps.bus, (heard, keys) => metrics.keyRevocations.inc({ heard }, keys));
  const revocationPoll = new RevocationPoll(deps.db, revocations, deps.ledgerPollMs ?? 1000, deps.log);
  const resolver = new PrincipalResolver(deps.db, deps.adminToken, limits.unknownKeysPerMinute, revocations, (found) =>
    metrics.keyLookups.inc({ result: found ? "found" : "unknown" }),
  );
  const admission = new Admission(limits);
  const services: AppServices = {
    db: deps.db,
    bus: deps.bus,
    watcher,
    ledger,
    issues: new IssueLoader(deps.db),
    dependencies: new DependencyLoader(deps.db),
    subscriptionBuffer: deps.subscriptionBuffer ?? 10_000,
    admission,
    revocations,
    log: deps.log,
    metrics,
    locks: withGroupCommit({ db: deps.db, events: deps.bus, leaseSeconds: deps.leaseSeconds }),
  };
  const onRefused = (limit: string) => metrics.limitRefusals.inc({ limit });
  let graphiqlPage: Promise<string> | null = null;
  const yoga = createYoga<TransportContext>({
    schema,
    graphqlEndpoint: "/graphql",
    graphiql: { subscriptionsProtocol: "WS", title: "Baton", defaultQuery: GRAPHIQL_WELCOME, favicon: "/favicon.ico" },
    // GraphiQL's page with its assets inlined from the installed package (no CDN: it works offline),
    // loaded on the first visit and kept; a dropped subscription says so in words (src/http/graphiqlPage.ts).
    renderGraphiQL: (options) => (graphiqlPage ??= import("@graphql-yoga/render-graphiql").then((m) => withConnectionLostMessage(m.renderGraphiQL(options)))),
    landingPage: false,
    // What a client sees of an error, over HTTP, SSE and WebSocket alike: src/graphql/errors.ts.
    maskedErrors: { maskError: maskError(deps.log, metrics) },
    logging: false,
    cors: corsOption(deps.corsOrigins ?? []),
    // Replaced by documentLimits: yoga's cache admits any document, of any size, from anyone.
    parserAndValidationCache: false,
    maxRequestBodySize: false, // bodyLimit counts instead, with the caller's limit
    // File uploads are not part of the API: a multipart body is refused (415), not half-read.
    multipart: false,
    // A span per operation, first so that it covers the others' hooks: only when tracing is on (src/tracing/).
    plugins: [
      ...(tracing() ? [operationSpans()] : []),
      bodyLimit(limits, onRefused),
      shapeLimits,
      documentLimits(limits, onRefused),
      responseSizeLimit(limits, onRefused),
      emptyRefusals(),
    ],
    context: (initial) => createContext(services, initial.principal ?? null),
  });

  // MCP over HTTP (src/mcp/http/route.ts): each tool runs GraphQL through this yoga, as the request's key.
  const mcp = mcpRoute({
    resolver,
    limits,
    locks: services.locks,
    graphql: async (request, principal) => yoga.fetch(request, { principal }),
    log: deps.log,
    onRefused,
  });
  const server = httpServer({
    handle: routes({ yoga, mcp, resolver, admission, limits, metrics, db: deps.db, bus: deps.bus, onRefused }),
    websockets: { yoga, resolver, revocations, admission, limits, log: deps.log, onRefused },
    log: deps.log,
  });

  let stopKeeper: (() => void) | null = null;
  let stopListening: (() => void) | null = null;
  let waker: { stop(): Promise<void> } | null = null;
  let sessionKeeper: { stop(): Promise<void> } | null = null;
  const wakeIntervalMs = deps.wakeIntervalMs ?? 250;
  const idleSeconds = deps.mcpSessionIdleSeconds ?? 1800;
  return {
    services,
    fetch: async (request) => yoga.fetch(request, { principal: await resolver.resolve(request.headers.get("authorization"), "local") }),
    start: async (port, host = "127.0.0.1") => {
      stopKeeper ??= keepLedgerPartitions(deps.db, deps.log);
      // Delayed issues become claimable within wakeIntervalMs of their notBefore (src/locks/recovery/wakeDueIssues.ts).
      if (wakeIntervalMs > 0) waker ??= startWaking(deps.db, wakeIntervalMs, (companyId, ids) => deps.bus.announceIssues(companyId, ids));
      // MCP sessions' runs kept alive while recent, ended once idle (src/mcp/http/sessions.ts).
      sessionKeeper ??= keepSessions(services.locks, idleSeconds, sessionKeepingMs(deps.leaseSeconds, idleSeconds), deps.log);
      // Revocations made anywhere reach this instance (src/auth/revocations.ts); the poll's horizon is read before serving.
      stopListening ??= revocations.listen();
      await revocationPoll.start();
      return server.start(port, host);
    },
    async stop() {
      stopKeeper?.();
      stopListening?.();
      revocationPoll.stop();
      services.watcher.stop();
      await waker?.stop();
      await sessionKeeper?.stop();
      await server.stop();
    },
  };
}
