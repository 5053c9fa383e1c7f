// What stays open is bounded: subscriptions per socket, per key and per
// company, and WebSockets and SSE streams per key (and per address without a
// key), against the real server process. Every event is delivered once per
// subscription, so these bounds are what keeps one claim from turning into
// 100,000 deliveries.
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../helpers/race.js";
import { startServerProcess } from "../helpers/serverProcess.js";
import type { ServerProcess } from "../helpers/serverProcess.js";

// Per socket keeps its default (100); the others are lowered so that the test opens fewer.
const PER_KEY = 150;
const PER_COMPANY = 230;
const CONNECTIONS_PER_KEY = 3;
const ANONYMOUS_CONNECTIONS = 2;

let server: ServerProcess;
let companyId: string;
let boardKey: string;
let agentKey: string;
const open: RawSocket[] = [];

interface Message {
  type: string;
  id?: string;
  payload?: { data?: unknown; extensions?: Record<string, unknown> }[] & { data?: unknown };
}

/** A graphql-transport-ws socket spoken to directly: every message is kept, and tests wait for what they expect with a deadline. */
class RawSocket {
  readonly messages: Message[] = [];
  closed: { code: number; reason: string } | null = null;
  private constructor(private readonly socket: WebSocket) {
    socket.on("message", (data) => this.messages.push(JSON.parse(String(data)) as Message));
    socket.on("close", (code, reason) => (this.closed = { code, reason: String(reason) }));
  }

  /** Opens a socket and sends connection_init; resolves on the ack, or when the server closes it. */
  static async connect(token: string | null): Promise<RawSocket> {
    const socket = new WebSocket(server.url.replace(/^http/, "ws"), "graphql-transport-ws");
    const raw = new RawSocket(socket);
    open.push(raw);
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
    socket.send(JSON.stringify({ type: "connection_init", payload: token ? { authorization: `Bearer ${token}` } : {} }));
    await eventually(() => (raw.closed || raw.messages.some((m) => m.type === "connection_ack") ? true : undefined), "the ack or a close");
    return raw;
  }

  subscribe(id: string, company = companyId): void {
    this.socket.send(JSON.stringify({ id, type: "subscribe", payload: { query: `subscription { lockChanged(companyId: "${company}") { seq kind } }` } }));
  }

  complete(id: string): void {
    this.socket.send(JSON.stringify({ id, type: "complete" }));
  }

  /** The extensions of the first error for operation `id` (refused before it started: `error`; by its resolver: `next` with errors), waiting for it. */
  errorOf(id: string): Promise<Record<string, unknown>> {
    return eventually(() => {
      const m = this.messages.find((m) => m.id === id && (m.type === "error" || m.type === "next"));
      return m?.type === "error"
        ? m.payload?.[0]?.extensions
        : (m?.payload as { errors?: { extensions: Record<string, unknown> }[] } | undefined)?.errors?.[0]?.extensions;
    }, `an error for ${id}`);
  }

  /** Waits until every operation in `ids` has delivered an event. */
  async delivered(ids: string[]): Promise<void> {
    await eventually(
      () => (ids.every((id) => this.messages.some((m) => m.id === id && m.type === "next")) ? true : undefined),
      "events for every subscription",
    );
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.socket.once("close", () => resolve());
      this.socket.close();
    });
  }
}

async function gql<T>(query: string, token: string): Promise<T> {
  const response = await fetch(server.url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query }),
  });
  const body = (await response.json()) as { data: T; errors?: unknown };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

/** One committed change, and so one event for every subscription of the company. */
async function change(): Promise<void> {
  await gql(`mutation { createIssue(input: { title: "t", status: BACKLOG }) { id } }`, boardKey).then((d) =>
    gql(`mutation { updateIssue(id: "${(d as { createIssue: { id: string } }).createIssue.id}", input: { status: OPEN }) { __typename } }`, boardKey),
  );
}

/** Opens subscriptions `from`..`to-1` on `socket`, and waits until the server holds them all (each has delivered an event). */
async function fill(socket: RawSocket, from: number, to: number): Promise<string[]> {
  const ids = Array.from({ length: to - from }, (_, i) => String(from + i));
  for (const id of ids) socket.subscribe(id);
  await eventually(
    async () => {
      await change();
      return ids.every((id) => socket.messages.some((m) => m.id === id && m.type === "next")) ? true : undefined;
    },
    "every subscription to be live",
    20_000,
  );
  return ids;
}

beforeAll(async () => {
  server = await startServerProcess({
    BATON_MAX_SUBSCRIPTIONS_PER_KEY: String(PER_KEY),
    BATON_MAX_SUBSCRIPTIONS_PER_COMPANY: String(PER_COMPANY),
    BATON_MAX_CONNECTIONS_PER_KEY: String(CONNECTIONS_PER_KEY),
    BATON_ANONYMOUS_MAX_CONNECTIONS: String(ANONYMOUS_CONNECTIONS),
  });
  const made = await gql<{ createCompany: { company: { id: string }; boardKey: string } }>(
    `mutation { createCompany(name: "Sockets") { company { id } boardKey } }`,
    server.adminToken,
  );
  companyId = made.createCompany.company.id;
  boardKey = made.createCompany.boardKey;
  agentKey = (await gql<{ createAgent: { apiKey: string } }>(`mutation { createAgent(name: "a1") { apiKey } }`, boardKey)).createAgent.apiKey;
});

afterAll(async () => {
  for (const socket of open) await socket.close();
  await server?.stop();
});

describe("subscriptions", () => {
  let first: RawSocket;

  it("one socket holds 100 operations; the 101st is refused (subscriptionsPerSocket) and the 100 keep delivering", async () => {
    first = await RawSocket.connect(boardKey);
    const ids = await fill(first, 0, 100);
    first.subscribe("100");
    expect(await first.errorOf("100")).toMatchObject({ code: "LIMIT_EXCEEDED", limit: "subscriptionsPerSocket", max: 100 });
    first.messages.length = 0;
    await change();
    await first.delivered(ids);
    // A place given back can be taken again.
    first.complete("99");
    first.subscribe("101");
    await eventually(async () => {
      await change();
      return first.messages.some((m) => m.id === "101" && m.type === "next") ? true : undefined;
    }, "the new subscription to deliver");
  });

  it(`one key holds ${PER_KEY} across its sockets; the next is refused (subscriptionsPerKey)`, async () => {
    const second = await RawSocket.connect(boardKey);
    await fill(second, 0, PER_KEY - 100);
    second.subscribe("last");
    expect(await second.errorOf("last")).toMatchObject({ code: "LIMIT_EXCEEDED", limit: "subscriptionsPerKey", max: PER_KEY });
  });

  it(`one company holds ${PER_COMPANY} across its keys; the next is refused (subscriptionsPerCompany)`, async () => {
    const agent = await RawSocket.connect(agentKey);
    await fill(agent, 0, PER_COMPANY - PER_KEY);
    agent.subscribe("last");
    expect(await agent.errorOf("last")).toMatchObject({ code: "LIMIT_EXCEEDED", limit: "subscriptionsPerCompany", max: PER_COMPANY });
  });
});

describe("connections", () => {
  it(`a key holds ${CONNECTIONS_PER_KEY} WebSockets and SSE streams together; the next socket is closed (1008) and the next stream refused (429)`, async () => {
    // The board key already has two sockets open (above).
    const third = await RawSocket.connect(boardKey);
    expect(third.closed).toBeNull();
    const fourth = await RawSocket.connect(boardKey);
    await eventually(() => fourth.closed ?? undefined, "the fourth socket to be closed");
    expect(fourth.closed).toEqual({ code: 1008, reason: `LIMIT_EXCEEDED connectionsPerKey = ${CONNECTIONS_PER_KEY}` });

    const stream = () =>
      fetch(server.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream", authorization: `Bearer ${boardKey}` },
        body: JSON.stringify({ query: `subscription { lockChanged(companyId: "${companyId}") { seq } }` }),
      });
    const refused = await stream();
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { errors: { extensions: unknown }[] }).errors[0]!.extensions).toMatchObject({ limit: "connectionsPerKey" });

    // Closing a socket gives its place to a stream.
    await third.close();
    const admitted = await eventually(async () => {
      const res = await stream();
      if (res.status === 200) return res;
      await res.body?.cancel();
      return undefined;
    }, "a stream to be admitted once a socket closed");
    expect(admitted.headers.get("content-type")).toMatch(/text\/event-stream/);
    await admitted.body!.cancel();
  });

  it(`an address without a key holds ${ANONYMOUS_CONNECTIONS} sockets (anonymousConnectionsPerAddress)`, async () => {
    const sockets = [await RawSocket.connect(null), await RawSocket.connect(null)];
    for (const s of sockets) expect(s.closed).toBeNull();
    const extra = await RawSocket.connect(null);
    await eventually(() => extra.closed ?? undefined, "the extra socket to be closed");
    expect(extra.closed!.code).toBe(1008);
    expect(extra.closed!.reason).toMatch(/anonymousConnectionsPerAddress/);
    // Without a key nothing can be subscribed to anyway.
    sockets[0]!.subscribe("x");
    const answer = await eventually(() => sockets[0]!.messages.find((m) => m.id === "x"), "an answer to the anonymous subscription");
    expect(JSON.stringify(answer.payload)).toContain("UNAUTHENTICATED");
  });

  it("the server is still up and has printed no stack", async () => {
    expect((await fetch(`${server.origin}/healthz`, { signal: AbortSignal.timeout(1_000) })).status).toBe(200);
    expect(server.alive()).toBe(true);
    expect(server.output()).not.toMatch(/\n\s+at /);
  });
});
