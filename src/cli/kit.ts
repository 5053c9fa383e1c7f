// What every `baton` command uses: the context it runs in, the errors main.ts
// turns into exit codes, the word parser, the table printer and the company a
// token stands for. It imports no command, so any command may import it.
import { parseArgs } from "node:util";
import type { ParseArgsConfig } from "node:util";
import { Documents } from "../client/index.js";
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

/** parseArgs for a command, with --json and --help everywhere; refuses a missing token for commands that need one. */
export function parse<O extends ParseArgsConfig["options"]>(ctx: Context, words: string[], usage: string, options: O, positionals = 0) {
  const parsed = (() => {
    try {
      return parseArgs({
        args: words,
        options: { ...options, json: { type: "boolean" }, help: { type: "boolean", short: "h" } },
        allowPositionals: positionals > 0,
        strict: true,
      });
    } catch (err) {
      throw new Usage((err as Error).message);
    }
  })();
  const values = parsed.values as Record<string, unknown>;
  if (values.help) {
    ctx.out(`Usage: baton ${usage}`);
    return null;
  }
  if (parsed.positionals.length !== positionals) throw new Usage(`expected: baton ${usage}`);
  if (values.json) ctx.json = true;
  if (!ctx.hasToken) throw new MissingToken();
  return { values, positionals: parsed.positionals };
}

/** Columns padded to their widest cell; the last column is cut to the terminal's width. */
export function table(ctx: Context, header: string[], rows: (string | number | null | undefined)[][]): void {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? "" : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)));
  const width = process.stdout.columns ?? 160;
  for (const row of cells) {
    const line = row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join("  ");
    ctx.out(line.length > width ? `${line.slice(0, width - 1)}…` : line);
  }
}

/** A --status value as the API's list of statuses, upper-cased (the server refuses an unknown one); null when not given. */
export function statuses<S extends string>(value: unknown): S[] | null {
  return typeof value === "string"
    ? (value
        .split(",")
        .map((s) => s.trim().toUpperCase())
        .filter(Boolean) as S[])
    : null;
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
