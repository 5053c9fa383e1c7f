// What every `baton` command uses: the context it runs in, the errors main.ts
// turns into exit codes, the word parser, the table printer and the company a
// token stands for. It imports no command, so any command may import it.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { ParseArgsConfig } from "node:util";
import { BatonError, MAX_JSON_BYTES } from "../client/index.js";
import * as Documents from "./generated/graphql.js";
import type { Baton } from "../client/index.js";

export interface Context {
  baton: Baton;
  json: boolean;
  hasToken: boolean;
  out(line: string): void;
  err(line: string): void;
}

/** Bad usage: exit 2. */
export class Usage extends Error {}

/** A command that needs a token ran without one: exit 3. */
export class MissingToken extends Error {
  constructor() {
    super("no token: pass --token or set BATON_TOKEN");
  }
}

/** The token is the wrong kind for the command (a board key for `baton work`): exit 3. */
export class WrongKey extends Error {}

/** The server answered with a Problem (a union member, not an error): exit 1. */
export class Problem extends Error {
  constructor(
    readonly typename: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The history asked for is gone: retention pruned events after `afterSeq`
 * (EVENTS_PRUNED). Exit 5; the line says where the kept history resumes.
 */
export class Pruned extends Error {
  constructor(
    readonly afterSeq: string,
    readonly resumeAfterSeq: string,
    readonly oldestAvailableSeq: string | null,
  ) {
    super(
      `history up to seq ${resumeAfterSeq} was pruned by retention, so the events after seq ${afterSeq} are no longer all kept; ` +
        `to continue with what is kept, run again with --after-seq ${resumeAfterSeq}` +
        (oldestAvailableSeq === null ? " (no later event is kept yet)" : ` (the oldest event kept is ${oldestAvailableSeq})`),
    );
  }
}

/** Why parseArgs refused the words, in our words: the option or argument named, and where the command's options are listed. */
function argsProblem(err: unknown, usage: string): Usage {
  const { code, message } = err as { code?: string; message: string };
  const quoted = /'([^']*)'/.exec(message)?.[1] ?? "";
  const help = `baton ${commandWords(usage) ? `${commandWords(usage)} ` : ""}--help`;
  const name = quoted.split(" ")[0]!;
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") return new Usage(`unknown option ${name} (${help} lists the options)`);
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    return new Usage(message.includes("does not take") ? `${name} takes no value` : `${name} needs a value (${help})`);
  }
  if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") return new Usage(`unexpected argument '${quoted}': expected baton ${usage}`);
  return new Usage(`cannot read the arguments: expected baton ${usage}`);
}

/** The command's own words at the start of its usage line: "issue show" of "issue show ID". */
function commandWords(usage: string): string {
  const words: string[] = [];
  for (const word of usage.split(" ")) {
    if (!/^[a-z][a-z-]*$/.test(word)) break;
    words.push(word);
  }
  return words.join(" ");
}

/** parseArgs for a command, with --json everywhere (--help is answered from the command table first); refuses a missing token. */
export function parse<O extends ParseArgsConfig["options"]>(ctx: Context, words: string[], usage: string, options: O, positionals = 0) {
  const parsed = (() => {
    try {
      return parseArgs({ args: words, options: { ...options, json: { type: "boolean" } }, allowPositionals: positionals > 0, strict: true });
    } catch (err) {
      throw argsProblem(err, usage);
    }
  })();
  const values = parsed.values as Record<string, unknown>;
  if (parsed.positionals.length !== positionals) throw new Usage(`expected: baton ${usage}`);
  if (values.json) ctx.json = true;
  if (!ctx.hasToken) throw new MissingToken();
  return { values, positionals: parsed.positionals };
}

/** The global options' refusal (before the command), in the same words. */
export function globalArgsProblem(err: unknown): Usage {
  return argsProblem(err, "");
}

/** A list of every value of the API's enum `T`, each once: tsc refuses one that misses a value or adds one. */
const every =
  <T extends string>() =>
  <L extends readonly T[]>(list: L & ([Exclude<T, L[number]>] extends [never] ? unknown : "misses a value of the enum")): L =>
    list;

export const ISSUE_STATUSES = every<Documents.IssueStatus>()([
  "BACKLOG",
  "OPEN",
  "CLAIMED",
  "IN_PROGRESS",
  "BLOCKED",
  "DONE",
  "CANCELLED",
  "ESCALATED",
] as const);
export const RUN_STATUSES = every<Documents.RunStatus>()(["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"] as const);
export const PRIORITIES = every<Documents.IssuePriority>()(["CRITICAL", "HIGH", "MEDIUM", "LOW"] as const);

/** One of `allowed`, case-insensitive; anything else is bad usage naming the allowed values. */
export function oneOf<S extends string>(flag: string, value: string, allowed: readonly S[]): S {
  const upper = value.trim().toUpperCase();
  if ((allowed as readonly string[]).includes(upper)) return upper as S;
  throw new Usage(`${flag} ${JSON.stringify(value)} is not one of ${allowed.join(", ")}`);
}

/** A --status value (comma-separated, any case) checked against `allowed` before any request; null when not given. */
export function statuses<S extends string>(value: unknown, allowed: readonly S[]): S[] | null {
  if (typeof value !== "string") return null;
  const given = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (given.length === 0) throw new Usage(`--status needs at least one of ${allowed.join(", ")}`);
  return given.map((s) => oneOf("--status", s, allowed));
}

/** A whole-number option from `min` to `max`; `fallback` when not given. */
export function wholeNumber(flag: string, value: unknown, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  const n = typeof value === "string" && /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
  if (!(n >= min && n <= max)) throw new Usage(`${flag} must be a whole number from ${min} to ${max}, not ${JSON.stringify(value)}`);
  return n;
}

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;

/**
 * An instant as the API takes it (ISO 8601, UTC): `value` is one already
 * (2026-12-24T09:00:00Z; without a zone, this machine's), or a time from now,
 * +N followed by s, m, h or d (+90s, +10m, +2h, +1d), counted on this machine's clock.
 */
export function instant(flag: string, value: string): string {
  const relative = /^\+(\d{1,9})([smhd])$/.exec(value.trim());
  if (relative) return new Date(Date.now() + Number(relative[1]) * UNIT_SECONDS[relative[2] as keyof typeof UNIT_SECONDS] * 1000).toISOString();
  const at = /^\d{4}-\d{2}-\d{2}/.test(value.trim()) ? Date.parse(value.trim()) : Number.NaN;
  if (Number.isNaN(at)) {
    throw new Usage(`${flag} must be an ISO 8601 instant (2026-12-24T09:00:00Z) or a time from now (+90s, +10m, +2h, +1d), not ${JSON.stringify(value)}`);
  }
  return new Date(at).toISOString();
}

/**
 * A JSON value given on the command line: the JSON itself, or @FILE to read it
 * from FILE (@- from stdin). At most 64 KB once serialised, as the API keeps it.
 */
export function jsonArg(flag: string, value: string): unknown {
  let text = value;
  if (value.startsWith("@")) {
    const file = value.slice(1);
    try {
      text = readFileSync(file === "-" ? 0 : file, "utf8");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new Usage(`${flag} ${value}: ${code === "ENOENT" ? "no such file" : code === "EISDIR" ? "a directory" : (code ?? "cannot be read")}`);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const said = (err as Error).message.replace(/\s+/g, " ");
    throw new Usage(`${flag} is not JSON (${said}): give a JSON value, such as '{"repo": "acme/web"}', or @FILE to read one from a file`);
  }
  const bytes = Buffer.byteLength(JSON.stringify(parsed), "utf8");
  if (bytes > MAX_JSON_BYTES) throw new Usage(`${flag} is ${bytes} bytes of JSON; at most ${MAX_JSON_BYTES}`);
  return parsed;
}

/**
 * The company's agents, id to name, in one request; empty for a token that may
 * not list them (an agent key), whose tables then show ids.
 */
export async function agentNames(ctx: Context, companyId: string): Promise<Map<string, string>> {
  try {
    const { agents } = await ctx.baton.request(Documents.CliAgentsDocument, { companyId });
    return new Map(agents.map((a) => [a.id, a.name]));
  } catch (err) {
    if (err instanceof BatonError && err.code === "FORBIDDEN") return new Map();
    throw err;
  }
}

/** A cell that names what an id stands for, cut to `width` (--json keeps it whole). */
export function cut(text: string | null | undefined, width: number): string {
  if (!text) return "";
  const line = text.replace(/\s+/g, " ");
  return line.length > width ? `${line.slice(0, width - 1)}…` : line;
}

/** Columns padded to their widest cell; the last column is cut to the terminal's width. */
export function table(ctx: Context, header: string[], rows: (string | number | null | undefined)[][]): void {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? "" : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  const width = process.stdout.columns ?? 160;
  for (const row of cells) {
    const line = row
      .map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
    ctx.out(line.length > width ? `${line.slice(0, width - 1)}…` : line);
  }
}

/** The company a command reads: --company when given, else the token's own (an admin token has none: bad usage). */
export async function companyOf(ctx: Context, explicit?: unknown): Promise<string> {
  if (typeof explicit === "string") return explicit;
  const { me } = await ctx.baton.request(Documents.MeDocument, {});
  if (!me.companyId) throw new Usage("the admin token belongs to no company: pass --company ID");
  return me.companyId;
}

/** A result union: its member `wanted`, or a Problem thrown (exit 1). */
export function expect<T extends { __typename: string }, K extends T["__typename"]>(result: T, wanted: K): Extract<T, { __typename: K }> {
  if (result.__typename !== wanted) throw new Problem(result.__typename, (result as { message?: string }).message ?? "");
  return result as Extract<T, { __typename: K }>;
}
