// What a hostile client can do to the whole server, against the real server
// process: every bound of src/bounds/settings.ts is hit here, each test states the
// bound it holds the process to, and /healthz from another client must keep
// answering while it happens.
//
// Deadlines, not timings: a /healthz that waits more than HEALTH_DEADLINE_MS
// fails the test. The attacks this file replays stalled it for 4 to 12 s; the
// 200 ms goal is measured in bench/hostile.ts, where a busy machine cannot
// fail the suite. (2 s, not 1: with the whole suite on 2 cores, one /healthz
// during the 10 MB uploads once took just over 1 s.)
import { request as httpRequest } from "node:http";
import pg from "pg";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { whileWatching } from "../../support/healthWatch.js";
import { eventually } from "../helpers/race.js";
import { startServerProcess } from "../helpers/serverProcess.js";
import type { ServerProcess } from "../helpers/serverProcess.js";

const HEALTH_DEADLINE_MS = 2_000;
const ALLOWED_ORIGIN = "https://board.example.com";

let server: ServerProcess;
let companyId: string;
let boardKey: string;
let agentKey: string;
let runId: string;

interface Answer {
  status: number;
  headers: Headers;
  body: { data?: unknown; errors?: { message: string; extensions?: Record<string, unknown> }[] };
}

async function post(body: string, token: string | null, headers: Record<string, string> = {}, timeoutMs = 30_000): Promise<Answer> {
  const response = await fetch(server.url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body,
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Answer["body"] };
}

const gql = (query: string, token: string | null, variables?: Record<string, unknown>) => post(JSON.stringify({ query, variables }), token);

/** `{ me { ...F ...F … } }` with `spreads` spreads and a unique comment, so that no cache can serve it twice. */
function spreadBomb(spreads: number, tag: string): string {
  return JSON.stringify({ query: `{ me { ${"...F ".repeat(spreads)}} } fragment F on Principal { role } # ${tag}` });
}

/** Sends `count` requests made by `make(i)`, `parallel` at a time. */
async function flood<T>(count: number, parallel: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (let i = 0; i < count; i += parallel) {
    results.push(...(await Promise.all(Array.from({ length: Math.min(parallel, count - i) }, (_, j) => make(i + j)))));
  }
  return results;
}

function limitOf(answer: Answer): unknown {
  return answer.body.errors?.[0]?.extensions?.limit;
}

beforeAll(async () => {
  // A long lease: the agent's run must outlive every test of this file, however slow the machine is today.
  server = await startServerProcess({ BATON_CORS_ORIGINS: ALLOWED_ORIGIN, BATON_RUN_LEASE_SECONDS: "3600" });
  const made = await gql(`mutation { createCompany(name: "Limits") { company { id } boardKey } }`, server.adminToken);
  const created = made.body.data as { createCompany: { company: { id: string }; boardKey: string } };
  companyId = created.createCompany.company.id;
  boardKey = created.createCompany.boardKey;
  const agent = await gql(`mutation { createAgent(name: "a1") { apiKey } }`, boardKey);
  agentKey = (agent.body.data as { createAgent: { apiKey: string } }).createAgent.apiKey;
  expect((await gql(`{ me { role } }`, agentKey)).body).toEqual({ data: { me: { role: "AGENT" } } }); // now a known key
  runId = ((await gql(`mutation { startRun { id } }`, agentKey)).body.data as { startRun: { id: string } }).startRun.id;
  await gql(`mutation { createIssues(inputs: [{ title: "one" }, { title: "two" }]) { id } }`, boardKey);
});

/** An agent's claim, as other clients go on working during an attack. */
async function claim(): Promise<unknown> {
  const answer = await gql(`mutation($r: ID!) { claimIssue(runId: $r, includeUnassigned: true) { __typename } }`, agentKey, { r: runId });
  return (answer.body.data as { claimIssue: { __typename: string } }).claimIssue.__typename;
}

afterAll(async () => {
  await server?.stop();
});

describe("documents from a caller without a key", () => {
  it("50 documents of 2 MB are refused unread (413, anonymousMaxBodyBytes); memory grows by under 80 MB, and /healthz and claims answer throughout", async () => {
    const bomb = (i: number) => spreadBomb(400_000, `anonymous ${i} ${Math.random()}`);
    await flood(5, 5, (i) => post(bomb(i), null)); // warm up: the first requests load code
    const before = server.rssMb();
    const {
      result: [answers, claimed],
      health: { failures, answered },
    } = await whileWatching(server.origin, HEALTH_DEADLINE_MS, () => Promise.all([flood(50, 5, (i) => post(bomb(i), null)), claim()]));
    expect(claimed).toBe("IssueClaimed");
    for (const answer of answers) {
      expect(answer.status).toBe(413);
      expect(answer.body.errors![0]!.extensions).toMatchObject({ code: "LIMIT_EXCEEDED", limit: "anonymousMaxBodyBytes" });
    }
    expect(failures).toEqual([]);
    expect(answered).toBeGreaterThan(0);
    // Before the limits, each of these documents kept about 220 MB, and the 19th ended the process.
    expect(server.rssMb() - before).toBeLessThan(80);
  });

  it("a document too long for a caller without a key is refused over WebSocket too, and the socket's messages are not kept", async () => {
    const before = server.rssMb();
    const socket = new WebSocket(server.url.replace(/^http/, "ws"), "graphql-transport-ws");
    const messages: { type: string; id?: string; payload?: { extensions?: Record<string, unknown> }[] }[] = [];
    socket.on("message", (data) => messages.push(JSON.parse(String(data))));
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
    socket.send(JSON.stringify({ type: "connection_init", payload: {} }));
    await eventually(() => messages.find((m) => m.type === "connection_ack"), "the connection ack");
    for (let i = 0; i < 5; i++) {
      // 1 MB, just under the WebSocket message limit.
      const query = `subscription { lockChanged(companyId: "${companyId}") { seq ${"...F ".repeat(199_000)}} } # ${i}`;
      socket.send(JSON.stringify({ id: String(i), type: "subscribe", payload: { query } }));
    }
    const errors = await eventually(() => {
      const found = messages.filter((m) => m.type === "error");
      return found.length === 5 ? found : undefined;
    }, "an error for each of the five operations");
    for (const error of errors) expect(error.payload![0]!.extensions).toMatchObject({ code: "LIMIT_EXCEEDED", limit: "anonymousMaxBodyBytes" });
    socket.close();
    // Before the limits, each of these messages kept about 105 MB after the socket closed.
    expect(server.rssMb() - before).toBeLessThan(60);
  });

  it("a flood of made-up keys reaches the database at most the address's budget; the rest get 429 without a lookup", async () => {
    const lookups = async () => {
      const text = await (await fetch(`${server.origin}/metrics`)).text();
      return Number(/baton_key_lookups_total\{result="unknown"\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    const before = await lookups();
    const madeUp = (i: number) => `baton_agent_${i.toString().padStart(43, "x")}`;
    const answers = await flood(200, 10, (i) => gql(`{ me { role } }`, madeUp(i)));
    const refused = answers.filter((a) => a.status === 429);
    // 30 a minute per address, and at most 8 lookups were already running when the budget ran out.
    expect((await lookups()) - before).toBeLessThanOrEqual(30 + 8);
    expect(refused.length).toBeGreaterThanOrEqual(200 - 38);
    expect(limitOf(refused[0]!)).toBe("unknownKeysPerMinute");
    expect(Number(refused[0]!.headers.get("retry-after"))).toBeGreaterThan(0);
    for (const answer of answers.filter((a) => a.status !== 429)) expect(answer.body.errors![0]!.extensions!.code).toBe("UNAUTHENTICATED");
    // Keys this server knows keep working from the same address.
    expect((await gql(`{ me { role } }`, agentKey)).body).toEqual({ data: { me: { role: "AGENT" } } });
    // A repeated unknown key is remembered: no lookup, and not refused for the budget either.
    const repeated = await gql(`{ me { role } }`, madeUp(0));
    expect(repeated.body.errors![0]!.extensions!.code).toBe("UNAUTHENTICATED");
  });
});

describe("documents with a valid key", () => {
  it("20 documents of 2 MB (800,000 tokens) and one of 9.8 MB are refused at 5,000 tokens (maxTokens), and none is kept: a second round adds under 80 MB", async () => {
    const round = (tag: string) =>
      whileWatching(server.origin, HEALTH_DEADLINE_MS, async () => [
        ...(await flood(20, 2, (i) => post(spreadBomb(400_000, `${tag} ${i} ${Math.random()}`), agentKey))),
        await post(spreadBomb(2_000_000, `${tag} 9.8 MB, just under maxBodyBytes`), agentKey), // held the event loop for 10 s before
      ]);
    const before = server.rssMb();
    const first = await round("first");
    const afterFirst = server.rssMb();
    const second = await round("second");
    for (const { result: answers, health } of [first, second]) {
      for (const answer of answers) {
        expect(answer.body.errors![0]!.extensions).toMatchObject({ code: "LIMIT_EXCEEDED", limit: "maxTokens", max: 5_000 });
      }
      expect(health.failures).toEqual([]);
    }
    // Each request's body (up to 10 MB) and 5,000 tokens of AST are garbage once answered: the heap
    // grows to hold a round's garbage, and the next round reuses it rather than adding to it.
    // (Kept in a cache, as before issue 8, each of these documents held about 220 MB.)
    expect(afterFirst - before).toBeLessThan(150);
    expect(server.rssMb() - afterFirst).toBeLessThan(80);
  });

  it("a fragment chain that multiplies at every level is validated and sized in one pass, not expanded", async () => {
    const levels = 12;
    const fragments = Array.from({ length: levels }, (_, i) =>
      i === levels - 1
        ? `fragment f${i} on Query { me { role } }`
        : `fragment f${i} on Query { ${Array(10)
            .fill(`...f${i + 1}`)
            .join(" ")} }`,
    );
    const answer = await gql(`query { ...f0 } ${fragments.join(" ")}`, server.adminToken); // about 1 KB, 10^12 paths
    expect(answer.body).toEqual({ data: { me: { role: "ADMIN" } } });
  });
});

describe("answers", () => {
  const DESCRIPTION = 100_000;
  const aliases = (n: number) =>
    `{ ${Array.from({ length: n }, (_, i) => `a${i}: issues(companyId: "${companyId}", status: [BACKLOG], first: 500) { edges { node { description } } }`).join(" ")} }`;

  beforeAll(async () => {
    const db = new pg.Client({ connectionString: server.database.url });
    await db.connect();
    await db.query(
      `INSERT INTO issues (company_id, title, description, status) SELECT $1, 'big ' || g, repeat('x', $2), 'BACKLOG' FROM generate_series(1, 500) g`,
      [companyId, DESCRIPTION],
    );
    await db.end();
  });

  it("ten aliases of 500 descriptions of 100,000 characters (an 876-byte query) are refused before anything is read (maxResponseChars)", async () => {
    const {
      result: [answer, claimed],
      health: { failures },
    } = await whileWatching(server.origin, HEALTH_DEADLINE_MS, () => Promise.all([post(JSON.stringify({ query: aliases(10) }), boardKey, {}, 1_000), claim()]));
    expect(claimed).toBe("IssueClaimed");
    expect(answer.body.data).toBeUndefined();
    expect(answer.body.errors![0]!.extensions).toMatchObject({ code: "LIMIT_EXCEEDED", limit: "maxResponseChars", max: 6_000_000 });
    expect(answer.body.errors![0]!.message).toMatch(/could be \d+ characters/);
    expect(failures).toEqual([]);
  });

  it("sixteen aliases with an agent key, and the row count passed as a variable, are refused the same way", async () => {
    const query = `query($n: Int) { ${Array.from({ length: 16 }, (_, i) => `a${i}: issues(companyId: "${companyId}", first: $n) { edges { node { description } } }`).join(" ")} }`;
    const answer = await post(JSON.stringify({ query, variables: { n: 500 } }), agentKey, {}, 1_000);
    expect(limitOf(answer)).toBe("maxResponseChars");
  });

  it("what fits the limit is served: one page of 50 with descriptions", async () => {
    const answer = await gql(`{ issues(companyId: "${companyId}", status: [BACKLOG], first: 50) { edges { node { description } } } }`, boardKey);
    const edges = (answer.body.data as { issues: { edges: { node: { description: string } }[] } }).issues.edges;
    expect(edges).toHaveLength(50);
    expect(edges[0]!.node.description).toHaveLength(DESCRIPTION);
  });
});

describe("bodies", () => {
  /** Streams `total` bytes chunked (no Content-Length); resolves with the status and how many bytes the server let through before it answered and closed. */
  function sendChunked(token: string | null, total: number): Promise<{ status: number; written: number }> {
    return new Promise((resolve, reject) => {
      let written = 0;
      let status = 0;
      const req = httpRequest(server.url, {
        method: "POST",
        headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      });
      req.on("response", (res) => {
        status = res.statusCode!;
        res.resume();
        res.on("end", () => {
          resolve({ status, written });
          req.destroy(); // stop sending
        });
      });
      req.on("error", (err) => (status ? resolve({ status, written }) : reject(err)));
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = () => {
        while (written < total && !status && !req.destroyed) {
          written += chunk.length;
          if (!req.write(chunk)) return void req.once("drain", pump);
        }
        if (written >= total) req.end();
      };
      req.write('{"query":"{ me { role } }", "x": "');
      pump();
    });
  }

  // The server keeps 10 MB, throws away at most 4 MB more, then stops reading; what the client
  // manages to write past that sits in the two sockets' buffers (a few MB on loopback).
  it("a chunked 64 MB body with a valid key gets 413 (maxBodyBytes) at 10 MB, without the rest being read", async () => {
    const { status, written } = await sendChunked(agentKey, 64 * 1024 * 1024);
    expect(status).toBe(413);
    expect(written).toBeLessThan(32 * 1024 * 1024);
  });

  it("a chunked 64 MB body without a key gets 413 (anonymousMaxBodyBytes) at 16 KB, without the rest being read", async () => {
    const { status, written } = await sendChunked(null, 64 * 1024 * 1024);
    expect(status).toBe(413);
    expect(written).toBeLessThan(16 * 1024 * 1024);
  });
});

describe("headers", () => {
  it("CORS only for the configured origins, never with credentials", async () => {
    const preflight = (origin: string) =>
      fetch(server.url, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" },
      });
    const evil = await preflight("https://evil.example");
    expect(evil.headers.get("access-control-allow-origin")).toBeNull();
    const evilPost = await post(`{"query":"{ me { role } }"}`, agentKey, { origin: "https://evil.example" });
    expect(evilPost.headers.get("access-control-allow-origin")).toBeNull();
    expect(evilPost.headers.get("access-control-allow-credentials")).toBeNull();
    const allowed = await preflight(ALLOWED_ORIGIN);
    expect(allowed.headers.get("access-control-allow-origin")).toBe(ALLOWED_ORIGIN);
    expect(allowed.headers.get("access-control-allow-credentials")).toBeNull();
    expect(allowed.headers.get("access-control-allow-headers")).toMatch(/authorization/);
    // a browser page that traces may send its trace context (docs/operations.md, Tracing)
    expect(allowed.headers.get("access-control-allow-headers")).toMatch(/traceparent.*tracestate/);
  });

  it("every answer carries the security headers, and a malformed body is refused without the parser's words", async () => {
    const answer = await post(`{"query": "{ me { role } }"`, agentKey);
    expect(answer.body).toEqual({ errors: [{ message: "POST body sent invalid JSON.", extensions: { code: "BAD_REQUEST" } }] });
    for (const res of [answer.headers, (await fetch(`${server.origin}/healthz`)).headers]) {
      expect(res.get("x-content-type-options")).toBe("nosniff");
      expect(res.get("x-frame-options")).toBe("DENY");
      expect(res.get("referrer-policy")).toBe("no-referrer");
      expect(res.get("content-security-policy")).toContain("frame-ancestors 'none'");
    }
    expect(answer.headers.get("cache-control")).toBe("no-store");
  });

  it("the server is still up and has printed no stack", () => {
    expect(server.alive()).toBe(true);
    expect(server.output()).not.toMatch(/\n\s+at /);
  });
});
