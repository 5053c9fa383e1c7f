// Response headers every answer carries, and who may call from a browser.
import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * GraphiQL's page: its script, styles and editor workers are inlined (blob:
 * workers), and it talks only to this server, over HTTP and WebSocket.
 */
const PAGE_POLICY = [
  "default-src 'self'",
  "script-src 'self' 'unsafe-inline' 'unsafe-eval' blob:",
  "worker-src 'self' blob:",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
].join("; ");

/**
 * The usual hardening for an API: no MIME sniffing, no framing, no referrer,
 * no caching (answers can carry keys, e.g. createAgent's). Pages (GraphiQL)
 * get a CSP that allows their scripts; everything else none at all.
 */
export function setSecurityHeaders(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("X-Frame-Options", "DENY");
  res.setHeader("Referrer-Policy", "no-referrer");
  res.setHeader("Cache-Control", "no-store");
  const page = req.method === "GET" && (req.headers.accept ?? "").includes("text/html");
  res.setHeader("Content-Security-Policy", page ? PAGE_POLICY : "default-src 'none'; frame-ancestors 'none'");
}

/**
 * yoga's CORS option. Off unless BATON_CORS_ORIGINS lists origins; then only
 * those, and never with credentials: Baton authenticates with bearer tokens,
 * which a page must send itself, so no cookie or proxy credential is honoured.
 */
export function corsOption(origins: readonly string[]) {
  if (origins.length === 0) return false as const;
  return (request: Request) => {
    const origin = request.headers.get("origin");
    if (!origin || !origins.includes(origin)) return false as const;
    return {
      origin: [origin],
      credentials: false,
      methods: ["GET", "POST"],
      allowedHeaders: ["authorization", "content-type", "accept", "traceparent", "tracestate"],
      maxAge: 600,
    };
  };
}
