// Requests at the edges of the protocol, each once found by the fuzzer
// (test/fuzz): every refusal is JSON with a message and a code, over HTTP and
// WebSocket, and none is the server's fault (no 5xx, no 4500, no stack).
import WebSocket from "ws";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

let h: Harness;
let co: Company;
beforeAll(async () => {
  h = await startHarness();
  co = await createCompany(h, 0);
});
afterAll(() => h?.close());

const post = (body: string, headers: Record<string, string> = {}, path = "/graphql") =>
  fetch(new URL(path, h.url), { method: "POST", headers: { authorization: `Bearer ${co.board.token}`, ...headers }, body });

async function refusal(res: Response): Promise<{ status: number; code: unknown; message: unknown }> {
  const body = (await res.json()) as { errors: { message: string; extensions?: { code?: string } }[] };
  return { status: res.status, code: body.errors[0]?.extensions?.code, message: body.errors[0]?.message };
}

it("types a GET whose variables or extensions are not JSON as BAD_REQUEST", async () => {
  for (const param of ["variables", "extensions"]) {
    const res = await fetch(new URL(`/graphql?query=${encodeURIComponent("{ me { role } }")}&${param}=%7Bx`, h.url), {
      headers: { authorization: `Bearer ${co.board.token}` },
    });
    expect(await refusal(res)).toMatchObject({ status: 400, code: "BAD_REQUEST" });
  }
});

it("types bad variables as BAD_USER_INPUT", async () => {
  const res = await post(JSON.stringify({ query: "query($id: ID!) { company(id: $id) { id } }", variables: { id: 5.5 } }), {
    "content-type": "application/json",
  });
  expect(await refusal(res)).toMatchObject({ code: "BAD_USER_INPUT" });
});

it("answers a Content-Type or an Accept it does not take with JSON, not an empty body", async () => {
  const query = JSON.stringify({ query: "{ me { role } }" });
  for (const type of ["text/plain", "multipart/form-data; boundary=xyz"]) {
    expect(await refusal(await post(type.startsWith("multipart") ? "--xyz--" : query, { "content-type": type }))).toMatchObject({
      status: 415,
      code: "BAD_REQUEST",
    });
  }
  expect(await refusal(await post(query, { "content-type": "application/json", accept: "application/xml" }))).toMatchObject({
    status: 406,
    code: "BAD_REQUEST",
  });
});

it("serves /graphql/ (a trailing slash) as /graphql, with the caller's key", async () => {
  const res = await post(JSON.stringify({ query: "{ me { role } }" }), { "content-type": "application/json" }, "/graphql/");
  expect(await res.json()).toEqual({ data: { me: { role: "BOARD" } } });
});

/** A graphql-ws socket, signed in; resolves with its next message or its close. */
async function socket() {
  const ws = new WebSocket(h.url.replace(/^http/, "ws"), "graphql-transport-ws");
  const inbox: unknown[] = [];
  let closed: { code: number; reason: string } | null = null;
  let wake = () => {};
  ws.on("message", (data) => {
    inbox.push(JSON.parse(String(data)));
    wake();
  });
  ws.on("close", (code, reason) => {
    closed = { code, reason: String(reason) };
    wake();
  });
  await new Promise((resolve) => ws.once("open", resolve));
  ws.send(JSON.stringify({ type: "connection_init", payload: { authorization: `Bearer ${co.board.token}` } }));
  const next = async (): Promise<{ message?: Record<string, unknown>; closed?: { code: number; reason: string } }> => {
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
      if (inbox.length) return { message: inbox.shift() as Record<string, unknown> };
      if (closed) return { closed };
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 200);
      });
    }
    throw new Error("no message or close within 10 s");
  };
  expect((await next()).message?.type).toBe("connection_ack");
  return { ws, next };
}

it("over WebSocket, types parse errors, unidentifiable operations and invalid documents, and keeps the socket", async () => {
  const { ws, next } = await socket();
  const cases: [string, Record<string, unknown>, string][] = [
    ["1", { query: "{ me { role " }, "GRAPHQL_PARSE_FAILED"],
    ["2", { query: "query A { me { role } } query B { me { role } }" }, "OPERATION_RESOLUTION_FAILURE"],
    ["3", { query: "{ me { role } }", operationName: "Nope" }, "OPERATION_RESOLUTION_FAILURE"],
    ["4", { query: `subscription { lockChanged(companyId: "${co.id}") @skip { seq } }` }, "GRAPHQL_VALIDATION_FAILED"],
  ];
  for (const [id, payload, code] of cases) {
    ws.send(JSON.stringify({ id, type: "subscribe", payload }));
    const { message } = await next();
    expect(message, id).toMatchObject({ id, type: "error" });
    expect((message!.payload as { extensions?: { code?: string } }[])[0]?.extensions?.code, id).toBe(code);
  }
  // Bad variables are an execution result with errors, as over HTTP.
  ws.send(JSON.stringify({ id: "5", type: "subscribe", payload: { query: "query($id: ID!) { company(id: $id) { id } }", variables: { id: 5.5 } } }));
  const { message } = await next();
  expect(message).toMatchObject({ id: "5", type: "next" });
  expect((message!.payload as { errors: { extensions?: { code?: string } }[] }).errors[0]?.extensions?.code).toBe("BAD_USER_INPUT");
  ws.close();
});

it("closes a WebSocket that sends a message only a server may send with 4400, not 4500", async () => {
  // The last: a type whose text would make a close reason over WebSocket's 123-byte limit (ws throws on one).
  for (const type of ["next", "error", "nonsense", "€".repeat(40)]) {
    const { ws, next } = await socket();
    ws.send(JSON.stringify({ type, id: "1", payload: {} }));
    expect((await next()).closed?.code, type).toBe(4400);
  }
  expect(await (await post(JSON.stringify({ query: "{ me { role } }" }), { "content-type": "application/json" })).json()).toEqual({
    data: { me: { role: "BOARD" } },
  });
});
