// A real Baton API on a real socket (port 0) over a fresh database, and typed
// GraphQL clients for the admin, a board and agents.
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import pg from "pg";
import { eventually } from "./race.js";
import { buildApp } from "../../src/app.js";
import type { App } from "../../src/app.js";
import { connectDb } from "../../src/db/client.js";
import type { DbHandle } from "../../src/db/client.js";
import { createInProcessBus, createRedisBus } from "../../src/events/bus.js";
import type { EventBus } from "../../src/events/bus.js";
import type { Logger } from "../../src/log.js";
import { DEFAULT_LIMITS } from "../../src/bounds/settings.js";
import type { Limits } from "../../src/bounds/settings.js";
import * as Ops from "../generated/graphql.js";
import { createTestDatabase } from "./db.js";
import type { TestDatabase } from "./db.js";

export const ADMIN_TOKEN = "test-admin-token-0123456789";

const SNAPSHOT_TABLES = ["companies", "agents", "api_keys", "issues", "heartbeat_runs", "lock_events", "lock_events_pruned", "issue_dependencies"] as const;

export interface GraphQLResponse<T> {
  data?: T | null;
  errors?: { message: string; extensions?: { code?: string }; path?: string[] }[];
}

export class Client {
  constructor(
    readonly url: string,
    readonly token: string | null,
  ) {}

  async raw<T>(query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}): Promise<GraphQLResponse<T>> {
    const response = await fetch(this.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...headers,
      },
      body: JSON.stringify({ query, variables }),
    });
    return (await response.json()) as GraphQLResponse<T>;
  }

  /** Runs a typed operation; returns data and errors as they came. */
  async request<R, V>(doc: TypedDocumentNode<R, V>, variables?: V): Promise<GraphQLResponse<R>> {
    return this.raw<R>(print(doc), variables as Record<string, unknown> | undefined);
  }

  /** Runs a typed operation that must succeed. */
  async ok<R, V>(doc: TypedDocumentNode<R, V>, variables?: V): Promise<R> {
    const res = await this.request(doc, variables);
    if (res.errors?.length || !res.data) throw new Error(`GraphQL errors: ${JSON.stringify(res.errors)}`);
    return res.data;
  }

  /** Runs a typed operation that must fail; returns the first error code. */
  async errorCode<R, V>(doc: TypedDocumentNode<R, V>, variables?: V): Promise<string | undefined> {
    const res = await this.request(doc, variables);
    if (!res.errors?.length) throw new Error(`expected an error, got ${JSON.stringify(res.data)}`);
    return res.errors[0]!.extensions?.code;
  }
}

export interface Harness {
  url: string;
  database: TestDatabase;
  db: DbHandle;
  bus: EventBus;
  app: App;
  admin: Client;
  client(token: string | null): Client;
  /** A plain pg connection for arranging rows (backdating leases) and checking tables. */
  sql<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<T[]>;
  /** Row count and a digest of every row of every table: equal snapshots mean nothing changed. */
  snapshot(): Promise<Record<string, string>>;
  /**
   * Waits until every committed event of the company is final: readable by
   * lockEvents. Other test files' transactions on this cluster hold events
   * back for a moment (docs/events.md, "The one caveat").
   */
  settled(companyId: string): Promise<void>;
  /** Every seq in a company's ledger, ascending (seqs increase but have gaps: docs/events.md). */
  ledgerSeqs(companyId: string): Promise<string[]>;
  /** The single row of a query that must return exactly one. */
  one<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<T>;
  /** Another API instance on the same database (its own pool and bus); `limits` over the harness's. */
  startInstance(options?: { redisUrl?: string; limits?: Partial<Limits> }): Promise<{ url: string; app: App; bus: EventBus; stop(): Promise<void> }>;
  /** Every line the instances logged, with its fields (what a test may check never reaches a log). */
  logged: { level: string; msg: string; fields?: Record<string, unknown> }[];
  close(): Promise<void>;
}

export async function startHarness(
  options: { leaseSeconds?: number; redisUrl?: string; ledgerPollMs?: number; mcpSessionIdleSeconds?: number; limits?: Partial<Limits> } = {},
): Promise<Harness> {
  const database = await createTestDatabase();
  const logged: Harness["logged"] = [];
  const log: Logger = (level, msg, fields) => void logged.push({ level, msg, fields });
  const instances: { stop(): Promise<void> }[] = [];
  const pool = new pg.Pool({ connectionString: database.url, max: 4 });
  // close() drops the database WITH (FORCE): a connection still closing then gets
  // "terminating connection due to administrator command", which without a
  // listener would be an uncaught exception in whichever test file runs next.
  pool.on("error", () => {});

  async function startInstance(opts: { redisUrl?: string; limits?: Partial<Limits> } = {}) {
    const db = connectDb(database.url, 8, "baton-test");
    const redisUrl = opts.redisUrl ?? options.redisUrl;
    const bus = redisUrl ? createRedisBus(redisUrl, log) : createInProcessBus();
    const app = buildApp({
      db: db.prisma,
      bus,
      adminToken: ADMIN_TOKEN,
      leaseSeconds: options.leaseSeconds ?? 60,
      log,
      ledgerPollMs: options.ledgerPollMs ?? 200,
      ...(options.mcpSessionIdleSeconds === undefined ? {} : { mcpSessionIdleSeconds: options.mcpSessionIdleSeconds }),
      ...(options.limits || opts.limits ? { limits: { ...DEFAULT_LIMITS, ...options.limits, ...opts.limits } } : {}),
    });
    const { url } = await app.start(0);
    const instance = {
      url,
      app,
      bus,
      db,
      async stop() {
        await app.stop();
        await bus.close();
        await db.close();
      },
    };
    instances.push(instance);
    return instance;
  }

  const first = await startInstance();
  return {
    url: first.url,
    database,
    db: first.db,
    bus: first.bus,
    app: first.app,
    admin: new Client(first.url, ADMIN_TOKEN),
    client: (token) => new Client(first.url, token),
    sql: async (text, values) => (await pool.query(text, values)).rows,
    async snapshot() {
      const columns = SNAPSHOT_TABLES.map(
        (t) => `(SELECT count(*) || ':' || coalesce(md5(string_agg(x::text, '|' ORDER BY x::text)), '') FROM ${t} x) AS ${t}`,
      );
      return (await pool.query(`SELECT ${columns.join(", ")}`)).rows[0];
    },
    async settled(companyId) {
      await eventually(async () => {
        const { rows } = await pool.query<{ held: boolean }>(
          "SELECT EXISTS (SELECT 1 FROM lock_events WHERE company_id = $1 AND seq >= baton_event_horizon()) AS held",
          [companyId],
        );
        return rows[0]!.held ? undefined : true;
      }, "the company's events to be final");
    },
    async ledgerSeqs(companyId) {
      const { rows } = await pool.query<{ seq: string }>("SELECT e.seq::text AS seq FROM lock_events e WHERE e.company_id = $1 ORDER BY e.seq", [companyId]);
      return rows.map((r) => r.seq);
    },
    async one(text, values) {
      const { rows } = await pool.query(text, values);
      if (rows.length !== 1) throw new Error(`expected one row, got ${rows.length}: ${text}`);
      return rows[0];
    },
    startInstance,
    logged,
    async close() {
      for (const instance of instances.reverse()) await instance.stop();
      await pool.end();
      await database.drop();
    },
  };
}

export interface Company {
  id: string;
  board: Client;
  agents: { id: string; name: string; client: Client }[];
}

/** A company with a board client and `agents` agents, all made through GraphQL. */
export async function createCompany(h: Pick<Harness, "admin" | "client">, agents = 2, url?: string): Promise<Company> {
  const { createCompany } = await h.admin.ok(Ops.CreateCompanyDocument, { name: "Acme" });
  const board = url ? new Client(url, createCompany.boardKey) : h.client(createCompany.boardKey);
  const made = [];
  for (let i = 0; i < agents; i++) {
    const { createAgent } = await board.ok(Ops.CreateAgentDocument, { name: `Agent ${i + 1}` });
    made.push({ id: createAgent.agent.id, name: createAgent.agent.name, client: new Client(board.url, createAgent.apiKey) });
  }
  return { id: createCompany.company.id, board, agents: made };
}

export { Ops };

/** A company whose one agent has `issues` issues assigned and a run, and `claim(n)` that claims the next n of them (each must succeed). */
export async function claimingAgent(h: Pick<Harness, "admin" | "client">, issues: number): Promise<{ co: Company; claim(n: number): Promise<void> }> {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: issues }, (_, i) => ({ title: `job ${i}`, assigneeAgentId: agent.id })) });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  return {
    co,
    async claim(n) {
      for (let i = 0; i < n; i++) {
        const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
        if (claimIssue.__typename !== "IssueClaimed") throw new Error(`expected IssueClaimed, got ${claimIssue.__typename}`);
      }
    },
  };
}
