#!/usr/bin/env node
// `baton`: Baton from a terminal or a script. Every command is a thin layer on
// the baton/client SDK. Exit codes: 0 done; 1 the server answered with a
// Problem (its __typename and message on stderr); 2 bad usage (a `baton
// work` COMMAND that cannot be started included);
// 3 UNAUTHENTICATED or FORBIDDEN; 4 the server could not be reached;
// 5 the ledger history asked for was pruned by retention (EVENTS_PRUNED);
// 6 the seq asked to resume after is ahead of the server's ledger (SEQ_AHEAD).
import { parseArgs } from "node:util";
import { Baton, BatonError, DEFAULT_URL } from "../client/index.js";
import { commandList, runCommand } from "./commands/index.js";
import { globalArgsProblem, MissingToken, Problem, Pruned, Usage, WrongKey } from "./kit.js";
import type { Context } from "./kit.js";
import { CannotRun } from "./processes.js";

const USAGE = `Usage: baton [--url URL] [--token TOKEN] [--json] COMMAND [ARGS…]

Commands:
${commandList()}

Connection: --url or BATON_URL (default ${DEFAULT_URL}), --token or BATON_TOKEN.
--json prints one JSON document (one object per line for streams).
Exit codes: 0 done, 1 the server answered with a problem, 2 bad usage,
3 unauthenticated or forbidden, 4 the server could not be reached,
5 the ledger history asked for was pruned by retention (events: the message
says which --after-seq continues with what is kept),
6 the --after-seq is ahead of every seq the server's database has made
(restored or failed over to an older copy: start again without it).
baton COMMAND --help (and baton COMMAND SUBCOMMAND --help): what it does, its options and their defaults.
`;

/** Splits `baton [global options] COMMAND [words…]`; the words go to the command's own parser. */
function split(argv: string[]): { global: string[]; command: string | undefined; rest: string[] } {
  const global: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("-")) break;
    global.push(arg);
    if ((arg === "--url" || arg === "--token") && i + 1 < argv.length) global.push(argv[++i]!);
  }
  return { global, command: argv[i], rest: argv.slice(i + 1) };
}

async function main(argv: string[]): Promise<number> {
  const { global, command, rest } = split(argv);
  let flags: { url?: string; token?: string; json?: boolean; help?: boolean };
  try {
    flags = parseArgs({
      args: global,
      options: { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" }, help: { type: "boolean", short: "h" } },
      strict: true,
    }).values;
  } catch (err) {
    throw globalArgsProblem(err);
  }
  if (flags.help || !command || (command === "help" && rest.length === 0)) {
    process.stdout.write(USAGE);
    return command || flags.help ? 0 : 2;
  }
  // --json may also come after the command, as users type it.
  const json = flags.json ?? false;
  const token = flags.token ?? process.env.BATON_TOKEN;
  const ctx: Context = {
    baton: new Baton({ url: flags.url ?? process.env.BATON_URL ?? DEFAULT_URL, ...(token ? { token } : {}) }),
    json,
    hasToken: Boolean(token),
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  };
  // `baton help COMMAND [SUBCOMMAND]` is `baton COMMAND [SUBCOMMAND] --help`.
  if (command === "help") return runCommand(ctx, rest[0]!, [...rest.slice(1), "--help"]);
  return runCommand(ctx, command, rest);
}

function exitCodeOf(err: unknown): { code: number; line: string } {
  if (err instanceof Usage) return { code: 2, line: `baton: ${err.message}${err.message.includes("--help") ? "" : " (see baton --help)"}` };
  if (err instanceof CannotRun) return { code: 2, line: `baton: ${err.message}` };
  if (err instanceof MissingToken || err instanceof WrongKey) return { code: 3, line: `baton: ${err.message}` };
  if (err instanceof Problem) return { code: 1, line: `baton: ${err.typename}: ${err.message}` };
  if (err instanceof Pruned) return { code: 5, line: `baton: EVENTS_PRUNED: ${err.message}` };
  if (err instanceof BatonError) {
    if (err.code === "UNAUTHENTICATED" || err.code === "FORBIDDEN") return { code: 3, line: `baton: ${err.code}: ${err.message}` };
    if (err.code === "UNREACHABLE") return { code: 4, line: `baton: ${err.message}` };
    if (err.code === "BAD_USER_INPUT") return { code: 2, line: `baton: ${err.message}` };
    if (err.code === "EVENTS_PRUNED") return { code: 5, line: `baton: ${err.code}: ${err.message}` };
    if (err.code === "SEQ_AHEAD") return { code: 6, line: `baton: ${err.code}: ${err.message}` };
    return { code: 1, line: `baton: ${err.code}: ${err.message}` };
  }
  return { code: 1, line: `baton: ${err instanceof Error ? err.message : String(err)}` };
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const { code, line } = exitCodeOf(err);
    process.stderr.write(`${line}\n`);
    process.exit(code);
  },
);
