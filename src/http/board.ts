// GET /board: the live board, a static page and its bundle, compiled by
// `npm run build` (part of npm ci) into dist/board/. Served from memory after
// the first read; only these files, never a path a client names.
import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";

/** From src/http or dist/http alike, the package's dist/board/. */
const DIR = new URL("../../dist/board/", import.meta.url);

const FILES: Record<string, { file: string; type: string }> = {
  "/board": { file: "index.html", type: "text/html; charset=utf-8" },
  "/board/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/board/board.js": { file: "board.js", type: "text/javascript; charset=utf-8" },
  "/board/board.js.map": { file: "board.js.map", type: "application/json; charset=utf-8" },
  "/board/board.css": { file: "board.css", type: "text/css; charset=utf-8" },
};

/**
 * Scripts and styles from this origin only, no inline script or style, and
 * requests only to this origin: text an agent wrote can never run as script,
 * and the page can send the key nowhere else.
 */
const BOARD_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join("; ");

export function isBoardPath(path: string): boolean {
  return path === "/board" || path.startsWith("/board/");
}

export function boardAssets() {
  const cache = new Map<string, Buffer>();
  return async function serveBoard(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const entry = FILES[path];
    if (!entry) return void res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    if (req.method !== "GET" && req.method !== "HEAD") {
      return void res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" }).end("the board is read with GET\n");
    }
    let body = cache.get(entry.file);
    if (!body) {
      try {
        body = await readFile(new URL(entry.file, DIR));
      } catch {
        return void res.writeHead(503, { "content-type": "text/plain" }).end("the board is not built: run `npm run build` (npm ci does it) and reload\n");
      }
      cache.set(entry.file, body);
    }
    res.setHeader("Content-Security-Policy", BOARD_POLICY);
    res.writeHead(200, { "content-type": entry.type, "content-length": body.length });
    res.end(req.method === "HEAD" ? undefined : body);
  };
}
