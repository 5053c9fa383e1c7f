// The `baton` commands: the one table from a command's name (and, for a
// command with subcommands, its first word) to the handler that runs it. The
// table also writes `baton --help`, in its order. Each handler parses its own
// words, runs one or a few operations through the SDK, and prints a table (or,
// with --json, exactly one JSON document; one object per line for streams).
import { Usage } from "../kit.js";
import type { Context } from "../kit.js";
import { audit } from "./audit.js";
import { events } from "./events.js";
import { cancelIssue, createIssue, forceReleaseIssue, listIssues, requeueIssue, showIssue } from "./issues.js";
import { disableAgent, enableAgent, rotateAgentKey, rotateBoardKey } from "./keys.js";
import { listLimits, removeLimit, setLimit } from "./limits.js";
import { listRuns } from "./runs.js";
import { whoami } from "./whoami.js";
import { workCommand } from "./work.js";

/** Runs a command on the words after its name (after its subcommand's, for a subcommand); resolves to the exit code. */
type Handler = (ctx: Context, words: string[]) => Promise<number>;

/** A line of `baton --help`: `NAME args`, then what it does. */
interface Listed {
  args: string;
  what: string;
}

/** A command that is one handler, or one whose first word chooses among its subcommands (`usage`: the line `baton NAME` prints). */
type Command = Listed & ({ run: Handler } | { usage: string; verbs: Record<string, Handler> });

export const COMMANDS: Record<string, Command> = {
  whoami: { args: "", what: "the token's role, company and agent", run: whoami },
  issues: {
    args: "[--status S[,S…]] [--agent ID] [--limit N] [--company ID]",
    what: "list issues (oldest first), paging through the API",
    run: listIssues,
  },
  issue: {
    args: "show ID | create --title T [--key KEY] … | force-release ID --reason R | requeue ID | cancel ID",
    what: "one issue: show it, create one, or change it",
    usage:
      "Usage: baton issue show ID | create --title T [--priority P] [--assignee AGENT_ID] [--max-attempts N] [--key KEY]" +
      " | force-release ID --reason R | requeue ID | cancel ID",
    verbs: { show: showIssue, create: createIssue, "force-release": forceReleaseIssue, requeue: requeueIssue, cancel: cancelIssue },
  },
  limits: { args: "[--company ID]", what: "the company's concurrency limits: each limited key, its active issues and its cap", run: listLimits },
  limit: {
    args: "set KEY N | remove KEY",
    what: "cap a concurrency key at N active issues, or remove its cap (board key)",
    usage: "Usage: baton limit set KEY N | remove KEY   (a KEY that starts with '-' goes after --: baton limit set -- -KEY N)",
    verbs: { set: setLimit, remove: removeLimit },
  },
  runs: { args: "[--status S[,S…]] [--company ID]", what: "list runs, newest first, with the lease left", run: listRuns },
  audit: { args: "[--company ID]", what: "lockAudit; exit 1 when doubleClaims, halfReleasedLocks or miscountedKeys is not zero", run: audit },
  events: {
    args: "[--after-seq N] [--issue ID] [--agent ID] [--follow] [--company ID]",
    what: "the ledger, oldest first; --follow keeps streaming live",
    run: events,
  },
  agent: {
    args: "rotate-key ID | disable ID --reason R | enable ID",
    what: "an agent's key and state: a new key (shown once), disable it, enable it (board key, admin)",
    usage: "Usage: baton agent rotate-key ID | disable ID --reason R | enable ID",
    verbs: { "rotate-key": rotateAgentKey, disable: disableAgent, enable: enableAgent },
  },
  board: {
    args: "rotate-key [--company ID]",
    what: "a new board key (shown once); the old one stops working (board key; admin with --company)",
    usage: "Usage: baton board rotate-key [--company ID]   (the admin token names the company)",
    verbs: { "rotate-key": rotateBoardKey },
  },
  work: {
    args: "[--concurrency N] [--once] [--include-unassigned] [--drain-timeout S] -- COMMAND [ARGS…]",
    what: "run COMMAND once per issue, as a safe worker (agent key)",
    run: workCommand,
  },
};

/** "a", "a or b", "a, b or c". */
function oneOf(names: string[]): string {
  return names.length > 1 ? `${names.slice(0, -1).join(", ")} or ${names.at(-1)}` : names.join("");
}

/**
 * Runs `baton NAME words…`. A command with subcommands takes the first word as
 * the subcommand: none prints its usage and exits 2, --help prints it and exits
 * 0, an unknown one is bad usage.
 */
export async function runCommand(ctx: Context, name: string, command: Command, words: string[]): Promise<number> {
  if ("run" in command) return command.run(ctx, words);
  const [verb, ...rest] = words;
  if (verb === undefined || verb === "--help" || verb === "-h") {
    ctx.out(command.usage);
    return verb === undefined ? 2 : 0;
  }
  if (!Object.hasOwn(command.verbs, verb)) throw new Usage(`${name} ${verb}: expected ${oneOf(Object.keys(command.verbs))}`);
  return command.verbs[verb]!(ctx, rest);
}
