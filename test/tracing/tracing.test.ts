// OpenTelemetry tracing (src/tracing/, docs/operations.md "Tracing"): a span
// per operation and per lock statement, one trace per issue life of an SDK
// worker, W3C parents read strictly, the sweep's steps, and spans reaching an
// OTLP/HTTP receiver named by the standard variables.
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { Baton } from "baton/client";
import { createClient } from "graphql-ws";
import WebSocket from "ws";
import { afterAll, beforeAll, expect, it } from "vitest";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { silentLogger } from "../../src/log.js";
import { startTracing, tracesExporter } from "../../src/tracing/setup.js";
import type { Tracing } from "../../src/tracing/setup.js";
import { parseTraceparent } from "../../src/tracing/traceparent.js";
import { ADMIN_TOKEN, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";
import { startServerProcess } from "../helpers/serverProcess.js";

const TITLE = "Rotate the secret hunter2 key";
const DESCRIPTION = "the description must never reach a span";

const exporter = new InMemorySpanExporter();
let tracing: Tracing;
let h: Harness;
beforeAll(async () => {
  // Not the global provider: a test below plays a client process with an SDK of its own.
  tracing = await startTracing({ serviceName: "baton-api", log: silentLogger, exporter, global: false });
  h = await startHarness({ leaseSeconds: 3 }); // a heartbeat every second
});
afterAll(async () => {
  await h?.close();
  await tracing?.shutdown();
});

const spans = () => exporter.getFinishedSpans();
const named = (name: string, among = spans()) => among.filter((s) => s.name === name);
const attr = (s: ReadableSpan, key: string) => s.attributes[key];
const parentId = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const traceOf = (s: ReadableSpan) => s.spanContext().traceId;

async function issueFor(co: Company): Promise<string> {
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: TITLE, description: DESCRIPTION, assigneeAgentId: co.agents[0]!.id } });
  return createIssue.id;
}

/** Runs one worker (once) until its queue is empty; each handler waits until a heartbeat has gone while it ran (in its issue's trace). */
async function workAll(co: Company, onIssue: () => void = () => {}): Promise<void> {
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async () => {
      onIssue();
      const before = named("mutation WorkHeartbeat").length;
      await eventually(() => (named("mutation WorkHeartbeat").length > before ? true : undefined), "a heartbeat while the issue runs", 5_000).catch(() => {}); // none: the assertions below say what is missing
    },
    { concurrency: 1, once: true, idleWaitMs: 100 },
  );
  await worker.done;
}

/** No attribute of any span, nor of its resource, carries a secret, a title or a description. */
function expectNothingForbidden(all: ReadableSpan[], secrets: string[]) {
  for (const s of all) {
    const values = [...Object.values(s.attributes), ...Object.values(s.resource.attributes), s.name].map((v) => String(v));
    for (const secret of secrets) for (const v of values) expect(v.includes(secret), `${s.name} carries ${secret}`).toBe(false);
  }
}

it("an SDK worker's issue life is one trace: its claim (or the release before it), heartbeats and release, each with its lock statements under it", async () => {
  exporter.reset();
  const co = await createCompany(h, 1);
  const [first, second] = [await issueFor(co), await issueFor(co)];
  await workAll(co);

  // One request per job: the first issue's claim took both locks; the second came with the first's release.
  expect(named("mutation WorkAcquire")).toEqual([]);
  const lives = new Map<string, string>();
  for (const id of [first, second]) {
    const release = named("mutation WorkRelease").find((s) => attr(s, "baton.issue.id") === id)!;
    expect(release, `the release of ${id}`).toBeDefined();
    const traceId = traceOf(release);
    lives.set(id, traceId);
    const inTrace = spans().filter((s) => traceOf(s) === traceId);
    expect(named("mutation WorkRelease", inTrace)).toHaveLength(1);
    const claims = named("mutation WorkClaim", inTrace);
    expect(claims).toHaveLength(id === first ? 1 : 0);
    const ops = [...claims, release];
    const heartbeats = named("mutation WorkHeartbeat", inTrace);
    expect(heartbeats.length).toBeGreaterThanOrEqual(1);
    // Each request is a child of the worker's own span id: remote, fresh per request, not a span of the server.
    const parents = [...ops, ...heartbeats].map((s) => {
      expect(s.parentSpanContext?.isRemote).toBe(true);
      expect(spans().some((x) => x.spanContext().spanId === parentId(s))).toBe(false);
      return parentId(s);
    });
    expect(new Set(parents).size).toBe(parents.length);
    // The operation spans say who, what and with which outcome.
    for (const op of [...ops, ...heartbeats]) {
      expect(op.kind).toBe(1); // SERVER
      expect(attr(op, "baton.company.id")).toBe(co.id);
      expect(attr(op, "baton.agent.id")).toBe(co.agents[0]!.id);
      expect(attr(op, "baton.run.id")).toBe(attr(release, "baton.run.id"));
    }
    if (id === first) {
      expect(claims[0]!.attributes).toMatchObject({ "baton.outcome": "IssueClaimed", "baton.issue.id": id, "baton.lock_epoch": 1, "baton.group_size": 1 });
    }
    expect(release.attributes).toMatchObject({ "baton.outcome": "IssueReleased", "baton.issue.id": id });
    expect(heartbeats[0]!.attributes).toMatchObject({ "baton.outcome": "RunUpdated" });
    // Each lock statement is a span under its operation: the release's claim of the next issue too.
    for (const [op, statement] of [
      ...claims.map((c) => [c, "CLAIM_NEXT_FOR_EACH"] as const),
      [release, "RELEASE_IF_CHECKOUT_HELD"],
      [release, "CLAIM_NEXT_FOR_EACH"],
      [heartbeats[0]!, "EXTEND_LEASE_IF_LIVE"],
    ] as const) {
      const children = inTrace.filter((s) => parentId(s) === op.spanContext().spanId);
      expect(children.map((s) => s.name)).toContain(statement);
      const child = children.find((s) => s.name === statement)!;
      expect(child.attributes["db.query.summary"]).toBe(statement);
      expect(child.kind).toBe(2); // CLIENT
      // (Not compared: span times. Each span anchors its clock on Date.now() when it starts, so two spans' times can
      // disagree by a millisecond, more on a busy machine.)
    }
    expect(named("CLAIM_NEXT_FOR_EACH", inTrace)[0]!.attributes).toMatchObject({ "baton.group_size": 1, "baton.company.id": co.id });
  }
  // Two issues, two lives.
  expect(lives.get(first)).not.toBe(lives.get(second));
  expectNothingForbidden(spans(), [co.board.token!, co.agents[0]!.client.token!, ADMIN_TOKEN, TITLE, DESCRIPTION, "hunter2"]);
});

it("with the caller's own OpenTelemetry SDK, the worker records its spans there and the server's spans hang under them", async () => {
  exporter.reset();
  const clientSide = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(clientSide)] });
  trace.setGlobalTracerProvider(provider);
  try {
    const co = await createCompany(h, 1);
    const id = await issueFor(co);
    await workAll(co, () => trace.getTracer("user").startSpan("the handler's own work").end());
    const life = clientSide.getFinishedSpans().find((s) => s.name === "baton issue" && s.attributes["baton.issue.id"] === id)!;
    expect(life).toBeDefined();
    expect(life.attributes).toMatchObject({ "baton.lock_epoch": 1 });
    const own = clientSide.getFinishedSpans().find((s) => s.name === "the handler's own work")!;
    expect(parentId(own)).toBe(life.spanContext().spanId);
    for (const operation of ["WorkClaim", "WorkRelease", "WorkHeartbeat"]) {
      const client = clientSide.getFinishedSpans().find((s) => s.name === `baton ${operation}` && traceOf(s) === traceOf(life))!;
      expect(client, operation).toBeDefined();
      expect(parentId(client)).toBe(life.spanContext().spanId);
      const server = named(`mutation ${operation}`).filter((s) => parentId(s) === client.spanContext().spanId);
      expect(server, `the server's ${operation}`).toHaveLength(1);
      expect(traceOf(server[0]!)).toBe(traceOf(life));
    }
    expectNothingForbidden([...spans(), ...clientSide.getFinishedSpans()], [co.board.token!, co.agents[0]!.client.token!, TITLE, DESCRIPTION]);
  } finally {
    trace.disable();
    await provider.shutdown();
  }
});

it("reads traceparent strictly: a valid one is the operation's parent, anything else starts a new trace and changes nothing else", async () => {
  const valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const cases: [string, Record<string, string>, string | undefined][] = [
    ["valid", { traceparent: valid, tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" }, "b7ad6b7169203331"],
    ["uppercase", { traceparent: valid.toUpperCase() }, undefined],
    ["version ff", { traceparent: valid.replace(/^00/, "ff") }, undefined],
    ["zero trace", { traceparent: `00-${"0".repeat(32)}-b7ad6b7169203331-01` }, undefined],
    ["version 00 with more", { traceparent: `${valid}-extra` }, undefined],
    ["huge", { traceparent: `00-${"a".repeat(8000)}` }, undefined],
    ["garbage", { traceparent: "\u00ff\u00fe not a traceparent" }, undefined],
  ];
  for (const [label, headers, parent] of cases) {
    exporter.reset();
    const res = await h.admin.raw<{ me: { role: string } }>("query TraceMe { me { role } }", {}, headers);
    expect(res.data?.me.role, label).toBe("ADMIN");
    const [op] = named("query TraceMe");
    expect(op, label).toBeDefined();
    expect(parentId(op!), label).toBe(parent);
    if (parent) {
      expect(traceOf(op!)).toBe("0af7651916cd43dd8448eb211c80319c");
      expect(op!.spanContext().traceState?.get("rojo")).toBe("00f067aa0ba902b7");
    }
  }
  // A later version is read by its first four fields; a bad tracestate is dropped, the traceparent kept.
  expect(parseTraceparent(`01-${valid.slice(3)}-more`)).toMatchObject({ spanId: "b7ad6b7169203331", isRemote: true });
  expect(parseTraceparent(valid, "bad key=1")?.traceState).toBeUndefined();
  expect(parseTraceparent(valid, Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(","))?.traceState).toBeUndefined();
});

it("over WebSocket, an operation's extensions.traceparent is its parent; a malformed one is ignored", async () => {
  const client = createClient({
    url: h.url.replace(/^http/, "ws"),
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${ADMIN_TOKEN}` },
    retryAttempts: 0,
  });
  const ask = async (name: string, extensions: Record<string, unknown>) => {
    for await (const result of client.iterate({ query: `query ${name} { me { role } }`, extensions })) expect(result.data).toEqual({ me: { role: "ADMIN" } });
  };
  try {
    exporter.reset();
    await ask("OverSocket", { traceparent: "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01" });
    await ask("OverSocketInHeaders", { headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } });
    await ask("OverSocketMalformed", { traceparent: { not: "a string" }, tracestate: 42 });
    expect(parentId(named("query OverSocket")[0]!)).toBe("00f067aa0ba902b7");
    expect(parentId(named("query OverSocketInHeaders")[0]!)).toBe("b7ad6b7169203331");
    expect(named("query OverSocketMalformed")[0]!.parentSpanContext).toBeUndefined();
    expect(traceOf(named("query OverSocket")[0]!)).toBe("0af7651916cd43dd8448eb211c80319c");
  } finally {
    await client.dispose();
  }
});

it("a recovery sweep is a trace: one span, a child per step, the statements under their steps", async () => {
  const co = await createCompany(h, 1);
  const id = await issueFor(co);
  const agent = co.agents[0]!.client;
  const run = (await agent.ok(Ops.StartRunDocument)).startRun;
  await agent.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: id });
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [run.id]);
  exporter.reset();
  const counts = await sweep(h.db.prisma, h.bus);
  expect(counts.timedOutRuns).toBeGreaterThanOrEqual(1);
  const [root] = named("recovery sweep");
  expect(root).toBeDefined();
  expect(root!.parentSpanContext).toBeUndefined();
  expect(root!.attributes["baton.timed_out_runs"]).toBe(counts.timedOutRuns);
  const steps = spans().filter((s) => parentId(s) === root!.spanContext().spanId);
  expect(steps.map((s) => s.name)).toEqual([
    "recovery wake due issues",
    "recovery time out expired runs",
    "recovery time out busy expired runs",
    "recovery recover locks of dead runs",
    "recovery end executions past their limit",
    "recovery escalate exhausted open issues",
  ]);
  const under = (step: string) =>
    spans()
      .filter((s) => parentId(s) === steps.find((x) => x.name === step)!.spanContext().spanId)
      .map((s) => s.name);
  expect(under("recovery time out expired runs")).toContain("TIME_OUT_EXPIRED_RUNS");
  expect(under("recovery time out busy expired runs")).toContain("BUSY_EXPIRED_RUNS");
  expect(under("recovery recover locks of dead runs")).toContain("RECOVER_LOCKS_OF_DEAD_RUNS");
  expect(steps.find((s) => s.name === "recovery recover locks of dead runs")!.attributes["baton.rows"]).toBeGreaterThanOrEqual(1);
});

it("is on only when the standard variables ask for it", () => {
  expect(tracesExporter({})).toBeNull();
  expect(tracesExporter({ OTEL_SERVICE_NAME: "baton" })).toBeNull();
  expect(tracesExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBe("otlp");
  expect(tracesExporter({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" })).toBe("otlp");
  expect(tracesExporter({ OTEL_TRACES_EXPORTER: "otlp" })).toBe("otlp");
  expect(tracesExporter({ OTEL_TRACES_EXPORTER: "console" })).toBe("console");
  expect(tracesExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_TRACES_EXPORTER: "none" })).toBeNull();
  expect(tracesExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" })).toBeNull();
  expect(() => tracesExporter({ OTEL_TRACES_EXPORTER: "zipkin" })).toThrow(/otlp \(over HTTP\) or console/);
  expect(() => tracesExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(/HTTP/);
  // A protocol set for other signals does not stop a process that exports no traces.
  expect(tracesExporter({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toBeNull();
  expect(tracesExporter({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_TRACES_EXPORTER: "console" })).toBe("console");
});

/** A stub OTLP/HTTP receiver: every POST body it got, by path. */
async function startReceiver() {
  const received: { path: string; body: string }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      received.push({ path: req.url ?? "", body: (req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw).toString() });
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, close: () => new Promise((resolve) => server.close(resolve)) };
}

it("sends spans over OTLP/HTTP to the endpoint the standard variable names, and flushes them at SIGTERM", async () => {
  const receiver = await startReceiver();
  const api = await startServerProcess({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "baton-under-test" });
  try {
    const res = await fetch(api.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${api.adminToken}`,
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      },
      body: JSON.stringify({ query: 'mutation Traced { createCompany(name: "traced") { company { id } } }' }),
    });
    expect(res.status).toBe(200);
    // The batch goes out within the SDK's delay (5 s) or at the latest when the process stops.
    const started = performance.now();
    expect(await api.terminate()).toBe(0);
    expect(performance.now() - started).toBeLessThan(10_000);
    const bodies = receiver.received.filter((r) => r.path === "/v1/traces").map((r) => r.body);
    expect(bodies.length).toBeGreaterThanOrEqual(1);
    const all = bodies.join("\n");
    expect(all).toContain('"mutation Traced"');
    expect(all).toContain("baton-under-test");
    expect(all).toContain("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(all).not.toContain(api.adminToken);
    expect(api.output()).toContain('"tracing on"');
  } finally {
    await api.stop();
    await receiver.close();
  }
});

it("the recovery loop exports a span per sweep, with its steps, when the standard variable asks", async () => {
  const receiver = await startReceiver();
  try {
    const child = spawn(process.execPath, ["--import", "tsx", "src/bin/recovery.ts", "--once"], {
      cwd: path.resolve(import.meta.dirname, "../.."),
      env: { ...process.env, DATABASE_URL: h.database.url, REDIS_URL: "", OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code, output).toBe(0);
    const all = receiver.received
      .filter((r) => r.path === "/v1/traces")
      .map((r) => r.body)
      .join("\n");
    for (const name of ["recovery sweep", "recovery time out expired runs", "recovery escalate exhausted open issues", "TIME_OUT_EXPIRED_RUNS"])
      expect(all).toContain(`"${name}"`);
    expect(all).toContain("baton-recovery");
  } finally {
    await receiver.close();
  }
});

it("a collector that refuses connections is logged once, as one line without a stack, however many exports fail", async () => {
  const gone = await startReceiver();
  await gone.close(); // its port now refuses connections
  // Each export gives up after its timeout (1 s here), then the SDK reports it.
  const api = await startServerProcess({ OTEL_EXPORTER_OTLP_ENDPOINT: gone.url, OTEL_BSP_SCHEDULE_DELAY: "50", OTEL_EXPORTER_OTLP_TIMEOUT: "1000" });
  const me = () =>
    fetch(api.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${api.adminToken}` },
      body: JSON.stringify({ query: "query { me { role } }" }),
    });
  try {
    expect((await me()).status).toBe(200);
    await eventually(() => (api.output().includes("tracing: could not export spans") ? true : undefined), "the export problem to be logged");
    // More spans, more failed exports (at the latest the flush at SIGTERM) within the minute: not logged again.
    for (let i = 0; i < 3; i++) expect((await me()).status).toBe(200);
    const started = performance.now();
    expect(await api.terminate()).toBe(0);
    expect(performance.now() - started).toBeLessThan(8_000);
    expect(api.output().match(/could not export spans/g)).toHaveLength(1);
    expect(api.output()).not.toMatch(/^\s+at /m);
  } finally {
    await api.stop();
  }
});

it("a collector that never answers holds a stopping server for the flush timeout (2 s) only", async () => {
  // Accepts every connection and never answers: the exporter's own timeout is 10 s.
  const sockets = new Set<Socket>();
  const silent = createServer(() => {});
  silent.on("connection", (socket) => sockets.add(socket));
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const api = await startServerProcess({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(silent.address() as AddressInfo).port}` });
  try {
    const res = await fetch(api.url, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${api.adminToken}` },
      body: JSON.stringify({ query: "query { me { role } }" }),
    });
    expect(res.status).toBe(200);
    const started = performance.now();
    expect(await api.terminate()).toBe(0);
    const ms = performance.now() - started;
    expect(ms).toBeLessThan(6_000);
    expect(sockets.size).toBeGreaterThanOrEqual(1); // the flush did try
    expect(api.output()).toContain("spans not exported before stopping were dropped");
    expect(api.output()).not.toMatch(/^\s+at /m);
  } finally {
    await api.stop();
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  }
});
