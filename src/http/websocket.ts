// graphql-ws on the API's HTTP server. A socket authenticates at
// connection_init (connectionParams.authorization, or the upgrade request's
// Authorization header), and takes a place among its key's connections (or its
// address's, without a valid key) for as long as it is open. An operation may
// carry its own Authorization in extensions.headers (GraphiQL does); it then
// runs as that key. A missing or unknown token fails each operation with
// UNAUTHENTICATED, as over HTTP; the socket stays open, within
// anonymousConnectionsPerAddress.
import type { Server } from "node:http";
import { GraphQLError, getOperationAST } from "graphql";
import type { DocumentNode, ExecutionArgs } from "graphql";
import type { YogaServerInstance } from "graphql-yoga";
import { useServer } from "graphql-ws/use/ws";
import { WebSocketServer } from "ws";
import type { WebSocket } from "ws";
import type { PrincipalResolver } from "../auth/principal.js";
import type { Principal } from "../domain/types.js";
import { principalKey } from "../auth/principal.js";
import type { KeyRevocations } from "../auth/revocations.js";
import type { TransportContext } from "../bounds/documents.js";
import { limitError } from "../bounds/documents.js";
import { codeOf } from "../graphql/errors.js";
import { LimitExceededError } from "../bounds/settings.js";
import type { Limits } from "../bounds/settings.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";
import type { Admission } from "../bounds/admission.js";

/** The largest WebSocket message read before it is refused (close 1009). */
const MAX_MESSAGE_BYTES = 1024 * 1024;
/** WebSocket close code for a policy violation (RFC 6455). */
const POLICY_VIOLATION = 1008;

type SocketState = {
  principal?: Principal | null;
  address?: string;
  release?: () => void;
  unwatch?: () => void;
};

/** Closes a socket whose key was revoked: 4403, after its subscriptions have sent their UNAUTHENTICATED (they end first). */
const REVOKED_CLOSE_DELAY_MS = 250;

/**
 * The Authorization an operation carries itself: GraphiQL sends the headers
 * of its Headers tab in each operation's `extensions.headers`, over
 * WebSocket as over HTTP.
 */
function operationAuthorization(extensions: unknown): unknown {
  const headers = (extensions as { headers?: unknown } | null | undefined)?.headers;
  if (!headers || typeof headers !== "object") return undefined;
  for (const [name, value] of Object.entries(headers)) if (name.toLowerCase() === "authorization") return value;
  return undefined;
}

export interface WebSocketDeps {
  yoga: YogaServerInstance<TransportContext, object>;
  resolver: PrincipalResolver;
  revocations: KeyRevocations;
  admission: Admission;
  limits: Limits;
  log: Logger;
  onRefused: (limit: string) => void;
}

/** The same error with a code. */
function coded(err: GraphQLError, code: string): GraphQLError {
  return new GraphQLError(err.message, {
    nodes: err.nodes,
    source: err.source,
    positions: err.positions,
    path: err.path,
    extensions: { ...err.extensions, code },
  });
}

/** Message types a client may send (graphql-transport-ws). */
const CLIENT_MESSAGES = new Set(["connection_init", "ping", "pong", "subscribe", "complete"]);

/**
 * Closes the socket with 4400 on a message a client may not send (`next`,
 * `error`, an unknown type), before graphql-ws sees it: it would close with
 * 4500 and print a stack, as if it were our fault.
 */
function guardMessages(socket: WebSocket): void {
  const on = socket.on.bind(socket) as (event: string, listener: (...args: unknown[]) => void) => WebSocket;
  (socket as unknown as { on: typeof on }).on = (event, listener) => {
    if (event !== "message") return on(event, listener);
    return on("message", (data: unknown, ...rest: unknown[]) => {
      let type: unknown;
      try {
        type = (JSON.parse(String(data)) as { type?: unknown } | null)?.type;
      } catch {
        type = "connection_init"; // not JSON: graphql-ws answers that itself, with 4400
      }
      // A fixed reason: a close reason over 123 bytes makes ws throw (the client's text could be that long).
      if (typeof type !== "string" || !CLIENT_MESSAGES.has(type)) {
        try {
          socket.close(4400, "a client may not send this message type");
        } catch {
          socket.terminate();
        }
        return;
      }
      listener(data, ...rest);
    });
  };
}

export function serveWebSockets(server: Server, deps: WebSocketDeps): { close(): Promise<void> } {
  const wss = new WebSocketServer({ server, path: deps.yoga.graphqlEndpoint, maxPayload: MAX_MESSAGE_BYTES });
  // Before graphql-ws's own listener, which it adds on the same event.
  wss.on("connection", (socket) => guardMessages(socket));
  // One error for every refusal: a socket may send thousands at once, and each new Error captures a stack.
  const tooManyOnSocket = [
    limitError(new LimitExceededError("subscriptionsPerSocket", deps.limits.subscriptionsPerSocket, "too many operations open on this socket")),
  ];
  const disposable = useServer<{ authorization?: unknown }, SocketState>(
    {
      onConnect: async (ctx) => {
        const { socket, request } = ctx.extra;
        const address = request.socket.remoteAddress ?? "unknown";
        try {
          const principal = await deps.resolver.resolve(ctx.connectionParams?.authorization ?? request.headers.authorization, address);
          ctx.extra.release = deps.admission.openConnection(principalKey(principal, address));
          ctx.extra.principal = principal;
          ctx.extra.address = address;
          if (principal?.keyId) {
            ctx.extra.unwatch = deps.revocations.watch(principal.keyId, () => {
              setTimeout(() => socket.close(4403, "the key was revoked"), REVOKED_CLOSE_DELAY_MS).unref();
            });
          }
          return true;
        } catch (err) {
          if (err instanceof LimitExceededError) {
            deps.onRefused(err.limit);
            socket.close(POLICY_VIOLATION, `LIMIT_EXCEEDED ${err.limit} = ${err.max}`);
          } else {
            deps.log("error", "could not authenticate a WebSocket", errorFields(err));
            socket.close(1011, "could not authenticate; try again");
          }
          return false;
        }
      },
      onClose: (ctx) => {
        ctx.extra.release?.();
        ctx.extra.unwatch?.();
      },
      onSubscribe: async (ctx, _id, params) => {
        // ctx.subscriptions already holds this operation.
        if (Object.keys(ctx.subscriptions).length > deps.limits.subscriptionsPerSocket) {
          deps.onRefused("subscriptionsPerSocket");
          return tooManyOnSocket;
        }
        let principal = ctx.extra.principal ?? null;
        const own = operationAuthorization(params.extensions);
        if (own !== undefined) {
          try {
            principal = await deps.resolver.resolve(own, ctx.extra.address ?? "unknown");
          } catch (err) {
            if (!(err instanceof LimitExceededError)) throw err;
            deps.onRefused(err.limit);
            return [limitError(err)];
          }
        }
        // No `request`: yoga's plugins take context.request for the Fetch Request of an HTTP
        // request, and skip their HTTP-only checks when it is absent ("the request might be
        // missing when using graphql-ws", use-prevent-mutation-via-get.js). The upgrade request
        // would pass for one, and it is a GET: every mutation over WebSocket would be refused
        // ("Can only perform a mutation operation from a POST request"). `as never`: the type
        // (YogaInitialContext) requires the field.
        const enveloped = deps.yoga.getEnveloped({ principal, request: undefined as never, params });
        let document: DocumentNode;
        try {
          document = enveloped.parse(params.query);
        } catch (err) {
          // A malformed or oversized operation ends that subscription, not the socket.
          if (!(err instanceof GraphQLError)) return [new GraphQLError("could not parse the operation", { extensions: { code: "GRAPHQL_PARSE_FAILED" } })];
          return [err.extensions.code === undefined ? coded(err, "GRAPHQL_PARSE_FAILED") : err];
        }
        if (!getOperationAST(document, params.operationName)) {
          return [
            new GraphQLError(
              params.operationName
                ? `no operation named "${params.operationName}" in the document`
                : "the document holds several operations: name the one to run (operationName)",
              {
                extensions: { code: "OPERATION_RESOLUTION_FAILURE" },
              },
            ),
          ];
        }
        const args = {
          schema: enveloped.schema,
          operationName: params.operationName,
          document,
          variableValues: params.variables,
          contextValue: await enveloped.contextFactory(),
          // graphql-ws runs every operation with the one execute/subscribe given to useServer
          // (below), and passes them only these args; rootValue is the field it leaves as set
          // (it fills it from `roots` only when absent). So this operation's enveloped execute
          // and subscribe travel here, for those two to call. Run by graphql-ws's defaults
          // (graphql-js's execute and subscribe), an operation over WebSocket would skip yoga's
          // execution hooks: errors unmasked (maskedErrors: a resolver's internal message
          // reaches the client) and no responseSizeLimit (src/bounds/cost.ts). Root resolvers
          // never read their parent, so nothing else sees this object.
          rootValue: { execute: enveloped.execute, subscribe: enveloped.subscribe },
        };
        let errors: readonly GraphQLError[];
        try {
          errors = enveloped.validate(args.schema, args.document);
        } catch (err) {
          // A few graphql-js rules throw instead of reporting (a subscription's directive missing its argument).
          errors = [new GraphQLError(err instanceof Error ? err.message : "the operation is not valid")];
        }
        if (errors.length) return errors.map((e) => (e.extensions.code === undefined ? coded(e, codeOf(e.message)) : e));
        return args;
      },
      // This operation's enveloped execute and subscribe, carried in rootValue (onSubscribe).
      execute: (args) => (args.rootValue as { execute: (a: ExecutionArgs) => unknown }).execute(args) as never,
      subscribe: (args) => (args.rootValue as { subscribe: (a: ExecutionArgs) => unknown }).subscribe(args) as never,
    },
    wss,
    12_000,
  );
  return {
    async close() {
      // Close every socket politely (1001), but a client that never answers
      // the close handshake must not hold the shutdown for ws's 30 s timeout.
      await Promise.race([disposable.dispose(), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}
