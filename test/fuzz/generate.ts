// Requests generated from schema.graphql for the fuzzer (test/fuzz/run.ts).
//
// Every case is a pure function of (seed, index, fixture): a seeded PRNG
// (mulberry32) is started from a hash of the seed and the index, so one case
// can be generated again on its own (`npm run fuzz -- --seed S --only I`).
// The fixture holds the real ids and keys a seeded server has (two companies,
// their agents, runs and issues); the generator mixes them with ids of the
// other company, unknown UUIDs and strings that are not ids at all.
//
// A case is one of:
//   - a GraphQL operation over HTTP POST (sometimes GET, or as an SSE stream)
//     or over graphql-ws: valid-ish arguments, malformed ones (wrong types,
//     null for non-null, huge and odd strings, unknown enum values, unknown
//     fields and arguments), selections that are sometimes deep, wide, aliased
//     or spread through fragments, arguments inline or as variables;
//   - a raw HTTP request (bodies that are not JSON, odd methods, content types, paths);
//   - a raw WebSocket conversation (frames that break the graphql-ws protocol).
// Each case names the token it carries (Role) and says what was made
// malformed on purpose (`notes`).
import { readFileSync } from "node:fs";
import path from "node:path";
import {
  buildSchema,
  getIntrospectionQuery,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isUnionType,
} from "graphql";
import type { GraphQLField, GraphQLInputType, GraphQLNamedType, GraphQLObjectType, GraphQLOutputType, GraphQLSchema, GraphQLUnionType } from "graphql";

// ---------------------------------------------------------------- the PRNG

/** mulberry32: a 32-bit state, good enough to fuzz with and trivially reproducible. */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed of one case: a hash of the run's seed and the case's index. */
export function caseSeed(seed: number, index: number): number {
  let h = Math.imul((seed >>> 0) ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul((index >>> 0) + 0x632be5ab, 0xc2b2ae35);
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  h ^= h >>> 16;
  return h >>> 0;
}

export class Rng {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  float(): number {
    return this.next();
  }
  /** An integer in lo..hi, both included. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[this.int(0, items.length - 1)]!;
  }
  weighted<T>(choices: readonly (readonly [T, number])[]): T {
    const total = choices.reduce((sum, [, w]) => sum + w, 0);
    let r = this.next() * total;
    for (const [value, w] of choices) {
      r -= w;
      if (r < 0) return value;
    }
    return choices[choices.length - 1]![0];
  }
  /** k distinct items, in random order. */
  sample<T>(items: readonly T[], k: number): T[] {
    const copy = [...items];
    for (let i = copy.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [copy[i], copy[j]] = [copy[j]!, copy[i]!];
    }
    return copy.slice(0, Math.max(0, Math.min(k, copy.length)));
  }
  hex(n: number): string {
    let s = "";
    for (let i = 0; i < n; i++) s += "0123456789abcdef"[this.int(0, 15)];
    return s;
  }
  /** A UUID (v4 shape) that no row has. */
  uuid(): string {
    return `${this.hex(8)}-${this.hex(4)}-4${this.hex(3)}-${this.pick(["8", "9", "a", "b"])}${this.hex(3)}-${this.hex(12)}`;
  }
}

// ---------------------------------------------------------------- the fixture

export const ISSUE_STATES = ["open", "backlog", "claimed", "inProgress", "done", "blocked", "cancelled", "escalated"] as const;
export type IssueState = (typeof ISSUE_STATES)[number];

/** The first live runs of each agent, which no generated finishRun names. */
export const PROTECTED_RUNS = 2;

export interface AgentFixture {
  id: string;
  key: string;
  /** RUNNING when seeded; more than PROTECTED_RUNS (the fuzz may end the others). */
  liveRuns: string[];
  /** Finished when seeded. */
  endedRuns: string[];
}

export interface CompanyFixture {
  id: string;
  boardKey: string;
  agents: AgentFixture[];
  /** Issue ids by their status when seeded. */
  issues: Record<IssueState, string[]>;
  /** Seqs of events in the company's ledger when seeded. */
  seqs: string[];
  /** An `issues` cursor this API gave out. */
  cursor: string | null;
}

export interface Fixture {
  adminToken: string;
  A: CompanyFixture;
  B: CompanyFixture;
}

// ---------------------------------------------------------------- roles and tokens

/** Whose token a case carries. A and B are the two companies; agentA2 is a second agent of A. */
export const ROLES = ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB", "none", "garbage"] as const;
export type Role = (typeof ROLES)[number];

const ROLE_WEIGHTS: readonly (readonly [Role, number])[] = [
  ["admin", 12],
  ["boardA", 20],
  ["agentA", 24],
  ["agentA2", 7],
  ["boardB", 9],
  ["agentB", 10],
  ["none", 9],
  ["garbage", 9],
];

/** Shaped like keys, but unknown: each is looked up once (within the unknown-key budget) and then remembered. */
const UNKNOWN_KEYS = [`baton_board_${"A".repeat(43)}`, `baton_agent_${"Zz0-_".repeat(8)}abc`, `baton_board_${"q".repeat(42)}-`];

/** Header-safe tokens that are not keys. */
function garbageToken(rng: Rng, fixture: Fixture): string {
  return rng.pick([
    "garbage",
    "Bearer",
    "Bearer ",
    "Basic dXNlcjpwYXNz",
    `Bearer ${fixture.adminToken}x`,
    `Bearer ${fixture.adminToken.slice(0, -1)}`,
    `Bearer ${fixture.A.boardKey.replace("baton_board_", "baton_agent_")}`,
    `Bearer ${UNKNOWN_KEYS[rng.int(0, UNKNOWN_KEYS.length - 1)]}`,
    `Bearer ${"x".repeat(rng.pick([100, 4000]))}`,
    "Bearer ' OR '1'='1",
    "Bearer null",
    `Bearer ${fixture.A.boardKey} ${fixture.A.boardKey}`,
    "Bearer \t baton_",
  ]);
}

export function tokenOf(role: Role, fixture: Fixture): string | null {
  switch (role) {
    case "admin":
      return fixture.adminToken;
    case "boardA":
      return fixture.A.boardKey;
    case "agentA":
      return fixture.A.agents[0]!.key;
    case "agentA2":
      return fixture.A.agents[1]!.key;
    case "boardB":
      return fixture.B.boardKey;
    case "agentB":
      return fixture.B.agents[0]!.key;
    default:
      return null;
  }
}

/** The company a role's key belongs to (null: the admin, or no valid key). */
export function roleCompany(role: Role, fixture: Fixture): string | null {
  if (role === "boardA" || role === "agentA" || role === "agentA2") return fixture.A.id;
  if (role === "boardB" || role === "agentB") return fixture.B.id;
  return null;
}

export const isAnonymous = (role: Role) => role === "none" || role === "garbage";

function authorizationFor(rng: Rng, role: Role, fixture: Fixture): string | null {
  if (role === "none") return null;
  if (role === "garbage") return garbageToken(rng, fixture);
  const token = tokenOf(role, fixture)!;
  // parseBearer accepts all of these.
  return rng.weighted<string>([
    [`Bearer ${token}`, 80],
    [`bearer ${token}`, 5],
    [token, 5],
    [`Bearer   ${token}  `, 5],
    [`BEARER ${token}`, 5],
  ]);
}

/** Root fields and the roles that may get data from them (docs/access.md). */
export const FIELD_ROLES: Record<string, readonly Role[]> = {
  // queries: any valid key, within its company (checked separately)
  me: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
  company: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
  companies: ["admin"],
  agents: ["admin", "boardA", "boardB"],
  issue: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
  issues: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
  run: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
  runs: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
  lockEvents: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
  lockAudit: ["admin", "boardA", "boardB"],
  // mutations
  createCompany: ["admin"],
  createAgent: ["boardA", "boardB"],
  createIssue: ["boardA", "boardB"],
  createIssues: ["boardA", "boardB"],
  updateIssue: ["boardA", "boardB"],
  forceReleaseIssue: ["boardA", "boardB"],
  enableAgent: ["admin", "boardA", "boardB"],
  runHeartbeat: ["boardA", "boardB"],
  startRun: ["agentA", "agentA2", "agentB"],
  heartbeatRun: ["agentA", "agentA2", "agentB"],
  finishRun: ["agentA", "agentA2", "agentB"],
  claimIssue: ["agentA", "agentA2", "agentB"],
  claimIssues: ["agentA", "agentA2", "agentB"],
  acquireExecution: ["agentA", "agentA2", "agentB"],
  releaseIssue: ["agentA", "agentA2", "agentB"],
  releaseIssues: ["agentA", "agentA2", "agentB"],
  createSubIssues: ["agentA", "agentA2", "agentB"],
  addDependency: ["boardA", "boardB", "agentA", "agentA2", "agentB"],
  removeDependency: ["boardA", "boardB", "agentA", "agentA2", "agentB"],
  // subscriptions
  lockChanged: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
  issuesChanged: ["admin", "boardA", "agentA", "agentA2", "boardB", "agentB"],
};

// ---------------------------------------------------------------- cases

export interface GraphQLRequest {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
  extensions?: Record<string, unknown>;
}

export interface HttpShape {
  method: "GET" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS";
  /** Path on the server: "/graphql" unless a case tries another spelling. */
  path: string;
  accept: string | null;
  contentType: string | null;
  /** Sent instead of JSON.stringify(request) (raw cases). For GET, the query string. */
  body?: string;
}

export interface FuzzCase {
  seed: number;
  index: number;
  transport: "http" | "ws" | "ws-raw";
  /** Whose token the operation runs with (as the server should see it). */
  role: Role;
  /** The Authorization header, or connectionParams.authorization over WebSocket. */
  authorization: string | null;
  /** WebSocket: what connection_init carries, when it is not { authorization }. */
  connectionParams?: Record<string, unknown>;
  operationType: "query" | "mutation" | "subscription" | "raw";
  /** The root fields asked for. */
  fields: string[];
  /** What was made malformed on purpose; empty for a request meant to be valid. */
  notes: string[];
  request?: GraphQLRequest;
  http?: HttpShape;
  /** ws-raw: the frames to send, in order (a string is sent as text; { binary } as a binary frame). */
  frames?: (string | { binary: string })[];
  /** ws-raw: the subprotocol asked for at the upgrade (null: none). */
  subprotocol?: string | null;
}

// ---------------------------------------------------------------- values

class EnumLit {
  constructor(readonly name: string) {}
}
/** A literal written as is in a document; `json` is what it is as a variable. */
class RawLit {
  constructor(
    readonly text: string,
    readonly json: unknown,
  ) {}
}
type Val = null | boolean | number | string | EnumLit | RawLit | Val[] | { [key: string]: Val };

function printLiteral(v: Val): string {
  if (v === null) return "null";
  if (typeof v === "boolean" || typeof v === "number") return String(v);
  if (typeof v === "string") return JSON.stringify(v);
  if (v instanceof EnumLit) return v.name;
  if (v instanceof RawLit) return v.text;
  if (Array.isArray(v)) return `[${v.map(printLiteral).join(", ")}]`;
  return `{${Object.entries(v)
    .map(([k, x]) => `${k}: ${printLiteral(x)}`)
    .join(", ")}}`;
}

function toJson(v: Val): unknown {
  if (v === null || typeof v !== "object") return v;
  if (v instanceof EnumLit) return v.name;
  if (v instanceof RawLit) return v.json;
  if (Array.isArray(v)) return v.map(toJson);
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toJson(x)]));
}

/**
 * Odd strings. None looks like a file path or a stack frame, so that the
 * checker can tell a leak from an echo of what was sent.
 */
const ODD_STRINGS: readonly string[] = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\uD800",
  "x\uDC00y",
  "\uDBFF\uDBFF",
  "\uD83D\uDE00",
  "😀👩‍👩‍👧‍👦🏳️‍🌈",
  "\u202Eevil\u202C",
  "\u200B\u200C\u200D",
  "\uFEFF",
  "\uFFFE\uFFFF",
  "\u{10FFFF}",
  "Ω≈ç√∫˜µ≤≥÷",
  "田中さんにあげて下さい",
  "مرحبا",
  "'; DROP TABLE issues; --",
  '" OR 1=1 --',
  "$1 $2 %s %n %x {0}",
  "\\",
  "\\u0000",
  "<script>alert(1)</script>",
  "\r\n\t\u000b\u000c",
  "\u0001\u0002\u001f\u007f",
  "null",
  "undefined",
  "NaN",
  "-0",
  "1e309",
  "{}",
  "[]",
  "__proto__",
  "constructor",
  "ﾟ･✿ヾ╲(｡◕‿◕｡)╱✿･ﾟ",
  "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǫ̗͕̟̉",
  "a".repeat(500),
  "a".repeat(501),
  "😀".repeat(500),
  "😀".repeat(501),
  " leading and trailing ",
];

const HUGE_CHARS = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 äöü ñ 日本 😀 -_.,;!?()[]{}<>=+*&^%$#@~";

function hugeString(rng: Rng): string {
  const n = rng.pick([1000, 4096, 10_000, 20_000]);
  switch (rng.int(0, 4)) {
    case 0:
      return "a".repeat(n);
    case 1:
      return "😀".repeat(n / 2);
    case 2:
      return "\uD800".repeat(rng.int(1, 50)) + "b".repeat(n);
    case 3:
      return `${"c".repeat(n - 1)}\u0000`;
    default: {
      const chars = [...HUGE_CHARS];
      let s = "";
      while (s.length < n) s += rng.pick(chars);
      return s;
    }
  }
}

function oddString(rng: Rng): string {
  return rng.chance(0.2) ? hugeString(rng) : rng.pick(ODD_STRINGS);
}

function badId(rng: Rng, real: string): string {
  return rng.pick([
    "",
    "not-a-uuid",
    "42",
    "0",
    "-1",
    real.slice(0, -1),
    `${real}0`,
    `{${real}}`,
    ` ${real}`,
    `${real} `,
    real.replace(/[0-9a-f]/, "g"),
    real.replace(/-/g, ""),
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "1' OR '1'='1",
    `${real}'; --`,
    "\u0000",
    "\uD800",
    "x".repeat(rng.pick([100, 20_000])),
    "😀",
  ]);
}

// ---------------------------------------------------------------- the generator

export interface Generator {
  schema: GraphQLSchema;
  fixture: Fixture;
  /** Types that implement Problem: a result with one of these must carry a message. */
  problemTypes: ReadonlySet<string>;
}

export function loadSchema(): GraphQLSchema {
  return buildSchema(readFileSync(path.resolve(import.meta.dirname, "../../schema.graphql"), "utf8"));
}

/** The types that implement Problem. */
export function problemTypesOf(schema: GraphQLSchema): Set<string> {
  const names = new Set<string>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (isObjectType(type) && type.getInterfaces().some((i) => i.name === "Problem")) names.add(type.name);
  }
  return names;
}

export function createGenerator(fixture: Fixture, schema = loadSchema()): Generator {
  return { schema, fixture, problemTypes: problemTypesOf(schema) };
}

type Mode = "valid" | "malformed" | "shape";

/** What one case is being built from: its rng, its role and what it has noted so far. */
class Build {
  readonly notes: string[] = [];
  readonly varDefs: string[] = [];
  readonly variables: Record<string, unknown> = {};
  readonly fragments: string[] = [];
  private vars = 0;
  private frags = 0;
  aliases = 0;

  constructor(
    readonly rng: Rng,
    readonly gen: Generator,
    readonly role: Role,
    readonly mode: Mode,
  ) {}

  get fixture() {
    return this.gen.fixture;
  }

  note(what: string) {
    if (!this.notes.includes(what)) this.notes.push(what);
  }

  /** How likely each value is to be made malformed. */
  get malformedRate() {
    return this.mode === "malformed" ? 0.35 : 0;
  }

  newVar(): string {
    return `v${this.vars++}`;
  }

  newFragment(): string {
    return `F${this.frags++}`;
  }

  /** Where a caller of this role mostly takes its ids from. */
  ownCompany(): CompanyFixture | null {
    const id = roleCompany(this.role, this.fixture);
    return id === this.fixture.A.id ? this.fixture.A : id === this.fixture.B.id ? this.fixture.B : null;
  }
}

type Hint =
  | "company"
  | "agent"
  | "run"
  | "issue"
  | "seq"
  | "cursor"
  | "name"
  | "title"
  | "description"
  | "reason"
  | "text"
  | "first"
  | "limit"
  | "maxAttempts"
  | "none";

function hintFor(field: string, arg: string): Hint {
  switch (arg) {
    case "companyId":
      return "company";
    case "id":
      return field === "company" ? "company" : field === "run" ? "run" : "issue";
    case "runId":
      return "run";
    case "issueId":
    case "issueIds":
      return "issue";
    case "agentId":
    case "assigneeAgentId":
      return "agent";
    case "afterSeq":
    case "beforeSeq":
      return "seq";
    case "after":
      return "cursor";
    case "name":
      return "name";
    case "title":
      return "title";
    case "description":
      return "description";
    case "reason":
      return "reason";
    case "first":
      return "first";
    case "limit":
      return "limit";
    case "maxAttempts":
      return "maxAttempts";
    default:
      return "none";
  }
}

function companyPick(b: Build): CompanyFixture {
  const own = b.ownCompany();
  if (own && b.rng.chance(0.75)) return own;
  return b.rng.chance(0.5) ? b.fixture.A : b.fixture.B;
}

/** A real id of the kind asked for (of either company, mostly the caller's), or an unknown UUID. */
function realId(b: Build, hint: Hint, field: string): string {
  const { rng } = b;
  if (rng.chance(0.1)) return rng.uuid();
  const co = companyPick(b);
  let id: string;
  switch (hint) {
    case "company":
      id = co.id;
      break;
    case "agent":
      id = rng.pick(co.agents).id;
      break;
    case "run": {
      // An agent mostly names its own runs, and mostly live ones: most often the one holding the
      // fixture's locks (the first). finishRun never ends the first PROTECTED_RUNS, so that they
      // stay live for the rest of the run (unless their lease runs out).
      const own = tokenOf(b.role, b.fixture);
      const agent = co.agents.find((a) => a.key === own) ?? rng.pick(co.agents);
      if (field === "finishRun") id = rng.chance(0.5) ? rng.pick(agent.endedRuns) : rng.pick(agent.liveRuns.slice(PROTECTED_RUNS));
      else if (rng.chance(0.15)) id = rng.pick(agent.endedRuns);
      else id = rng.chance(0.4) ? agent.liveRuns[0]! : rng.pick(agent.liveRuns);
      break;
    }
    default: {
      const states = ISSUE_STATES.filter((s) => co.issues[s].length > 0);
      // The verbs are more interesting with an issue whose status they act on.
      const preferred: Record<string, IssueState[]> = {
        acquireExecution: ["claimed", "inProgress"],
        releaseIssue: ["claimed", "inProgress"],
        releaseIssues: ["claimed", "inProgress"],
        claimIssue: ["open", "claimed", "inProgress"],
        createSubIssues: ["claimed", "inProgress"],
        addDependency: ["open", "claimed", "inProgress"],
        forceReleaseIssue: ["claimed", "inProgress"],
        updateIssue: ["open", "backlog", "blocked", "escalated", "claimed"],
      };
      const pool = preferred[field]?.filter((s) => co.issues[s].length > 0) ?? [];
      const state = pool.length > 0 && rng.chance(0.7) ? rng.pick(pool) : rng.pick(states);
      id = rng.pick(co.issues[state]);
    }
  }
  // validateId lowercases: the same id in capitals is the same row.
  return rng.chance(0.03) ? id.toUpperCase() : id;
}

function validString(b: Build, hint: Hint, field: string): string {
  const { rng } = b;
  const n = rng.int(0, 1_000_000);
  switch (hint) {
    case "name":
      return rng.weighted<string>([
        [`Fuzz ${field === "createCompany" ? "Co" : "Agent"} ${n}`, 80],
        [`Ærøskøbing ✓ ${n}`, 10],
        ["Agent 1", 10], // an existing agent's name
      ]);
    case "title":
      return rng.weighted<string>([
        [`fuzz issue ${n}`, 85],
        ["x".repeat(500), 5],
        [`${"😀".repeat(250)}`, 5],
        ["  padded  ", 5],
      ]);
    case "description":
      return rng.chance(0.1) ? "d".repeat(rng.pick([10_000, 20_000])) : `a description ${n}\nwith lines`;
    case "reason":
      return rng.pick(["done", `fuzz ${n}`, "it broke", "r".repeat(1000)]);
    case "seq": {
      const co = companyPick(b);
      return co.seqs.length > 0 && rng.chance(0.6) ? rng.pick(co.seqs) : rng.pick(["0", "1", "3", "1000000"]);
    }
    case "cursor": {
      const co = companyPick(b);
      return co.cursor && rng.chance(0.6) ? co.cursor : Buffer.from(`issue:${rng.uuid()}`).toString("base64url");
    }
    default:
      return `text ${n}`;
  }
}

function malformedString(b: Build, hint: Hint): string {
  const { rng } = b;
  if (hint === "seq") {
    return rng.pick([
      "-1",
      "1.5",
      "abc",
      "",
      " 1",
      "0x10",
      "1e3",
      "9223372036854775807",
      "9223372036854775808",
      "99999999999999999999999",
      "٣",
      oddString(rng),
    ]);
  }
  if (hint === "cursor") {
    return rng.pick([
      "",
      "abc",
      "!!!",
      "=".repeat(100),
      Buffer.from("issue:nope").toString("base64url"),
      Buffer.from(`run:${rng.uuid()}`).toString("base64url"),
      Buffer.from("issue:").toString("base64url"),
      Buffer.from(`issue:${b.fixture.B.issues.open[0] ?? rng.uuid()}`).toString("base64"),
      oddString(rng),
    ]);
  }
  return oddString(rng);
}

function intValue(b: Build, hint: Hint, field: string, malformed: boolean): Val {
  const { rng } = b;
  if (!malformed) {
    switch (hint) {
      case "first":
        return rng.weighted<number>([
          [rng.int(1, 20), 80],
          [field === "lockEvents" ? 1000 : 500, 10],
          [1, 10],
        ]);
      case "limit":
        return rng.weighted<number>([
          [rng.int(1, 5), 90],
          [1000, 10],
        ]);
      case "maxAttempts":
        return rng.pick([1, 2, 3, 5, 100]);
      default:
        return rng.int(0, 10);
    }
  }
  b.note(`int:${hint}`);
  return rng.pick<Val>([
    0,
    -1,
    501,
    1001,
    101,
    2147483647,
    -2147483648,
    new RawLit("2147483648", 2147483648),
    new RawLit("99999999999999999999", 1e20), // the nearest double: what JSON.parse makes of it
    1.5,
    -0.0001,
    new RawLit("1e3", 1e3),
  ]);
}

/** A value of the wrong kind altogether for `type`. */
function wrongKind(b: Build, named: GraphQLNamedType): Val {
  const { rng } = b;
  const choices: Val[] = [true, 3.25, { a: 1 }, [1, 2], "5", 7, new EnumLit("OPEN")];
  const v = rng.pick(choices);
  b.note(`wrong-type:${named.name}`);
  return v;
}

/** A value for an input type: valid-ish, or (at malformedRate) wrong somewhere. */
function valueFor(b: Build, type: GraphQLInputType, hint: Hint, field: string, depth = 0): Val {
  const { rng } = b;
  const bad = rng.chance(b.malformedRate);
  if (isNonNullType(type)) {
    if (bad && rng.chance(0.25)) {
      b.note("null-for-non-null");
      return null;
    }
    return valueFor(b, type.ofType, hint, field, depth);
  }
  if (isListType(type)) {
    if (bad && rng.chance(0.5)) {
      const kind = rng.int(0, 3);
      if (kind === 0) {
        // Past the batch limit (1,000), with small items: the point is the count, not the bytes.
        b.note("huge-list");
        const n = rng.pick([1001, 1500]);
        const item = getNamedType(type);
        if (isInputObjectType(item)) return Array.from({ length: n }, (_, i) => ({ title: `t${i}` }));
        if (hint === "issue") return Array.from({ length: n }, () => rng.uuid());
        const one = valueFor(b, type.ofType, hint, field, depth + 1);
        return Array.from({ length: n }, () => one);
      }
      if (kind === 1) {
        b.note("null-in-list");
        return [valueFor(b, type.ofType, hint, field, depth + 1), null];
      }
      if (kind === 2) {
        b.note("nested-list");
        return [[valueFor(b, type.ofType, hint, field, depth + 1)]];
      }
      b.note("empty-list");
      return [];
    }
    // A single value where a list goes is valid GraphQL (input coercion).
    if (rng.chance(0.05)) return valueFor(b, type.ofType, hint, field, depth + 1);
    const n = field === "createIssues" ? rng.int(1, 4) : hint === "issue" ? rng.int(1, 5) : rng.int(1, 3);
    return Array.from({ length: n }, () => valueFor(b, type.ofType, hint, field, depth + 1));
  }
  const named = getNamedType(type);
  if (bad && rng.chance(0.2)) return wrongKind(b, named);
  if (isEnumType(named)) {
    if (bad) {
      b.note(`enum:${named.name}`);
      return rng.pick<Val>([
        new EnumLit("NOPE"),
        new EnumLit(named.getValues()[0]!.name.toLowerCase()),
        new RawLit(`"${named.getValues()[0]!.name}"`, "NOPE"),
        new EnumLit("null"),
      ]);
    }
    return new EnumLit(rng.pick(named.getValues()).name);
  }
  if (isInputObjectType(named)) {
    const fields = Object.values(named.getFields());
    const out: Record<string, Val> = {};
    for (const f of fields) {
      const required = isNonNullType(f.type);
      if (!required && !rng.chance(0.45)) continue;
      if (required && bad && rng.chance(0.3)) {
        b.note(`missing-input-field:${f.name}`);
        continue;
      }
      out[f.name] = inputFieldValue(b, named.name, f.name, f.type, field, depth + 1);
    }
    if (bad && rng.chance(0.3)) {
      b.note("unknown-input-field");
      out[rng.pick(["nope", "companyId", "id", "__proto__", "lockEpoch"])] = "x";
    }
    return out;
  }
  switch (named.name) {
    case "ID": {
      if (bad) {
        b.note(`bad-id:${hint}`);
        return rng.chance(0.15) ? rng.int(-5, 99999) : badId(rng, realId(b, hint === "none" ? "issue" : hint, field));
      }
      if (hint === "seq") return validString(b, hint, field);
      return realId(b, hint, field);
    }
    case "String":
      if (bad) {
        b.note(`odd-string:${hint}`);
        return malformedString(b, hint);
      }
      return validString(b, hint, field);
    case "Int":
      return intValue(b, hint, field, bad);
    case "Boolean":
      if (bad) {
        b.note("bad-boolean");
        return rng.pick<Val>(["true", 1, 0, new EnumLit("yes")]);
      }
      return rng.chance(0.5);
    default:
      return bad ? wrongKind(b, named) : validString(b, hint, field);
  }
}

function inputFieldValue(b: Build, inputType: string, name: string, type: GraphQLInputType, field: string, depth: number): Val {
  const { rng } = b;
  if (name === "status" && !rng.chance(b.malformedRate)) {
    // CreateIssueInput takes BACKLOG or OPEN; UpdateIssueInput any move, allowed or not.
    return new EnumLit(
      inputType === "CreateIssueInput"
        ? rng.weighted([
            ["OPEN", 80],
            ["BACKLOG", 15],
            ["DONE", 5],
          ] as const)
        : rng.pick(["OPEN", "CANCELLED", "BLOCKED", "DONE", "BACKLOG", "IN_PROGRESS", "ESCALATED", "CLAIMED"]),
    );
  }
  if (name === "assigneeAgentId" && rng.chance(0.15)) return null; // unassigned / unassign
  return valueFor(b, type, hintFor(field, name), field, depth);
}

/** Writes an argument's value inline or as a variable (sometimes declared wrongly). */
function argText(b: Build, type: GraphQLInputType, value: Val): string {
  const { rng } = b;
  if (!rng.chance(0.45)) return printLiteral(value);
  const v = b.newVar();
  let declared = String(type);
  if (b.mode !== "valid" && rng.chance(0.12)) {
    declared = rng.pick(["String", "Int!", "[ID!]!", "Boolean", "ID", "Nope", "IssueStatus", "CreateIssueInput"]);
    if (declared !== String(type)) b.note("variable-declared-wrong");
  }
  if (b.mode !== "valid" && rng.chance(0.06)) {
    // A default value in the declaration, sent or not.
    b.varDefs.push(`$${v}: ${declared} = ${printLiteral(value)}`);
    if (rng.chance(0.5)) return `$${v}`;
  } else {
    b.varDefs.push(`$${v}: ${declared}`);
  }
  if (b.mode !== "valid" && rng.chance(0.05)) {
    b.note("variable-not-sent");
    return `$${v}`;
  }
  b.variables[v] = toJson(value);
  return `$${v}`;
}

// ---------------------------------------------------------------- selections

const MAX_SELECTION_DEPTH = 5;

function alias(b: Build): string {
  if (!b.rng.chance(0.08)) return "";
  b.aliases++;
  return `al${b.aliases}: `;
}

/**
 * A selection set for `type`, or "" for a leaf. Unions always ask for
 * __typename and the Problem's message (the checker relies on both).
 */
function selectionFor(b: Build, type: GraphQLOutputType, depth: number): string {
  const named = getNamedType(type);
  if (isLeafType(named)) return "";
  if (isUnionType(named)) return unionSelection(b, named, depth);
  if (isObjectType(named)) return objectSelection(b, named, depth);
  return "{ __typename }";
}

function unionSelection(b: Build, union: GraphQLUnionType, depth: number): string {
  const { rng } = b;
  const parts = ["__typename", "... on Problem { message }"];
  for (const member of union.getTypes()) {
    if (!rng.chance(0.6)) continue;
    const inner = objectSelection(b, member, depth + 1);
    parts.push(`... on ${member.name} ${inner}`);
  }
  return `{ ${parts.join(" ")} }`;
}

function objectSelection(b: Build, type: GraphQLObjectType, depth: number): string {
  const { rng } = b;
  const fields = Object.values(type.getFields()) as GraphQLField<unknown, unknown>[];
  const leaves = fields.filter((f) => isLeafType(getNamedType(f.type)));
  const usable = depth >= MAX_SELECTION_DEPTH ? leaves : fields;
  const pool = usable.length > 0 ? usable : fields;
  const wide = rng.chance(0.15);
  const chosen = wide ? pool : rng.sample(pool, rng.int(1, Math.min(pool.length, 6)));
  const parts: string[] = [];
  for (const f of chosen) {
    const sub = selectionFor(b, f.type, depth + 1);
    parts.push(`${alias(b)}${f.name}${sub ? ` ${sub}` : ""}`);
  }
  if (rng.chance(0.15)) parts.push("__typename");
  if (rng.chance(0.08) && depth > 0) {
    // The same fields through a named fragment.
    const name = b.newFragment();
    b.fragments.push(`fragment ${name} on ${type.name} { ${parts.join(" ")} }`);
    return `{ ...${name} }`;
  }
  return `{ ${parts.join(" ")} }`;
}

// ---------------------------------------------------------------- operations

type OpType = "query" | "mutation" | "subscription";

/**
 * Mutations that revoke keys (docs/access.md, "Rotating and revoking keys"):
 * sent by the fuzz only as a role that cannot revoke anything (an agent key:
 * FORBIDDEN; no key or a garbage one: UNAUTHENTICATED). As a board or the
 * admin, with the ids the fuzz knows, they would revoke the very keys it acts
 * with, and every later case of that role would be refused.
 * test/auth/revocation.test.ts and the CLI and board tests cover them as a
 * board and the admin, bad input and other companies' ids included.
 */
const KEY_REVOKING = new Set(["rotateAgentKey", "rotateBoardKey", "disableAgent"]);
const mayRevoke = (role: Role) => role === "admin" || role === "boardA" || role === "boardB";

function rootFields(schema: GraphQLSchema, op: OpType): GraphQLField<unknown, unknown>[] {
  const root = op === "query" ? schema.getQueryType() : op === "mutation" ? schema.getMutationType() : schema.getSubscriptionType();
  return Object.values(root!.getFields()) as GraphQLField<unknown, unknown>[];
}

function pickField(b: Build, op: OpType): GraphQLField<unknown, unknown> {
  const fields = rootFields(b.gen.schema, op).filter((f) => !(KEY_REVOKING.has(f.name) && mayRevoke(b.role)));
  // Mostly a field this role may use, so that the verbs run as well as refuse.
  const allowed = fields.filter((f) => FIELD_ROLES[f.name]?.includes(b.role));
  if (allowed.length > 0 && b.rng.chance(0.7)) return b.rng.pick(allowed);
  return b.rng.pick(fields);
}

/** `field(args) { selection }`, with arguments possibly omitted, doubled or unknown. */
function fieldCall(b: Build, field: GraphQLField<unknown, unknown>): string {
  const { rng } = b;
  const args: string[] = [];
  for (const arg of field.args) {
    const required = isNonNullType(arg.type) && arg.defaultValue === undefined;
    if (!required && !rng.chance(0.5)) continue;
    if (required && rng.chance(b.malformedRate * 0.3)) {
      b.note(`missing-arg:${arg.name}`);
      continue;
    }
    const value = valueFor(b, arg.type, hintFor(field.name, arg.name), field.name);
    args.push(`${arg.name}: ${argText(b, arg.type, value)}`);
  }
  if (b.mode === "malformed" && rng.chance(0.06)) {
    b.note("unknown-arg");
    args.push(`${rng.pick(["nope", "companyId", "limit", "token"])}: ${rng.pick(['"x"', "1", "null", "true"])}`);
  }
  if (b.mode === "malformed" && rng.chance(0.03) && args.length > 0) {
    b.note("duplicate-arg");
    args.push(args[0]!);
  }
  const sel = selectionFor(b, field.type, 1);
  return `${field.name}${args.length ? `(${args.join(", ")})` : ""}${sel ? ` ${sel}` : ""}`;
}

/** Rewrites a built document into a shape that tests the bounds on depth, width, fragments and syntax. */
function shaped(
  b: Build,
  op: OpType,
  body: string,
): { body: string; extra?: string; operationName?: string | null; fragmentsOverride?: string[]; whole?: string } {
  const { rng } = b;
  const kind = rng.pick([
    "aliases",
    "repeat-field",
    "wide-set",
    "deep-invalid",
    "deep-introspection",
    "fragment-chain",
    "fragment-cycle",
    "fragment-unused",
    "unknown-field",
    "directives",
    "syntax",
    "two-operations",
    "introspection",
    "typename",
    "comments",
  ] as const);
  b.note(`shape:${kind}`);
  switch (kind) {
    case "aliases": {
      const n = rng.int(2, 36);
      const copies = Array.from({ length: n }, (_, i) => `x${i}: ${body}`);
      b.aliases += n;
      return { body: copies.join(" ") };
    }
    case "repeat-field":
      return { body: `${body} ${Array.from({ length: rng.int(2, 8) }, () => "__typename").join(" ")}` };
    case "wide-set": {
      const n = rng.pick([20, 51, 80]);
      return {
        body: `${body} ${Array.from({ length: n }, (_, i) => (rng.chance(0.5) ? `... on ${opRootName(op)} { __typename }` : `t${i}: __typename`)).join(" ")}`,
      };
    }
    case "deep-invalid": {
      const depth = rng.int(3, 14);
      return { body: `me ${"{ role ".repeat(depth)}${"}".repeat(depth)}` };
    }
    case "deep-introspection": {
      const level = (n: number): string => (n === 0 ? "name" : `name fields { type { ofType { ofType { ${level(n - 1)} } } } }`);
      return { body: `__schema { types { ${level(rng.int(1, 7))} } }` };
    }
    case "fragment-chain": {
      const n = rng.pick([3, 10, 49, 51, 60]);
      const root = opRootName(op);
      const fragments = Array.from({ length: n }, (_, i) => `fragment C${i} on ${root} { ${i === n - 1 ? body : `...C${i + 1}`} }`);
      return { body: "...C0", fragmentsOverride: fragments };
    }
    case "fragment-cycle": {
      const root = opRootName(op);
      return { body: `${body} ...Y0`, fragmentsOverride: [`fragment Y0 on ${root} { ...Y1 }`, `fragment Y1 on ${root} { ...Y0 }`] };
    }
    case "fragment-unused":
      return { body, extra: `fragment Unused on ${opRootName(op)} { __typename }` };
    case "unknown-field":
      return { body: `${body} ${rng.pick(["nope", "__nope", "nope { id }", "me { nope }", "issue { id }", "Issue"])}` };
    case "directives":
      return {
        body: rng.pick([
          `${body.replace(/^(\w+)/, "$1 @skip(if: true)")} __typename`,
          body.replace(/^(\w+)/, '$1 @include(if: "yes")'),
          body.replace(/^(\w+)/, "$1 @nope"),
          body.replace(/^(\w+)/, "$1 @skip"),
          body.replace(/^(\w+)/, "$1 @skip(if: false) @skip(if: false)"),
          body.replace(/^(\w+)/, "$1 @deprecated"),
        ]),
      };
    case "syntax":
      return { body: rng.pick(["{", "}", "(", "$", "...", "!!!", '"unterminated', "@", "query", "#"]) + body };
    case "two-operations":
      return { body, extra: `${op} Other { __typename }`, operationName: rng.pick(["Other", "Fuzz", "Nope", null, ""]) };
    case "introspection":
      // What GraphiQL sends: the whole document, in place of the one built.
      return { body, whole: getIntrospectionQuery({ descriptions: rng.chance(0.5) }) };
    case "typename":
      return { body: "__typename" };
    case "comments":
      return { body: `# ${"c".repeat(rng.pick([100, 5000]))}\n${body}` };
  }
}

function opRootName(op: OpType): string {
  return op === "query" ? "Query" : op === "mutation" ? "Mutation" : "Subscription";
}

function graphqlCase(b: Build, op: OpType): { request: GraphQLRequest; fields: string[]; op: OpType } {
  const { rng } = b;
  const count =
    op === "subscription"
      ? b.mode === "shape" && rng.chance(0.3)
        ? 2
        : 1
      : rng.weighted([
          [1, 85],
          [2, 10],
          [3, 5],
        ] as const);
  const fields: string[] = [];
  const calls: string[] = [];
  for (let i = 0; i < count; i++) {
    const field = pickField(b, op);
    fields.push(field.name);
    const call = fieldCall(b, field);
    calls.push(i > 0 || rng.chance(0.05) ? `r${i}: ${call}` : call);
  }
  if (op === "subscription" && count > 1) b.note("two-subscription-fields");
  let body = calls.join(" ");
  let extra: string | undefined;
  let operationName: string | null | undefined = rng.chance(0.3) ? "Fuzz" : undefined;
  let fragments = b.fragments;
  if (b.mode === "shape") {
    const s = shaped(b, op, body);
    body = s.body;
    extra = s.extra;
    if (s.operationName !== undefined) operationName = s.operationName;
    if (s.fragmentsOverride) fragments = [...b.fragments, ...s.fragmentsOverride];
    if (s.whole !== undefined) return { request: { query: s.whole }, fields: ["__schema"], op: "query" };
  }
  if (b.mode !== "valid" && rng.chance(0.04)) {
    b.note("unused-variable");
    b.varDefs.push(`$unused: Int`);
  }
  const named = operationName === undefined ? "" : ` ${operationName === "" || operationName === null ? "Fuzz" : operationName}`;
  const defs = b.varDefs.length ? `(${b.varDefs.join(", ")})` : "";
  // The shorthand `{ … }` for a query without a name or variables, now and then.
  const head = op === "query" && !named && !defs && rng.chance(0.5) ? "" : `${op}${named}${defs} `;
  let query = `${head}{ ${body} }`;
  for (const f of fragments) query += `\n${f}`;
  if (extra) query += `\n${extra}`;
  if (b.mode === "malformed" && rng.chance(0.04)) {
    b.note("truncated");
    query = query.slice(0, rng.int(0, query.length - 1));
  }
  const request: GraphQLRequest = { query };
  const hasVars = Object.keys(b.variables).length > 0;
  if (hasVars || rng.chance(0.2)) request.variables = hasVars ? b.variables : rng.pick([{}, null]);
  if (b.mode !== "valid" && rng.chance(0.05)) {
    b.note("extra-variables");
    request.variables = { ...(request.variables ?? {}), nope: "x", __proto__x: { a: [1, { b: null }] } };
  }
  if (operationName !== undefined) request.operationName = operationName;
  else if (rng.chance(0.05)) request.operationName = null;
  if (b.mode !== "valid" && rng.chance(0.03)) {
    b.note("operationName-unknown");
    request.operationName = "NotThere";
  }
  return { request, fields, op };
}

// ---------------------------------------------------------------- raw cases

function rawHttpCase(b: Build): { http: HttpShape; notes: string[] } {
  const { rng } = b;
  const ok = JSON.stringify({ query: "{ me { role } }" });
  const kinds: [string, () => HttpShape][] = [
    [
      "not-json",
      () => ({
        method: "POST",
        path: "/graphql",
        accept: "application/json",
        contentType: "application/json",
        body: rng.pick(["{not json", "", "{", '{"query": "{ me { role } }"', "\u0000", "undefined"]),
      }),
    ],
    [
      "json-not-object",
      () => ({
        method: "POST",
        path: "/graphql",
        accept: "application/json",
        contentType: "application/json",
        body: rng.pick(["null", "[]", "42", '"query"', "true", `[${ok}]`, `[${ok},${ok}]`]),
      }),
    ],
    [
      "bad-params",
      () => ({
        method: "POST",
        path: "/graphql",
        accept: "application/json",
        contentType: "application/json",
        body: rng.pick([
          JSON.stringify({ query: 5 }),
          JSON.stringify({ query: null }),
          JSON.stringify({ query: ["{ me { role } }"] }),
          JSON.stringify({ variables: {} }),
          JSON.stringify({ query: "{ me { role } }", variables: "nope" }),
          JSON.stringify({ query: "{ me { role } }", variables: [1, 2] }),
          JSON.stringify({ query: "{ me { role } }", variables: 5 }),
          JSON.stringify({ query: "{ me { role } }", extensions: "x" }),
          JSON.stringify({ query: "{ me { role } }", extensions: { headers: { authorization: 5 } } }),
          JSON.stringify({ query: "{ me { role } }", operationName: 5 }),
          JSON.stringify({ query: "{ me { role } }", operationName: { a: 1 } }),
          '{"query":"{ me { role } }","__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}',
          '{"query":"{ me { role } }","variables":{"__proto__":{"polluted":true}}}',
          `{"query":"{ me { role } }","variables":{"a":${"[".repeat(3000)}${"]".repeat(3000)}}}`,
          "[".repeat(20_000) + "]".repeat(20_000),
        ]),
      }),
    ],
    [
      "content-type",
      () => ({
        method: "POST",
        path: "/graphql",
        accept: "application/json",
        contentType: rng.pick([
          "text/plain",
          "application/x-www-form-urlencoded",
          "application/graphql",
          "multipart/form-data; boundary=xyz",
          "application/json; charset=utf-16",
          "application/xml",
          "application/graphql-response+json",
        ]),
        body: rng.pick([ok, "query=%7B%20me%20%7B%20role%20%7D%20%7D", "{ me { role } }", "--xyz\r\ngarbage", "--xyz--"]),
      }),
    ],
    [
      "get",
      () => {
        const params = new URLSearchParams();
        params.set(
          "query",
          rng.pick(["{ me { role } }", "mutation { startRun { id } }", 'subscription { lockChanged(companyId: "x") { seq } }', "{ me { role", ""]),
        );
        if (rng.chance(0.5)) params.set("variables", rng.pick(["{x", "{}", "null", "[]", '{"a":1}', "5", '"s"']));
        if (rng.chance(0.2)) params.set("operationName", rng.pick(["", "X", "{}"]));
        if (rng.chance(0.2)) params.set("extensions", rng.pick(["{x", "{}", "5"]));
        return { method: "GET", path: "/graphql", accept: "application/json", contentType: null, body: params.toString() };
      },
    ],
    [
      "method",
      () => ({
        method: rng.pick(["PUT", "DELETE", "PATCH", "OPTIONS"] as const),
        path: "/graphql",
        accept: "application/json",
        contentType: "application/json",
        body: ok,
      }),
    ],
    [
      "accept",
      () => ({
        method: "POST",
        path: "/graphql",
        accept: rng.pick(["application/xml", "multipart/mixed", "text/event-stream", "*/*", "application/graphql-response+json", "application/json;q=0"]),
        contentType: "application/json",
        body: ok,
      }),
    ],
    [
      "path",
      () => ({
        method: "POST",
        path: rng.pick(["/graphql/", "/graphql?x=1", "/graphql?query=%7B", "/graphql#frag"]),
        accept: "application/json",
        contentType: "application/json",
        body: ok,
      }),
    ],
    [
      "big-body",
      () => ({
        method: "POST",
        path: "/graphql",
        accept: "application/json",
        contentType: "application/json",
        body: JSON.stringify({ query: "{ me { role } }", variables: { pad: "p".repeat(rng.pick([16_000, 20_000, 200_000])) } }),
      }),
    ],
  ];
  const [name, make] = rng.pick(kinds);
  return { http: make(), notes: [`raw-http:${name}`] };
}

function rawWsCase(
  b: Build,
  authorization: string | null,
): { frames: (string | { binary: string })[]; subprotocol: string | null; notes: string[]; role?: Role } {
  const { rng, fixture } = b;
  const init = JSON.stringify({ type: "connection_init", payload: authorization === null ? {} : { authorization } });
  const sub = (id: string, query: string, extra: Record<string, unknown> = {}) => JSON.stringify({ type: "subscribe", id, payload: { query, ...extra } });
  const live = `subscription { lockChanged(companyId: "${fixture.A.id}") { seq } }`;
  const kinds: [string, () => (string | { binary: string })[]][] = [
    ["not-json", () => [rng.pick(["{not json", "", "null", "[]", "42", '"x"'])]],
    ["subscribe-before-init", () => [sub("1", "{ me { role } }")]],
    ["init-twice", () => [init, init]],
    ["duplicate-id", () => [init, sub("1", live), sub("1", live)]],
    ["unknown-type", () => [init, JSON.stringify({ type: rng.pick(["nope", "start", "connection_terminate", "next", "error"]), id: "1", payload: {} })]],
    ["ping", () => [init, JSON.stringify({ type: "ping" }), JSON.stringify({ type: "pong" }), sub("1", "{ me { role } }")]],
    ["complete-unknown", () => [init, JSON.stringify({ type: "complete", id: "nope" }), sub("2", "{ me { role } }")]],
    [
      "bad-payload",
      () => [
        init,
        JSON.stringify({
          type: "subscribe",
          id: "1",
          payload: rng.pick([{ query: 5 }, null, "x", { query: "{ me { role } }", variables: "v" }, { query: "{ me { role } }", extensions: 5 }]),
        }),
      ],
    ],
    ["huge-id", () => [init, sub("i".repeat(rng.pick([1000, 20_000])), "{ me { role } }")]],
    [
      "init-payload",
      () => {
        // None of these carries a token: the operations run without a key (if the socket stays open).
        role = "none";
        return [
          JSON.stringify({ type: "connection_init", payload: rng.pick<unknown>(["str", 5, [1], null, { authorization: 5 }, { authorization: { a: 1 } }]) }),
          sub("1", "{ me { role } }"),
        ];
      },
    ],
    ["binary", () => [init, { binary: sub("1", "{ me { role } }") }]],
    ["many-ops", () => [init, ...Array.from({ length: rng.int(2, 12) }, (_, i) => sub(String(i), i % 2 ? live : "{ me { role } }"))]],
    [
      "extensions-auth",
      () => {
        const own = rng.pick<unknown>([`Bearer ${fixture.B.boardKey}`, "Bearer nope", 5, null]);
        // The operation runs as its own Authorization: board B's key, or none (anything else is no key).
        role = own === `Bearer ${fixture.B.boardKey}` ? "boardB" : "none";
        return [init, sub("1", "{ me { role } }", { extensions: { headers: { Authorization: own } } })];
      },
    ],
  ];
  let role: Role | undefined;
  const [name, make] = rng.pick(kinds);
  const subprotocol = rng.weighted<string | null>([
    ["graphql-transport-ws", 90],
    [null, 4],
    ["graphql-ws", 3],
    ["nope", 3],
  ]);
  const notes = [`raw-ws:${name}`];
  if (subprotocol !== "graphql-transport-ws") notes.push(`subprotocol:${subprotocol}`);
  const frames = make();
  return { frames, subprotocol, notes, role };
}

// ---------------------------------------------------------------- one case

/** Generates case `index` of the run with seed `seed`. Pure: the same arguments give the same case. */
export function generateCase(gen: Generator, seed: number, index: number): FuzzCase {
  const rng = new Rng(caseSeed(seed, index));
  const fixture = gen.fixture;
  const transportKind = rng.weighted([
    ["http", 68],
    ["ws", 22],
    ["http-raw", 5],
    ["ws-raw", 5],
  ] as const);
  const role = rng.weighted(ROLE_WEIGHTS);
  const authorization = authorizationFor(rng, role, fixture);
  const base = { seed, index, role, authorization };

  if (transportKind === "http-raw") {
    const b = new Build(rng, gen, role, "malformed");
    const { http, notes } = rawHttpCase(b);
    return { ...base, transport: "http", operationType: "raw", fields: [], notes, http };
  }
  if (transportKind === "ws-raw") {
    const b = new Build(rng, gen, role, "malformed");
    const { frames, subprotocol, notes, role: asRole } = rawWsCase(b, authorization);
    return { ...base, role: asRole ?? role, transport: "ws-raw", operationType: "raw", fields: [], notes, frames, subprotocol };
  }

  const transport = transportKind;
  const op = rng.weighted<OpType>(
    transport === "ws"
      ? [
          ["query", 35],
          ["mutation", 30],
          ["subscription", 35],
        ]
      : [
          ["query", 47],
          ["mutation", 45],
          ["subscription", 8],
        ],
  );
  const mode = rng.weighted<Mode>([
    ["valid", 55],
    ["malformed", 35],
    ["shape", 10],
  ]);
  const b = new Build(rng, gen, role, mode);
  const built = graphqlCase(b, op);
  const { request, fields } = built;
  const c: FuzzCase = { ...base, transport, operationType: built.op, fields, notes: b.notes, request };

  if (transport === "http") {
    // Subscriptions over HTTP are event streams; queries now and then too, or GET.
    const accept =
      c.operationType === "subscription"
        ? rng.weighted<string | null>([
            ["text/event-stream", 85],
            ["application/json", 5],
            [null, 10],
          ])
        : rng.weighted<string | null>([
            ["application/json", 75],
            ["application/graphql-response+json, application/json", 10],
            ["text/event-stream", 5],
            [null, 10],
          ]);
    let method: HttpShape["method"] = "POST";
    if (c.operationType === "query" && rng.chance(0.07)) {
      const params = new URLSearchParams({ query: request.query });
      if (request.variables) params.set("variables", JSON.stringify(request.variables));
      if (request.operationName) params.set("operationName", request.operationName);
      // Past Node's header limit (16 KB) the HTTP parser itself answers 431; that is not the API's to type.
      if (params.toString().length < 8000) {
        method = "GET";
        c.http = { method, path: "/graphql", accept: accept ?? "application/json", contentType: null, body: params.toString() };
      }
    }
    c.http ??= { method, path: "/graphql", accept, contentType: "application/json" };
    return c;
  }

  // WebSocket: the token at connection_init, sometimes spelled oddly; sometimes the operation's own.
  const spelling = rng.weighted([
    ["authorization", 88],
    ["Authorization", 3],
    ["number", 3],
    ["object", 3],
    ["empty", 3],
  ] as const);
  if (spelling !== "authorization") {
    c.notes.push(`connectionParams:${spelling}`);
    // Only `authorization` (a string) is read: anything else connects without a key.
    c.role = "none";
    c.connectionParams =
      spelling === "Authorization"
        ? { Authorization: authorization }
        : spelling === "number"
          ? { authorization: 12345 }
          : spelling === "object"
            ? { authorization: { token: authorization } }
            : {};
  }
  if (rng.chance(0.05)) {
    const other = rng.pick(ROLES.filter((r) => r !== "garbage"));
    const token = tokenOf(other, fixture);
    request.extensions = { headers: { Authorization: token === null ? "" : `Bearer ${token}` } };
    c.notes.push(`operation-authorization:${other}`);
    // An empty Authorization of the operation's own is still its own: no key.
    c.role = other;
  }
  return c;
}

/** A short label for summaries. */
export function describeCase(c: FuzzCase): string {
  const what = c.operationType === "raw" ? c.notes.join(",") : `${c.operationType} ${c.fields.join("+")}`;
  return `#${c.index} ${c.transport}${c.http && c.http.method !== "POST" ? ` ${c.http.method}` : ""} as ${c.role}: ${what}${c.notes.length && c.operationType !== "raw" ? ` [${c.notes.join(", ")}]` : ""}`;
}
