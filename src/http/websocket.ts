// graphql-ws on the API's HTTP server. A socket authenticates at
// connection_init (connectionParams.authorization, or the upgrade request's
// Authorization header), and takes a place among its key's connections (or its
// address's, without a valid key) for as long as it is open. An operation may
// carry its own Authorization in extensions.headers (GraphiQL does); it then
// runs as that key. A missing or unknown token fails each operation with
// UNAUTHENTICATED, as over HTTP; the socket stays open, within
// anonymousConnectionsPerAddress.
import type { Server } from "node:http";
import { GraphQLError } from "graphql";
import type { ExecutionArgs } from "graphql";
import type { YogaServerInstance } from "graphql-yoga";
import { useServer } from "graphql-ws/use/ws";
import { WebSocketServer } from "ws";
import type { Principal, PrincipalResolver } from "../auth/principal.js";
import { principalKey } from "../auth/principal.js";
import type { TransportContext } from "../graphql/documents.js";
import { limitError } from "../graphql/documents.js";
import { LimitExceededError } from "../limits.js";
import type { Limits } from "../limits.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";
import type { Admission } from "./admission.js";

/** The largest WebSocket message read before it is refused (close 1009). */
const MAX_MESSAGE_BYTES = 1024 * 1024;
/** WebSocket close code for a policy violation (RFC 6455). */
const POLICY_VIOLATION = 1008;

type SocketState = {
  principal?: Principal | null;
  address?: string;
  release?: () => void;
};

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
  admission: Admission;
  limits: Limits;
  log: Logger;
  onRefused: (limit: string) => void;
}

export function serveWebSockets(server: Server, deps: WebSocketDeps): { close(): Promise<void> } {
  const wss = new WebSocketServer({ server, path: deps.yoga.graphqlEndpoint, maxPayload: MAX_MESSAGE_BYTES });
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
      onClose: (ctx) => ctx.extra.release?.(),
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
        const enveloped = deps.yoga.getEnveloped({ principal, request: undefined as never, params });
        let document;
        try {
          document = enveloped.parse(params.query);
        } catch (err) {
          // A malformed or oversized operation ends that subscription, not the socket.
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
