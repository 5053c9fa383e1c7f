// GET / (a small page that says what this server is and links GraphiQL, the
// board and the docs) and GET /favicon.ico (Baton's icon, an SVG, linked
// from every page). Both are constants: nothing a client sends reaches them.
import type { IncomingMessage, ServerResponse } from "node:http";

/** A baton: a rounded bar, drawn on a dark tile so that it reads on light and dark tabs alike. */
const FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<rect width="32" height="32" rx="7" fill="#0550ae"/>
<rect x="6" y="13" width="20" height="6" rx="3" fill="#fff" transform="rotate(-35 16 16)"/>
<circle cx="24" cy="10.5" r="3" fill="#ffd33d"/>
</svg>
`;

const DOCS: [file: string, what: string][] = [
  ["README.md", "install, a worked session, the CLI"],
  ["docs/board.md", "the live board"],
  ["docs/lifecycle.md", "an issue's statuses, runs, locks, attempts and the lock epoch"],
  ["docs/access.md", "keys and who may call what"],
  ["docs/client.md", "the baton/client SDK and baton work"],
  ["docs/events.md", "the event ledger and its subscriptions"],
  ["docs/operations.md", "running the server"],
];

const LANDING = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Baton</title>
<link rel="icon" href="/favicon.ico" type="image/svg+xml">
<style>
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1f24; max-width: 44rem; margin: 2rem auto; padding: 0 1rem; }
a { color: #0550ae; }
li { margin: 0.3rem 0; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
.muted { color: #57606a; }
</style>
</head>
<body>
<h1>Baton</h1>
<p>A GraphQL API that hands out work to a fleet of agents: each issue is checked out by one run at a time, and every lock change is written to a per-company event ledger.</p>
<ul>
<li><a href="/board">The live board</a>: who holds what, each holder's heartbeat, and every lock change as it commits. Sign in with a board key or the admin token.</li>
<li><a href="/graphql">GraphiQL</a>: the API in the browser. Open <b>Headers</b> and paste <code>{"authorization": "Bearer &lt;key&gt;"}</code> to sign in.</li>
<li>The API itself: <code>POST /graphql</code> (GraphQL over HTTP, subscriptions over SSE or WebSocket); <code>npx baton --help</code> for the CLI.</li>
</ul>
<h2>Docs</h2>
<p class="muted">In the Baton checkout or package:</p>
<ul>
${DOCS.map(([file, what]) => `<li><code>${file}</code>: ${what}</li>`).join("\n")}
</ul>
<p class="muted">Health: <a href="/healthz">/healthz</a>, <a href="/readyz">/readyz</a>; metrics: <a href="/metrics">/metrics</a>.</p>
</body>
</html>
`;

const PAGES: Record<string, { body: Buffer; type: string }> = {
  "/": { body: Buffer.from(LANDING), type: "text/html; charset=utf-8" },
  "/favicon.ico": { body: Buffer.from(FAVICON), type: "image/svg+xml" },
};

/**
 * The landing page's own policy: its inline style and this origin's icon, nothing else (no script at
 * all); on top of the headers every answer gets (src/http/headers.ts).
 */
const LANDING_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function isLandingPath(path: string): boolean {
  return Object.hasOwn(PAGES, path);
}

export function serveLanding(req: IncomingMessage, res: ServerResponse, path: string): void {
  const page = PAGES[path]!;
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" }).end(`${path} is read with GET\n`);
    return;
  }
  res.setHeader("Content-Security-Policy", LANDING_POLICY);
  res.writeHead(200, { "content-type": page.type, "content-length": page.body.length });
  res.end(req.method === "HEAD" ? undefined : page.body);
}
