// buildApp(deps) → { start, stop }: the HTTP server (GraphQL over HTTP and
// SSE via yoga, GraphiQL), graphql-ws on the same path, and health endpoints.
// Knows nothing of the environment: src/bin/server.ts reads that.
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { GraphQLError } from "graphql";
import { createYoga } from "graphql-yoga";
import type { Plugin } from "graphql-yoga";
import { useServer } from "graphql-ws/use/ws";
import { WebSocketServer } from "ws";
import { PrincipalResolver } from "./auth/principal.js";
import type { Principal } from "./auth/principal.js";
import type { Db } from "./db/client.js";
import type { EventBus } from "./events/bus.js";
import { SubscriptionOverflowError } from "./events/stream.js";
import { LedgerReader } from "./events/ledger.js";
import { LedgerWatcher } from "./events/watcher.js";
import type { AppServices } from "./graphql/context.js";
import { createContext } from "./graphql/context.js";
import { IssueLoader } from "./graphql/issueLoader.js";
import { queryShapeRule } from "./graphql/limits.js";
import { schema } from "./graphql/schema.js";
import { ForbiddenError, InvalidInputError } from "./locks/types.js";
import { createLockGroups } from "./locks/groups.js";
import type { LockDeps } from "./locks/deps.js";
import type { Logger } from "./log.js";
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
  /** Live events a subscription may hold for a slow client (default 10,000). */
  subscriptionBuffer?: number;
}

export interface App {
  readonly services: AppServices;
  /** Handles one HTTP request (for tests that skip the socket). */
  readonly fetch: (request: Request) => Promise<Response> | Response;
  start(port: number, host?: string): Promise<{ url: string; port: number }>;
  stop(): Promise<void>;
}

const MAX_BODY_BYTES = 10 * 1024 * 1024;

/** Turns our error classes into client errors; masks and logs everything else. */
function maskError(log: Logger) {
  return (error: unknown, message: string): Error => {
    const located = error instanceof GraphQLError ? error : null;
    const original = located?.originalError ?? error;
    const clientError = (msg: string, code: string) =>
      new GraphQLError(msg, { nodes: located?.nodes, path: located?.path, extensions: { code } });
    if (original instanceof InvalidInputError) return clientError(original.message, "BAD_USER_INPUT");
    if (original instanceof ForbiddenError) return clientError(original.message, "FORBIDDEN");
    if (original instanceof SubscriptionOverflowError) return clientError(original.message, "SUBSCRIPTION_OVERFLOW");
    if (original instanceof GraphQLError) return located ?? original;
    log("error", "unexpected error", { ...errorFields(original), path: located?.path?.join(".") });
    return clientError(message, "INTERNAL_SERVER_ERROR");
  };
}

/** The API answers concurrent single-issue agent requests of a company with group commits. */
function withGroupCommit(locks: LockDeps): LockDeps {
  return { ...locks, groups: createLockGroups(locks) };
}

export function buildApp(deps: AppDeps): App {
  const resolver = new PrincipalResolver(deps.db, deps.adminToken);
  const services: AppServices = {
    db: deps.db,
    bus: deps.bus,
    watcher: new LedgerWatcher(deps.db, deps.ledgerPollMs ?? 1000, deps.log),
    ledger: new LedgerReader(deps.db),
    issues: new IssueLoader(deps.db),
    subscriptionBuffer: deps.subscriptionBuffer ?? 10_000,
    log: deps.log,
    metrics: new Metrics({ events: deps.bus }),
    locks: withGroupCommit({ db: deps.db, events: deps.bus, leaseSeconds: deps.leaseSeconds }),
  };
  const shapeLimits: Plugin = {
    onValidate({ addValidationRule }) {
      addValidationRule(queryShapeRule);
    },
  };
  const yoga = createYoga<{ wsPrincipal?: Principal | null }>({
    schema,
    graphqlEndpoint: "/graphql",
    graphiql: { subscriptionsProtocol: "WS", title: "Baton" },
    landingPage: false,
    maskedErrors: { maskError: maskError(deps.log) },
    logging: false,
    plugins: [shapeLimits],
    context: async (initial) => {
      const principal =
        initial.wsPrincipal !== undefined ? initial.wsPrincipal : await resolver.resolve(initial.request.headers.get("authorization"));
      return createContext(services, principal);
    },
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

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ status: "ok" }));
      return;
    }
    if (path === "/readyz") {
      const { ok, checks } = await ready();
      res.writeHead(ok ? 200 : 503, { "content-type": "application/json" }).end(JSON.stringify({ status: ok ? "ready" : "unavailable", ...checks }));
      return;
    }
    if (path === "/metrics") {
      res.writeHead(200, { "content-type": services.metrics.registry.contentType }).end(await services.metrics.registry.metrics());
      return;
    }
    if (path === "/graphql") {
      const timer = services.metrics.requestSeconds.startTimer({ path });
      res.once("finish", () => timer({ status: String(res.statusCode) }));
    }
    if (Number(req.headers["content-length"] ?? 0) > MAX_BODY_BYTES) {
      res.writeHead(413, { "content-type": "application/json" }).end(JSON.stringify({ errors: [{ message: "request body too large" }] }));
      return;
    }
    return yoga(req, res);
  }

  let server: Server | null = null;
  let wss: WebSocketServer | null = null;
  let disposeWs: { dispose(): void | Promise<void> } | null = null;

  return {
    services,
    fetch: (request) => yoga.fetch(request),
    async start(port, host = "127.0.0.1") {
      server = createServer((req, res) => {
        handle(req, res).catch((err: unknown) => {
          deps.log("error", "request failed", errorFields(err));
          if (!res.headersSent) res.writeHead(500).end();
        });
      });
      server.keepAliveTimeout = 65_000;
      wss = new WebSocketServer({ server, path: yoga.graphqlEndpoint, maxPayload: 1024 * 1024 });
      disposeWs = useServer<{ authorization?: unknown }, { principal?: Principal | null }>(
        {
          // Authenticate once per connection, at its first operation. A missing
          // or unknown token fails each operation with UNAUTHENTICATED, as over
          // HTTP; the socket stays open.
          onSubscribe: async (ctx, _id, params) => {
            if (ctx.extra.principal === undefined) {
              try {
                ctx.extra.principal = await resolver.resolve(ctx.connectionParams?.authorization ?? ctx.extra.request.headers.authorization);
              } catch (err) {
                deps.log("error", "could not authenticate a WebSocket operation", errorFields(err));
                return [new GraphQLError("could not authenticate; try again", { extensions: { code: "INTERNAL_SERVER_ERROR" } })];
              }
            }
            const enveloped = yoga.getEnveloped({
              wsPrincipal: ctx.extra.principal,
              request: undefined as never,
              params,
            });
            let document;
            try {
              document = enveloped.parse(params.query);
            } catch (err) {
              // A malformed operation ends that subscription, not the socket.
              return [err instanceof GraphQLError ? err : new GraphQLError("could not parse the operation", { extensions: { code: "BAD_USER_INPUT" } })];
            }
            const args = {
              schema: enveloped.schema,
              operationName: params.operationName,
              document,
              variableValues: params.variables,
              contextValue: await enveloped.contextFactory(),
              rootValue: { execute: enveloped.execute, subscribe: enveloped.subscribe },
            };
            const errors = enveloped.validate(args.schema, args.document);
            if (errors.length) return errors;
            return args;
          },
          execute: (args) => (args.rootValue as { execute: typeof import("graphql").execute }).execute(args),
          subscribe: (args) => (args.rootValue as { subscribe: typeof import("graphql").subscribe }).subscribe(args),
        },
        wss,
        12_000,
      );
      await new Promise<void>((resolve, reject) => {
        server!.once("error", reject);
        server!.listen(port, host, () => resolve());
      });
      const bound = (server.address() as AddressInfo).port;
      return { url: `http://${host}:${bound}/graphql`, port: bound };
    },
    async stop() {
      services.watcher.stop();
      // Close every socket politely (1001), but a client that never answers
      // the close handshake must not hold the shutdown for ws's 30 s timeout.
      await Promise.race([disposeWs?.dispose(), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
      for (const client of wss?.clients ?? []) client.terminate();
      wss?.close();
      await new Promise<void>((resolve) => {
        if (!server) return resolve();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      server = null;
    },
  };
}
