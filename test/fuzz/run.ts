// The fuzzer (issue 12, item 6): requests generated from schema.graphql
// (test/fuzz/generate.ts), valid and malformed, over HTTP and WebSocket,
// as every role, against a real API process.
//
// Usage:
//   npm run fuzz -- --count N --seed S [--url URL --admin-token T] [--concurrency C]
//                   [--only I,J,…] [--show K] [--redis URL] [--lease-seconds L]
//
//   --count N        cases to send (default 1000); case i is generated from (S, i) alone
//   --seed S         the run's seed (default 1); CI runs a fixed one
//   --url URL        an API that is already running (its /graphql URL); needs the admin
//                    token (--admin-token, or BATON_ADMIN_TOKEN). Without --url, the real
//                    API is started as a child process (src/bin/server.ts) over a fresh
//                    test database cloned from the migrated template (as `npm test` does;
//                    TEST_DATABASE_URL picks the PostgreSQL server), and stopped at the end.
//   --only I,J       send only these cases (after seeding a fresh fixture): how a case
//                    printed as violating is run again
//   --concurrency C  requests in flight at once (default 6)
//   --show K         violating cases printed in full (default 5)
//   --redis URL      REDIS_URL for the API started here (default: none, in-process events)
//   --lease-seconds  BATON_RUN_LEASE_SECONDS for the API started here (default 15: runs that
//                    the fuzz does not heartbeat die during the run, so adoption is exercised)
//
// About two thirds of the cases go over HTTP (POST /graphql; some GET, some
// read as SSE), a fifth over graphql-ws (subscriptions, queries and
// mutations), and the rest are raw: HTTP requests that are not GraphQL
// requests, and WebSocket frames that break the graphql-ws protocol.
//
// Before the cases, a fixture is seeded through GraphQL: two companies, agents,
// live and finished runs, and issues in every state. After them: the server
// must still be running, answer /healthz, the history checker must accept
// both companies' ledgers (support/history.ts), and lockAudit must report
// doubleClaims = 0 and halfReleasedLocks = 0 for both companies.
//
// A violation is: an HTTP 5xx; an answer that is not JSON; a GraphQL error
// whose extensions.code is INTERNAL_SERVER_ERROR or missing; an error that
// shows a stack trace, a file path or the database's internals; a Problem
// member without a message; data for a role that may not have it, or from
// another company; a valid key answered UNAUTHENTICATED; no answer within the
// deadline; a WebSocket closed by the server as failing (1011, 4500) or
// dropped; an error line in the server's log, or a line there that is not a
// JSON log line (a library's console.error with its stack); the server
// process exiting.
// It prints a summary (outcomes, error codes, Problems seen) and exits 1 on
// any violation, printing the first few violating cases with the command that
// sends them again.
//
// test/fuzz/fuzz.test.ts runs the same engine (runFuzz) with a fixed seed.
import { performance } from "node:perf_hooks";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { Kind, parse, print } from "graphql";
import type { DocumentNode, SelectionSetNode } from "graphql";
import { createClient } from "graphql-ws";
import WebSocket from "ws";
import { migrate } from "../../src/db/migrate.js";
import { ensureLedgerPartitions } from "../../src/retention/partitions.js";
import * as Ops from "../generated/graphql.js";
import { databaseUrl, templateName, withAdmin } from "../helpers/db.js";
import { checkHistory } from "../../support/history.js";
import { startServerProcess } from "../helpers/serverProcess.js";
import type { ServerProcess } from "../helpers/serverProcess.js";
import { createGenerator, describeCase, FIELD_ROLES, generateCase, isAnonymous, ISSUE_STATES, roleCompany } from "./generate.js";
import type { AgentFixture, CompanyFixture, Fixture, FuzzCase, Generator, IssueState } from "./generate.js";

// ---------------------------------------------------------------- options and report

export interface FuzzOptions {
  count: number;
  seed: number;
  /** An API already running (its /graphql URL); otherwise one is started as a child process. */
  url?: string;
  /** The admin token of `url`. */
  adminToken?: string;
  concurrency?: number;
  /** Only these case indices. */
  only?: number[];
  redisUrl?: string;
  leaseSeconds?: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export interface Violation {
  index: number | null;
  kind: string;
  detail: string;
  /** describeCase(), for cases. */
  label?: string;
}

export interface ViolatingCase {
  c: FuzzCase;
  violations: Violation[];
  /** The start of what the server answered. */
  answer: string;
}

export interface FuzzReport {
  seed: number;
  count: number;
  sent: number;
  durationMs: number;
  /** How each case ended, e.g. "http 200 data", "ws errors", "ws-raw closed 4400". */
  outcomes: Record<string, number>;
  /** GraphQL error codes seen. */
  codes: Record<string, number>;
  /** __typename of every union result seen (Problems and successes). */
  typenames: Record<string, number>;
  /** Root fields asked for, by transport. */
  fields: Record<string, number>;
  roles: Record<string, number>;
  violations: Violation[];
  /** The violating cases, in index order, with what they sent and got. */
  violatingCases: ViolatingCase[];
  lockAudit: Record<string, { doubleClaims: number; halfReleasedLocks: number; locksHeldByDeadRuns: number; unescalatedExhausted: number }>;
  latencyMs: { p50: number; p99: number; max: number };
}

/** Deadline for an answer to a query or mutation. */
const ANSWER_DEADLINE_MS = 15_000;
/** How long a subscription that is open is watched for a first event. */
const SUBSCRIPTION_WINDOW_MS = 150;
/** How long a raw WebSocket conversation is watched after its last frame. */
const RAW_WS_WINDOW_MS = 250;
/** WebSockets and event streams without a valid key open at once (the server allows 10 per address). */
const ANONYMOUS_STREAMS = 4;

// ---------------------------------------------------------------- GraphQL for the fixture

interface GraphQLResponse<T> {
  data?: T | null;
  errors?: { message: string; extensions?: { code?: string } }[];
}

async function request<R, V>(url: string, token: string, doc: TypedDocumentNode<R, V>, variables?: V): Promise<R> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: print(doc as DocumentNode), variables }),
    signal: AbortSignal.timeout(ANSWER_DEADLINE_MS),
  });
  const body = (await res.json()) as GraphQLResponse<R>;
  if (body.errors?.length || !body.data) throw new Error(`fixture: ${JSON.stringify(body.errors ?? body)}`);
  return body.data;
}

function expectType<T extends { __typename?: string }>(value: T, typename: string, what: string): T {
  if (value.__typename !== typename) throw new Error(`fixture: ${what} answered ${JSON.stringify(value)}`);
  return value;
}

/** One company: agents with live and finished runs, and issues in every state (held by agent 0's first run). */
async function seedCompany(url: string, adminToken: string, name: string, agentCount: number): Promise<CompanyFixture> {
  const { createCompany } = await request(url, adminToken, Ops.CreateCompanyDocument, { name });
  const board = createCompany.boardKey;
  const agents: AgentFixture[] = [];
  for (let i = 0; i < agentCount; i++) {
    const { createAgent } = await request(url, board, Ops.CreateAgentDocument, { name: `Agent ${i + 1}` });
    const key = createAgent.apiKey;
    const liveRuns: string[] = [];
    for (let r = 0; r < 6; r++) liveRuns.push((await request(url, key, Ops.StartRunDocument)).startRun.id);
    const endedRuns: string[] = [];
    for (const status of ["SUCCEEDED", "CANCELLED"] as const) {
      const run = (await request(url, key, Ops.StartRunDocument)).startRun.id;
      expectType((await request(url, key, Ops.FinishRunDocument, { runId: run, status })).finishRun, "RunUpdated", "finishRun");
      endedRuns.push(run);
    }
    agents.push({ id: createAgent.agent.id, key, liveRuns, endedRuns });
  }
  const [a0, a1] = [agents[0]!, agents[1] ?? agents[0]!];
  const plan: { state: IssueState; input: Ops.CreateIssueInput }[] = [];
  const priorities = ["CRITICAL", "HIGH", "MEDIUM", "LOW"] as const;
  for (let i = 0; i < 16; i++) {
    plan.push({ state: "open", input: { title: `open ${i}`, priority: priorities[i % 4], assigneeAgentId: [a0.id, a1.id, null, a0.id][i % 4] } });
  }
  for (let i = 0; i < 2; i++) plan.push({ state: "backlog", input: { title: `backlog ${i}`, status: "BACKLOG", assigneeAgentId: a0.id } });
  const held = ["claimed", "inProgress"] as const;
  for (const state of [...held, ...held, ...held, ...held, ...held, "done", "blocked", "cancelled"] as const) {
    plan.push({ state, input: { title: state, assigneeAgentId: a0.id } });
  }
  plan.push({ state: "escalated", input: { title: "escalated", assigneeAgentId: a0.id, maxAttempts: 1 } });
  const { createIssues } = await request(url, board, Ops.CreateIssuesDocument, { inputs: plan.map((p) => p.input) });
  const issues = Object.fromEntries(ISSUE_STATES.map((s) => [s, [] as string[]])) as Record<IssueState, string[]>;
  const runId = a0.liveRuns[0]!;
  for (const [i, { state }] of plan.entries()) {
    const issueId = createIssues[i]!.id;
    issues[state].push(issueId);
    if (state === "open" || state === "backlog") continue;
    if (state === "cancelled") {
      expectType(
        (await request(url, board, Ops.UpdateIssueDocument, { id: issueId, input: { status: "CANCELLED" } })).updateIssue,
        "IssueUpdated",
        "updateIssue",
      );
      continue;
    }
    expectType((await request(url, a0.key, Ops.ClaimIssueDocument, { runId, issueId })).claimIssue, "IssueClaimed", "claimIssue");
    if (state === "claimed") continue;
    if (state !== "blocked") {
      expectType((await request(url, a0.key, Ops.AcquireExecutionDocument, { runId, issueId })).acquireExecution, "ExecutionAcquired", "acquireExecution");
    }
    if (state === "inProgress") continue;
    const outcome = state === "done" ? "DONE" : state === "blocked" ? "BLOCKED" : "FAILED";
    const released = expectType(
      (await request(url, a0.key, Ops.ReleaseIssueDocument, { runId, issueId, outcome })).releaseIssue,
      "IssueReleased",
      "releaseIssue",
    );
    const status = released.__typename === "IssueReleased" ? released.issue.status : null;
    const want = state === "done" ? "DONE" : state === "blocked" ? "BLOCKED" : "ESCALATED";
    if (status !== want) throw new Error(`fixture: ${state} issue is ${status}`);
  }
  const events = await request(url, board, Ops.LockEventsDocument, { companyId: createCompany.company.id, first: 100 });
  const page = await request(url, board, Ops.IssuesDocument, { companyId: createCompany.company.id, first: 1 });
  return {
    id: createCompany.company.id,
    boardKey: board,
    agents,
    issues,
    seqs: events.lockEvents.map((e) => e.seq),
    cursor: page.issues.pageInfo.endCursor ?? null,
  };
}

export async function seedFixture(url: string, adminToken: string): Promise<Fixture> {
  const A = await seedCompany(url, adminToken, "Fuzz A", 3);
  const B = await seedCompany(url, adminToken, "Fuzz B", 2);
  return { adminToken, A, B };
}

/** The migrated template the test databases are cloned from: made if missing (as test/helpers/globalSetup.ts does), never touched if there. */
export async function ensureTemplate(): Promise<void> {
  const template = await templateName();
  const created = await withAdmin(async (client) => {
    const exists = await client.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [template]);
    if (exists.rowCount !== 0) return false;
    await client.query(`CREATE DATABASE "${template}"`);
    return true;
  });
  if (created) {
    await migrate(databaseUrl(template));
    await ensureLedgerPartitions(databaseUrl(template));
  }
}

// ---------------------------------------------------------------- checking answers

const STACK = /\n\s+at |\bat (?:async )?[\w$.<>]+ \([^()]*:\d+:\d+\)|\bat (?:file|node):/;
const FILE_PATH = /(?:^|[\s"'(=])\/(?:work|home|root|usr|tmp|opt|app|srv|var|etc)\/|node_modules|file:\/\/|\b[\w-]+\.(?:ts|js|mjs|cjs):\d+/;
const INTERNALS = /prisma|postgres|SQLSTATE|syntax error at or near|duplicate key value|violates [\w ]*constraint|relation "[\w]+"|ECONNREFUSED/i;
const UUID_LIKE = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

export class Check {
  readonly violations: Violation[] = [];
  readonly codes: string[] = [];
  readonly typenames: string[] = [];
  private responseKeys: Map<string, string> | null | undefined;

  constructor(
    readonly c: FuzzCase,
    readonly gen: Generator,
  ) {}

  fail(kind: string, detail: string) {
    this.violations.push({ index: this.c.index, kind, detail: detail.slice(0, 500), label: describeCase(this.c) });
  }

  /** An ExecutionResult as any transport delivers it. */
  result(value: unknown, where: string) {
    if (!value || typeof value !== "object" || Array.isArray(value)) return this.fail("malformed answer", `${where}: ${JSON.stringify(value)?.slice(0, 200)}`);
    const { data, errors } = value as { data?: unknown; errors?: unknown };
    if (data === undefined && errors === undefined) this.fail("malformed answer", `${where}: neither data nor errors`);
    if (errors !== undefined) this.errors(errors, where);
    if (data !== undefined && data !== null) this.data(data);
  }

  /** A list of GraphQL errors (an answer's, or a graphql-ws `error` message's). */
  errors(errors: unknown, where: string) {
    if (!Array.isArray(errors) || errors.length === 0) return this.fail("malformed answer", `${where}: errors is ${JSON.stringify(errors)?.slice(0, 200)}`);
    for (const e of errors) this.error(e, where);
  }

  error(e: unknown, where: string) {
    if (!e || typeof e !== "object") return this.fail("malformed answer", `${where}: an error that is ${JSON.stringify(e)}`);
    const { message, extensions } = e as { message?: unknown; extensions?: Record<string, unknown> };
    const text = JSON.stringify(e);
    if (typeof message !== "string") this.fail("malformed answer", `${where}: an error without a message: ${text.slice(0, 200)}`);
    const code = extensions?.code;
    if (typeof code !== "string") this.fail("missing code", `${where}: ${String(message).slice(0, 300)}`);
    else if (code === "INTERNAL_SERVER_ERROR") this.fail("INTERNAL_SERVER_ERROR", `${where}: ${String(message)}`);
    else this.codes.push(code);
    if (STACK.test(text)) this.fail("stack trace", `${where}: ${text.slice(0, 300)}`);
    if (FILE_PATH.test(text)) this.fail("file path", `${where}: ${text.slice(0, 300)}`);
    if (typeof message === "string" && INTERNALS.test(message)) this.fail("internals shown", `${where}: ${message.slice(0, 300)}`);
    for (const key of ["stack", "exception", "originalError", "stacktrace"]) {
      if (extensions && key in extensions) this.fail("internals shown", `${where}: extensions.${key}`);
    }
    if (code === "UNAUTHENTICATED" && !isAnonymous(this.c.role))
      this.fail("valid key refused", `${where}: answered UNAUTHENTICATED (${String(message)}) to a valid key, ${this.c.role}'s`);
  }

  data(data: unknown) {
    const company = roleCompany(this.c.role, this.gen.fixture);
    const walk = (value: unknown): void => {
      if (Array.isArray(value)) {
        for (const item of value) walk(item);
        return;
      }
      if (!value || typeof value !== "object") return;
      const obj = value as Record<string, unknown>;
      const typename = obj.__typename;
      if (typeof typename === "string") {
        this.typenames.push(typename);
        if (this.gen.problemTypes.has(typename) && (typeof obj.message !== "string" || obj.message === "")) {
          this.fail("Problem without message", `${typename}: ${JSON.stringify(obj).slice(0, 200)}`);
        }
      }
      if (company && typeof obj.companyId === "string" && obj.companyId !== company) {
        this.fail("another company's data", `${this.c.role} got ${JSON.stringify(obj).slice(0, 200)}`);
      }
      for (const v of Object.values(obj)) walk(v);
    };
    walk(data);
    // Root fields with data: may this role have it, and is it its own company's?
    if (typeof data !== "object" || Array.isArray(data)) return;
    for (const [key, value] of Object.entries(data as Record<string, unknown>)) {
      if (value === null || value === undefined) continue;
      const field = this.fieldOf(key);
      if (!field || field.startsWith("__")) continue;
      const allowed = FIELD_ROLES[field];
      if (allowed && !allowed.includes(this.c.role))
        this.fail("data for a role that may not have it", `${this.c.role} got ${field}: ${JSON.stringify(value).slice(0, 200)}`);
      if (field === "company" && company && typeof (value as { id?: unknown }).id === "string" && (value as { id: string }).id !== company) {
        this.fail("another company's data", `${this.c.role} read company ${JSON.stringify(value)}`);
      }
    }
  }

  /** The root field behind a response key (aliases and fragments resolved), from the document sent. */
  private fieldOf(key: string): string | null {
    if (this.responseKeys === undefined) {
      this.responseKeys = null;
      try {
        const doc = parse(this.c.request?.query ?? "");
        const fragments = new Map(doc.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])));
        const ops = doc.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
        const op = ops.find((o) => o.name?.value === this.c.request?.operationName) ?? ops[0];
        const keys = new Map<string, string>();
        const seen = new Set<string>();
        const collect = (set: SelectionSetNode) => {
          for (const sel of set.selections) {
            if (sel.kind === Kind.FIELD) keys.set(sel.alias?.value ?? sel.name.value, sel.name.value);
            else if (sel.kind === Kind.INLINE_FRAGMENT) collect(sel.selectionSet);
            else if (!seen.has(sel.name.value)) {
              seen.add(sel.name.value);
              const fragment = fragments.get(sel.name.value);
              if (fragment) collect(fragment.selectionSet);
            }
          }
        };
        if (op) collect(op.selectionSet);
        this.responseKeys = keys;
      } catch {
        // A document the server answered with data can be parsed; one that cannot has no root fields to check.
      }
    }
    return this.responseKeys?.get(key) ?? null;
  }
}

// ---------------------------------------------------------------- transports

interface Sent {
  outcome: string;
  answer: string;
}

class Semaphore {
  private waiting: (() => void)[] = [];
  constructor(private free: number) {}
  async take(): Promise<() => void> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}

/** Resolves with `value` when `promise` does not settle within `ms` (the timer is always cleared). */
async function within<T, U>(promise: Promise<T>, ms: number, value: U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<U>((resolve) => (timer = setTimeout(() => resolve(value), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

function outcomeOf(value: unknown): string {
  if (!value || typeof value !== "object") return "other";
  const { data, errors } = value as { data?: unknown; errors?: { extensions?: { code?: unknown } }[] };
  if (!errors) return "data";
  const code = Array.isArray(errors) ? String(errors[0]?.extensions?.code ?? "no code") : "bad errors";
  return data !== undefined && data !== null ? `partial ${code}` : `errors ${code}`;
}

async function readEventStream(res: Response, check: Check, c: FuzzCase): Promise<Sent> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const subscription = c.operationType === "subscription";
  const deadline = performance.now() + (subscription ? SUBSCRIPTION_WINDOW_MS : ANSWER_DEADLINE_MS);
  let buffer = "";
  let first: unknown;
  let events = 0;
  let done = false;
  try {
    while (!done) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      const chunk = await within(reader.read(), left, null);
      if (chunk === null || chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let event = "message";
        const data: string[] = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
        }
        if (event === "complete") {
          done = true;
          break;
        }
        if (data.length === 0) continue; // a keep-alive comment
        let parsed: unknown;
        try {
          parsed = JSON.parse(data.join("\n"));
        } catch {
          check.fail("not JSON", `event stream data: ${data.join("\n").slice(0, 200)}`);
          continue;
        }
        events++;
        first ??= parsed;
        check.result(parsed, "sse");
        if (subscription) done = true;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  if (!subscription && !done && events === 0) check.fail("no answer", `no event within ${ANSWER_DEADLINE_MS} ms`);
  return { outcome: events > 0 ? `sse ${outcomeOf(first)}` : done ? "sse complete" : "sse open", answer: JSON.stringify(first ?? null) };
}

function multipartResults(text: string, contentType: string): unknown[] {
  const boundary = /boundary="?([^";]+)"?/.exec(contentType)?.[1] ?? "-";
  const out: unknown[] = [];
  for (const part of text.split(`--${boundary}`)) {
    const body = part.split("\r\n\r\n").slice(1).join("\r\n\r\n").trim();
    if (body) out.push(JSON.parse(body));
  }
  return out;
}

async function sendHttp(origin: string, c: FuzzCase, check: Check): Promise<Sent> {
  const shape = c.http!;
  const headers: Record<string, string> = {};
  if (c.authorization !== null) headers.authorization = c.authorization;
  if (shape.accept !== null) headers.accept = shape.accept;
  if (shape.contentType !== null) headers["content-type"] = shape.contentType;
  const get = shape.method === "GET";
  const target = `${origin}${shape.path}${get && shape.body ? `${shape.path.includes("?") ? "&" : "?"}${shape.body}` : ""}`;
  const body = get ? undefined : (shape.body ?? JSON.stringify(c.request));
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ANSWER_DEADLINE_MS);
  try {
    let res: Response;
    try {
      res = await fetch(target, { method: shape.method, headers, body, signal: controller.signal, redirect: "manual" });
    } catch (err) {
      check.fail("no answer", `${shape.method} ${shape.path}: ${String((err as Error).cause ?? err)}`);
      return { outcome: "http no answer", answer: String(err) };
    }
    const status = res.status;
    if (status >= 500) check.fail("http 5xx", `status ${status}`);
    const contentType = res.headers.get("content-type") ?? "";
    if (contentType.includes("text/event-stream")) {
      const sent = await readEventStream(res, check, c);
      return { ...sent, outcome: `http ${status} ${sent.outcome}` };
    }
    const text = await res.text();
    const answer = `${status} ${contentType} ${text.slice(0, 600)}`;
    if (contentType.includes("multipart/mixed")) {
      try {
        for (const part of multipartResults(text, contentType)) check.result(part, "multipart");
      } catch {
        check.fail("not JSON", `multipart answer: ${text.slice(0, 200)}`);
      }
      return { outcome: `http ${status} multipart`, answer };
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      check.fail("not JSON", `${shape.method} answered ${status} ${contentType || "(no content-type)"} ${JSON.stringify(text.slice(0, 100))}`);
      return { outcome: `http ${status} not JSON`, answer };
    }
    if (STACK.test(text)) check.fail("stack trace", text.slice(0, 300));
    check.result(parsed, `http ${status}`);
    return { outcome: `http ${status} ${outcomeOf(parsed)}`, answer };
  } finally {
    clearTimeout(timer);
  }
}

/** Close codes a server may use to refuse (limits, protocol errors): an answer, not a failure. */
function closeIsRefusal(code: number): boolean {
  return code === 1000 || code === 1008 || code === 1009 || (code >= 4400 && code < 4500);
}

async function sendWs(wsUrl: string, c: FuzzCase, check: Check): Promise<Sent> {
  const subscription = c.operationType === "subscription";
  let closed: { code: number; reason: string } | null = null;
  let disposing = false;
  const client = createClient({
    url: wsUrl,
    webSocketImpl: WebSocket,
    connectionParams: c.connectionParams ?? (c.authorization === null ? {} : { authorization: c.authorization }),
    retryAttempts: 0,
    lazy: true,
    on: {
      closed: (event) => {
        const e = event as { code?: number; reason?: string };
        if (!disposing) closed = { code: e.code ?? 0, reason: String(e.reason ?? "") };
      },
    },
  });
  const results: unknown[] = [];
  const ended = await new Promise<string>((resolve) => {
    let finished = false;
    let unsubscribe = () => {};
    const finish = (how: string) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      resolve(how);
      queueMicrotask(() => unsubscribe());
    };
    const timer = setTimeout(() => finish(subscription ? "open" : "timeout"), subscription ? SUBSCRIPTION_WINDOW_MS : ANSWER_DEADLINE_MS);
    unsubscribe = client.subscribe(c.request as { query: string }, {
      next: (value) => {
        results.push(value);
        check.result(value, "ws next");
        if (subscription) finish("event");
      },
      error: (err: unknown) => {
        results.push(
          Array.isArray(err) ? { error: err } : { closed: err && typeof err === "object" && "code" in err ? (err as { code: unknown }).code : String(err) },
        );
        if (Array.isArray(err)) {
          check.errors(err, "ws error");
          finish(`error ${String((err[0] as { extensions?: { code?: unknown } } | undefined)?.extensions?.code ?? "no code")}`);
        } else if (err && typeof err === "object" && "code" in err && typeof (err as { code: unknown }).code === "number") {
          const { code, reason } = err as { code: number; reason?: string };
          if (!closeIsRefusal(code)) check.fail("socket failed", `closed ${code} ${reason ?? ""}`);
          finish(`closed ${code}`);
        } else {
          check.fail("socket failed", String((err as Error)?.message ?? err));
          finish("socket error");
        }
      },
      complete: () => finish("complete"),
    });
  });
  disposing = true;
  await Promise.resolve()
    .then(() => client.dispose())
    .catch(() => {});
  if (ended === "timeout") check.fail("no answer", `no answer over WebSocket within ${ANSWER_DEADLINE_MS} ms`);
  const close = closed as { code: number; reason: string } | null;
  if (close && !closeIsRefusal(close.code)) check.fail("socket failed", `closed ${close.code} ${close.reason}`);
  const outcome = ended === "complete" || ended === "event" ? `ws ${outcomeOf(results[0])}` : `ws ${ended}`;
  return { outcome, answer: JSON.stringify(results).slice(0, 600) || ended };
}

async function sendRawWs(wsUrl: string, c: FuzzCase, check: Check): Promise<Sent> {
  const protocols = c.subprotocol ? [c.subprotocol] : [];
  const socket = new WebSocket(wsUrl, protocols);
  const received: string[] = [];
  let closeCode: number | null = null;
  let closeReason = "";
  let upgradeStatus: number | null = null;
  let clientError: string | null = null;
  const done = new Promise<void>((resolve) => {
    socket.on("close", (code, reason) => {
      closeCode = code;
      closeReason = String(reason);
      resolve();
    });
    socket.on("unexpected-response", (_req, res) => {
      upgradeStatus = res.statusCode ?? 0;
      res.resume();
      socket.terminate();
      resolve();
    });
    socket.on("error", (err) => {
      clientError = err.message;
      resolve();
    });
  });
  socket.on("message", (data, isBinary) => {
    const text = isBinary ? `(binary ${String(data).length})` : String(data);
    received.push(text);
    let msg: { type?: string; payload?: unknown };
    try {
      msg = JSON.parse(text) as typeof msg;
    } catch {
      return check.fail("not JSON", `a WebSocket message: ${text.slice(0, 200)}`);
    }
    if (msg.type === "next") check.result(msg.payload, "ws-raw next");
    else if (msg.type === "error") check.errors(msg.payload, "ws-raw error");
  });
  const opened = await within(
    new Promise<boolean>((resolve) => {
      socket.once("open", () => resolve(true));
      void done.then(() => resolve(false));
    }),
    ANSWER_DEADLINE_MS,
    false,
  );
  if (opened) {
    for (const frame of c.frames ?? []) {
      if (socket.readyState !== WebSocket.OPEN) break;
      if (typeof frame === "string") socket.send(frame);
      else socket.send(Buffer.from(frame.binary), { binary: true });
    }
    await within(done, RAW_WS_WINDOW_MS, undefined);
  }
  const serverClosed = closeCode as number | null;
  if (socket.readyState !== WebSocket.CLOSED) {
    socket.terminate();
    await within(done, 1000, undefined);
  }
  const status = upgradeStatus as number | null;
  const error = clientError as string | null;
  let outcome: string;
  if (status !== null) {
    if (status >= 500) check.fail("http 5xx", `the upgrade answered ${status}`);
    outcome = `ws-raw upgrade ${status}`;
  } else if (serverClosed !== null) {
    // 1006: the connection dropped without a close frame (a crash, or a refused subprotocol, told apart below).
    if (!closeIsRefusal(serverClosed) && !(serverClosed === 1006 && error && /subprotocol/i.test(error))) {
      check.fail("socket failed", `closed ${serverClosed} ${JSON.stringify(closeReason)}${error ? ` (${error})` : ""} after ${received.length} messages`);
    }
    outcome = `ws-raw closed ${serverClosed}`;
  } else if (!opened) {
    if (!(error && /subprotocol/i.test(error))) check.fail("socket failed", `could not open: ${error ?? "no answer"}`);
    outcome = "ws-raw not opened";
  } else {
    outcome = `ws-raw open (${received.length} messages)`;
  }
  return { outcome, answer: received.join("\n").slice(0, 600) };
}

// ---------------------------------------------------------------- the engine

function count(map: Record<string, number>, key: string) {
  map[key] = (map[key] ?? 0) + 1;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** What the server printed at start (stdout); everything else must be a JSON log line. */
const BANNER = /^(?:Baton API|GraphiQL|Board|Admin token)\s|^\s*$|^\s+\(generated for this run/;

/** The server's error log lines (JSON lines with level "error"), and lines that are not JSON at all (a library's console.error, a stack). */
function loggedErrors(output: string): Violation[] {
  const found: Violation[] = [];
  const notJson: string[] = [];
  for (const line of output.split("\n")) {
    if (!line.startsWith("{")) {
      if (!BANNER.test(line)) notJson.push(line);
      continue;
    }
    if (!line.includes('"level":"error"')) continue;
    try {
      const entry = JSON.parse(line) as { msg?: string; error?: string; errorName?: string; stack?: string; path?: string };
      const frames = (entry.stack ?? "")
        .split("\n")
        .slice(1, 3)
        .map((s) => s.trim());
      const detail = `${entry.msg}: ${entry.errorName ?? ""} ${entry.error ?? ""}${entry.path ? ` (at ${entry.path})` : ""} ${frames.join(" | ")}`;
      found.push({ index: null, kind: "server logged an error", detail: detail.trim() });
    } catch {
      notJson.push(line);
    }
  }
  if (notJson.length > 0) {
    const stackLines = notJson.filter((l) => /^\s+at /.test(l)).length;
    // The distinct lines that start something (not a frame, not an object's inside).
    const first = [...new Set(notJson.filter((l) => !/^\s/.test(l) && !/^[}\]]/.test(l)).map((l) => l.slice(0, 200)))].slice(0, 5);
    found.push({
      index: null,
      kind: "server log not JSON",
      detail: `${notJson.length} lines that are not JSON log lines (${stackLines} of them stack frames), starting: ${first.map((l) => JSON.stringify(l)).join(" | ")}`,
    });
  }
  return found;
}

/** The API process a run has started, for the CLI to stop on Ctrl-C. */
let running: ServerProcess | null = null;

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const log = options.log ?? (() => {});
  const started = performance.now();
  let server: ServerProcess | null = null;
  let url = options.url;
  let adminToken = options.adminToken;
  if (!url) {
    await ensureTemplate();
    server = await startServerProcess({
      REDIS_URL: options.redisUrl ?? "",
      BATON_RUN_LEASE_SECONDS: String(options.leaseSeconds ?? 15),
    });
    running = server;
    url = server.url;
    adminToken = server.adminToken;
    log(`started the API at ${url}`);
  }
  if (!adminToken) throw new Error("the admin token of --url is needed: --admin-token or BATON_ADMIN_TOKEN");
  const origin = new URL(url).origin;
  const wsUrl = url.replace(/^http/, "ws");
  const report: FuzzReport = {
    seed: options.seed,
    count: options.count,
    sent: 0,
    durationMs: 0,
    outcomes: {},
    codes: {},
    typenames: {},
    fields: {},
    roles: {},
    violations: [],
    violatingCases: [],
    lockAudit: {},
    latencyMs: { p50: 0, p99: 0, max: 0 },
  };
  try {
    const fixture = await seedFixture(url, adminToken);
    log(`seeded companies ${fixture.A.id} and ${fixture.B.id}`);
    const gen = createGenerator(fixture);
    const indices = options.only ?? Array.from({ length: options.count }, (_, i) => i);
    const anonymousStreams = new Semaphore(ANONYMOUS_STREAMS);
    const latencies: number[] = [];
    let next = 0;
    let stop = false;
    let unanswered = 0;

    const one = async (index: number) => {
      const c = generateCase(gen, options.seed, index);
      const check = new Check(c, gen);
      const holdsStream =
        c.transport === "http"
          ? isAnonymous(c.role) && (c.http?.accept ?? "").includes("event-stream")
          : c.transport === "ws-raw" ||
            c.connectionParams !== undefined ||
            c.authorization === null ||
            isAnonymous(c.role) ||
            c.notes.some((n) => n.startsWith("operation-authorization"));
      const release = holdsStream ? await anonymousStreams.take() : () => {};
      const t0 = performance.now();
      let sent: Sent;
      try {
        sent =
          c.transport === "http" ? await sendHttp(origin, c, check) : c.transport === "ws" ? await sendWs(wsUrl, c, check) : await sendRawWs(wsUrl, c, check);
      } catch (err) {
        check.fail("fuzzer failed", String((err as Error)?.stack ?? err));
        sent = { outcome: "fuzzer failed", answer: "" };
      } finally {
        release();
      }
      latencies.push(performance.now() - t0);
      report.sent++;
      count(report.outcomes, sent.outcome);
      count(report.roles, c.role);
      for (const f of c.fields) count(report.fields, `${c.operationType} ${f}`);
      for (const code of check.codes) count(report.codes, code);
      for (const t of check.typenames) count(report.typenames, t);
      if (check.violations.length > 0) {
        report.violations.push(...check.violations);
        report.violatingCases.push({ c, violations: check.violations, answer: sent.answer });
      }
      unanswered = check.violations.some((v) => v.kind === "no answer") ? unanswered + 1 : 0;
      if (server && !server.alive()) {
        report.violations.push({
          index,
          kind: "server exited",
          detail: `the API process exited during or before case #${index}: ${server.output().slice(-800)}`,
        });
        stop = true;
      }
      if (!server && unanswered >= 20) {
        report.violations.push({ index, kind: "server gone", detail: "20 requests in a row got no answer; stopping" });
        stop = true;
      }
      if (report.sent % 500 === 0) log(`${report.sent}/${indices.length} sent, ${report.violations.length} violations`);
    };

    const worker = async () => {
      while (!stop && next < indices.length) await one(indices[next++]!);
    };
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 6) }, worker));
    report.violatingCases.sort((a, b) => a.c.index - b.c.index);
    const sorted = [...latencies].sort((a, b) => a - b);
    report.latencyMs = { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? 0 };

    // After the cases: alive, healthy, and no lock was ever held twice or half released.
    if (server && !server.alive() && !report.violations.some((v) => v.kind === "server exited")) {
      report.violations.push({ index: null, kind: "server exited", detail: server.output().slice(-800) });
    }
    try {
      const health = await fetch(`${origin}/healthz`, { signal: AbortSignal.timeout(5000) });
      const body = await health.text();
      if (health.status !== 200 || !/"ok"/.test(body))
        report.violations.push({ index: null, kind: "healthz", detail: `${health.status} ${body.slice(0, 200)}` });
    } catch (err) {
      report.violations.push({ index: null, kind: "healthz", detail: `no answer: ${String(err)}` });
    }
    for (const [name, co] of [
      ["A", fixture.A],
      ["B", fixture.B],
    ] as const) {
      try {
        const { lockAudit } = await request(url, adminToken, Ops.LockAuditDocument, { companyId: co.id });
        report.lockAudit[name] = {
          doubleClaims: lockAudit.doubleClaims,
          halfReleasedLocks: lockAudit.halfReleasedLocks,
          locksHeldByDeadRuns: lockAudit.locksHeldByDeadRuns,
          unescalatedExhausted: lockAudit.unescalatedExhausted,
        };
        if (lockAudit.doubleClaims !== 0 || lockAudit.halfReleasedLocks !== 0) {
          report.violations.push({ index: null, kind: "lockAudit", detail: `company ${name}: ${JSON.stringify(lockAudit)}` });
        }
      } catch (err) {
        report.violations.push({ index: null, kind: "lockAudit", detail: `company ${name}: ${String(err)}` });
      }
      // The history checker over everything the fuzz did to the company (when this run owns the database).
      if (server) {
        for (const violation of await checkHistory(server.database.url, co.id)) {
          report.violations.push({ index: null, kind: "history", detail: `company ${name}: ${violation}` });
        }
      }
    }
    if (server) {
      report.violations.push(...loggedErrors(server.output()));
    }
  } finally {
    await server?.stop();
    if (running === server) running = null;
    report.durationMs = performance.now() - started;
  }
  return report;
}

// ---------------------------------------------------------------- the report

/** A violation's detail with ids and numbers taken out: violations with one cause share it. */
export function signature(v: Violation): string {
  const detail = v.detail
    .replace(UUID_LIKE, "<id>")
    .replace(/\\?"(?:[^"\\]|\\.)*\\?"/g, "…")
    .replace(/got invalid value .*/, "got invalid value …")
    .replace(/(Syntax Error|unexpected error): .*/, "$1: …")
    .replace(/\d+/g, "N")
    .split(";")[0]!;
  return `${v.kind}: ${detail.slice(0, 100)}`;
}

function table(map: Record<string, number>, limit = 40): string {
  const rows = Object.entries(map).sort((a, b) => b[1] - a[1]);
  const shown = rows.slice(0, limit).map(([k, n]) => `  ${String(n).padStart(6)}  ${k}`);
  if (rows.length > limit) shown.push(`  … ${rows.length - limit} more`);
  return shown.join("\n");
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length} chars)` : text;
}

/** How to send a case again by hand: transport, token and body. */
export function describeRequest(c: FuzzCase): string {
  const lines: string[] = [];
  const auth = c.authorization === null ? "(none)" : clip(JSON.stringify(c.authorization), 120);
  if (c.transport === "http") {
    const h = c.http!;
    lines.push(`${h.method} ${h.path}  authorization: ${auth}  accept: ${h.accept ?? "(none)"}  content-type: ${h.contentType ?? "(none)"}`);
    lines.push(clip(h.body ?? JSON.stringify(c.request), 2000));
  } else if (c.transport === "ws") {
    lines.push(`graphql-ws  connectionParams: ${clip(JSON.stringify(c.connectionParams ?? { authorization: c.authorization }), 200)}`);
    lines.push(`subscribe ${clip(JSON.stringify(c.request), 2000)}`);
  } else {
    lines.push(`WebSocket, subprotocol ${JSON.stringify(c.subprotocol)}, frames:`);
    for (const f of c.frames ?? []) lines.push(`  ${clip(typeof f === "string" ? f : `(binary) ${f.binary}`, 400)}`);
  }
  return lines.join("\n");
}

export function formatReport(report: FuzzReport, show = 5): string {
  const out: string[] = [];
  out.push(
    `fuzz: seed ${report.seed}, ${report.sent} of ${report.count} cases in ${(report.durationMs / 1000).toFixed(1)} s ` +
      `(latency p50 ${report.latencyMs.p50.toFixed(1)} ms, p99 ${report.latencyMs.p99.toFixed(1)} ms, max ${report.latencyMs.max.toFixed(0)} ms)`,
  );
  out.push(`outcomes:\n${table(report.outcomes)}`);
  out.push(`error codes:\n${table(report.codes)}`);
  out.push(`results by __typename:\n${table(report.typenames)}`);
  out.push(`roles:\n${table(report.roles)}`);
  out.push(`root fields: ${Object.keys(report.fields).length} distinct\n${table(report.fields, 60)}`);
  out.push(`lockAudit: ${JSON.stringify(report.lockAudit)}`);
  if (report.violations.length === 0) {
    out.push("violations: none");
    return out.join("\n\n");
  }
  const bySignature = new Map<string, { n: number; first: Violation }>();
  for (const v of report.violations) {
    const s = signature(v);
    const entry = bySignature.get(s);
    if (entry) entry.n++;
    else bySignature.set(s, { n: 1, first: v });
  }
  const distinct = [...bySignature.entries()].sort((a, b) => b[1].n - a[1].n);
  out.push(
    `VIOLATIONS: ${report.violations.length} in ${report.violatingCases.length} cases, ${distinct.length} distinct:\n` +
      distinct.map(([s, { n, first }]) => `  ${String(n).padStart(5)}  ${s}${first.index !== null ? `  (first: #${first.index})` : ""}`).join("\n"),
  );
  const general = new Map<string, { n: number; v: Violation }>();
  for (const v of report.violations) {
    if (v.index !== null && report.violatingCases.some((vc) => vc.c.index === v.index)) continue;
    const key = `${v.kind}: ${v.detail}`;
    const entry = general.get(key);
    if (entry) entry.n++;
    else general.set(key, { n: 1, v });
  }
  if (general.size > 0) {
    const lines = [...general.values()].slice(0, 20).map(({ n, v }) => `  ${n > 1 ? `${n}× ` : ""}${v.kind}: ${clip(v.detail, 1200)}`);
    out.push(`not tied to one case:\n${lines.join("\n")}`);
  }
  // The first case of each distinct violation, then the rest in order, up to `show`.
  const firsts = new Set(distinct.map(([, { first }]) => first.index));
  const chosen = [...report.violatingCases.filter((v) => firsts.has(v.c.index)), ...report.violatingCases.filter((v) => !firsts.has(v.c.index))].slice(0, show);
  for (const { c, violations, answer } of chosen) {
    out.push(
      [
        `--- ${describeCase(c)}`,
        ...violations.map((v) => `    ${v.kind}: ${v.detail}`),
        `    again: npm run fuzz -- --seed ${c.seed} --only ${c.index}`,
        describeRequest(c)
          .split("\n")
          .map((l) => `    > ${l}`)
          .join("\n"),
        `    < ${clip(answer, 600)}`,
      ].join("\n"),
    );
  }
  return out.join("\n\n");
}

// ---------------------------------------------------------------- the CLI

function parseArgs(argv: string[]): FuzzOptions & { show: number } {
  const options: FuzzOptions & { show: number } = { count: 1000, seed: 1, show: 5, adminToken: process.env.BATON_ADMIN_TOKEN || undefined };
  const int = (name: string, value: string | undefined): number => {
    const n = Number(value);
    if (value === undefined || !Number.isInteger(n) || n < 0) throw new Error(`${name} needs a whole number, got ${value}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [name, inline] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = () => inline ?? argv[++i];
    switch (name) {
      case "--count":
        options.count = int(name, value());
        break;
      case "--seed":
        options.seed = int(name, value());
        break;
      case "--url":
        options.url = value();
        break;
      case "--admin-token":
        options.adminToken = value();
        break;
      case "--concurrency":
        options.concurrency = Math.max(1, int(name, value()));
        break;
      case "--only":
        options.only = (value() ?? "")
          .split(",")
          .filter(Boolean)
          .map((s) => int(name, s));
        break;
      case "--show":
        options.show = int(name, value());
        break;
      case "--redis":
        options.redisUrl = value();
        break;
      case "--lease-seconds":
        options.leaseSeconds = Math.max(1, int(name, value()));
        break;
      case "--help":
      case "-h":
        process.stdout.write(
          "npm run fuzz -- --count N --seed S [--url URL --admin-token T] [--concurrency C] [--only I,J] [--show K] [--redis URL] [--lease-seconds L]\n",
        );
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${arg} (--help lists them)`);
    }
  }
  return options;
}

async function main() {
  let options: ReturnType<typeof parseArgs>;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`fuzz: ${(err as Error).message}\n`);
    process.exit(2);
  }
  // Interrupted: the API process and its database go too, and no report is made of what that broke.
  let interrupted = false;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      interrupted = true;
      process.stderr.write(`fuzz: ${signal}, stopping\n`);
      void (running?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
    });
  }
  const report = await runFuzz({ ...options, log: (line) => process.stderr.write(`fuzz: ${line}\n`) });
  if (interrupted) return;
  process.stdout.write(`${formatReport(report, options.show)}\n`);
  process.exit(report.violations.length === 0 ? 0 : 1);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    // One line, no stack: what failed (the server's own log is in the report when it is the server's).
    process.stderr.write(`fuzz: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}\n`);
    process.exit(1);
  });
}
