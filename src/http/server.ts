// The API's HTTP server and its life cycle: listens, serves every request
// through routes.ts and graphql-ws (websocket.ts) on the same port, and
// stops. A request whose handler fails is answered 503 with a GraphQL-shaped
// error, never left hanging; a client must send its headers within 10 s and
// its whole request within 30 s.
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { unavailability } from "../db/sql.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";
import { refuse } from "./routes.js";
import { serveWebSockets } from "./websocket.js";
import type { WebSocketDeps } from "./websocket.js";

export interface HttpServerDeps {
  /** Answers every HTTP request (routes.ts). */
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  /** graphql-ws, started on the same server. */
  websockets: WebSocketDeps;
  log: Logger;
}

export interface HttpServer {
  start(port: number, host: string): Promise<{ url: string; port: number }>;
  /** Closes every WebSocket, then every HTTP connection, open streams included. */
  stop(): Promise<void>;
}

export function httpServer(deps: HttpServerDeps): HttpServer {
  let server: Server | null = null;
  let sockets: { close(): Promise<void> } | null = null;

  return {
    async start(port, host) {
      server = createServer((req, res) => {
        deps.handle(req, res).catch((err: unknown) => {
          // The database away (while a key was looked up, say) is the client's to retry; anything else is ours.
          const away = unavailability(err);
          if (away) deps.log("warn", "request failed: database unavailable", { kind: away });
          else deps.log("error", "request failed", errorFields(err));
          if (!res.headersSent)
            void refuse(res, 503, "the request could not be served; try again", {
              code: away ? "UNAVAILABLE" : "INTERNAL_SERVER_ERROR",
              ...(away ? { outcome: "NOT_APPLIED" } : {}),
            });
          else res.destroy();
        });
      });
      // Requests that expect 100 Continue are handled like any other: routes.ts's graphql() sends the 100 if the body may come.
      server.on("checkContinue", (req, res) => server!.emit("request", req, res));
      server.keepAliveTimeout = 65_000;
      // A client must send its headers within 10 s and its whole request within 30 s (responses, SSE included, are not limited).
      server.headersTimeout = 10_000;
      server.requestTimeout = 30_000;
      // Listening comes first: a WebSocket server attached before would also be handed a failure to listen
      // (graphql-ws prints it with its stack), where the one line below says what to do.
      await new Promise<void>((resolve, reject) => {
        server!.once("error", (err: NodeJS.ErrnoException) =>
          reject(
            err.code === "EADDRINUSE"
              ? new Error(`port ${port} on ${host} is in use by another program: stop it, or set PORT to a free port (PORT=0 picks one)`)
              : err,
          ),
        );
        server!.listen(port, host, () => resolve());
      });
      sockets = serveWebSockets(server, deps.websockets);
      const bound = (server.address() as AddressInfo).port;
      return { url: `http://${host}:${bound}/graphql`, port: bound };
    },
    async stop() {
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
