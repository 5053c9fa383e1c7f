// The `baton` commands: the one table from a command's name (and, for a
// command with subcommands, its first word) to the handler that runs it, with
// what it does and its options. The table writes `baton --help`, `baton
// COMMAND --help` and `baton COMMAND SUBCOMMAND --help`, and gives each handler
// its usage line. Each handler parses its own words, runs one or a few
// operations through the SDK, and prints a table (or, with --json, exactly one
// JSON document; one object per line for streams).
import { ISSUE_STATUSES, PRIORITIES, RUN_STATUSES, Usage } from "../kit.js";
import type { Context } from "../kit.js";
import { audit } from "./audit.js";
import { createCompany } from "./companies.js";
import { events } from "./events.js";
import { blockIssue, unblockIssue } from "./graph.js";
import { cancelIssue, createIssue, forceReleaseIssue, listIssues, listReady, requeueIssue, showIssue, updateIssue } from "./issues.js";
import { createAgent, disableAgent, enableAgent, listAgents, rotateAgentKey, rotateBoardKey } from "./keys.js";
import { listLimits, removeLimit, setLimit } from "./limits.js";
import { MCP_HELP, mcpCommand } from "./mcp.js";
import { listRuns } from "./runs.js";
import { whoami } from "./whoami.js";
import { workCommand, WORK_HELP } from "./work.js";

/** Runs a command on the words after its name (after its subcommand's), given its usage line; resolves to the exit code. */
type Handler = (ctx: Context, words: string[], usage: string) => Promise<number>;

/** One runnable command or subcommand, as its --help tells it. */
interface Entry {
  /** What follows the name on the usage line. */
  args: string;
  /** One line: what it does (`baton --help` lists it). */
  what: string;
  /** Its options, each `[flag, what it means (default)]`. */
  options?: [string, string][];
  /** Paragraphs after the options. */
  more?: string;
  run: Handler;
}

/** A command that is one entry, or one whose first word chooses among its subcommands. */
type Command = Entry | { what: string; verbs: Record<string, Entry> };

const COMPANY = ["--company ID", "the company to read (default: the token's own; the admin token must name one)"] as [string, string];
const listed = (values: readonly string[]) => values.join(", ");

export const COMMANDS: Record<string, Command> = {
  whoami: { args: "", what: "the token's role, company and agent", run: whoami },
  company: {
    what: "create a company (admin token)",
    verbs: {
      create: {
        args: "NAME",
        what: "create a company; prints its id and its board key, which is shown only once (admin token)",
        more: "The board key goes to stdout and nothing else (COMPANY_ID and BOARD_KEY on two lines); --json prints {companyId, name, boardKey}.",
        run: createCompany,
      },
    },
  },
  agents: {
    args: "[--company ID]",
    what: "the company's agents: name, id, state, and why a disabled one was disabled (board key, admin)",
    options: [COMPANY],
    run: listAgents,
  },
  agent: {
    what: "create an agent, or change its key and state (board key; admin for all but create)",
    verbs: {
      create: {
        args: "NAME",
        what: "create an agent; prints its id and its key, which is shown only once (board key)",
        more: "AGENT_ID and AGENT_KEY go to stdout on two lines; --json prints {agentId, name, apiKey}. `baton work` runs with that key.",
        run: createAgent,
      },
      "rotate-key": { args: "ID", what: "a new key for the agent, shown once; every key it had stops working", run: rotateAgentKey },
      disable: {
        args: "ID --reason R",
        what: "disable the agent: its keys stop working, its runs end and their locks are taken back",
        options: [["--reason R", "why (required; shown in `baton agents` and on the board)"]],
        run: disableAgent,
      },
      enable: { args: "ID", what: "enable a disabled agent (its old keys stay revoked: rotate-key gives it a new one)", run: enableAgent },
    },
  },
  issues: {
    args: "[--status S[,S…]] [--agent ID] [--parent ID] [--limit N] [--company ID]",
    what: "list issues (oldest first), with the assignee's name, paging through the API",
    options: [
      ["--status S[,S…]", `only issues in these statuses, any case: ${listed(ISSUE_STATUSES)} (default: all)`],
      ["--agent ID", "only issues assigned to this agent (default: any)"],
      ["--parent ID", "only the sub-issues of this issue (default: any)"],
      ["--limit N", "at most N issues (default 50)"],
      COMPANY,
    ],
    run: listIssues,
  },
  ready: {
    args: "[--agent ID] [--limit N] [--company ID]",
    what: "the ready issues: those a claim may take now (OPEN, an attempt left, waiting on nothing, not delayed), oldest first",
    options: [["--agent ID", "only issues assigned to this agent (default: any)"], ["--limit N", "at most N issues (default 50)"], COMPANY],
    more:
      "The same table as `baton issues`. An issue is missing from it while it waits on an issue that is not DONE\n" +
      "(`baton issue show ID`: waitingOn) or until its notBefore; a concurrency key at its limit is not counted.",
    run: listReady,
  },
  issue: {
    what: "one issue: show it, create one (or many), change it, make it wait on another",
    verbs: {
      show: {
        args: "ID",
        what: "every field of the issue: its parent, what it is blocked by and still waits on, notBefore, payload, result, its sub-issues",
        run: showIssue,
      },
      create: {
        args:
          "--title T [--priority P] [--assignee AGENT_ID] [--max-attempts N] [--description D] [--key KEY] [--blocked-by ID]… [--parent ID] " +
          "[--not-before T] [--retry-delay S] [--max-execution S] [--idempotency-key K] [--payload JSON|@FILE] | --from FILE",
        what: "create an issue, or one per line of a JSON-lines file (board key)",
        options: [
          ["--title T", "the title (required without --from)"],
          ["--priority P", `${listed(PRIORITIES)}, any case (default MEDIUM)`],
          ["--assignee AGENT_ID", "the agent it is for (default: none; `baton work --include-unassigned` takes those)"],
          ["--max-attempts N", "attempts before it is escalated, 1 to 100 (default 3)"],
          ["--description D", "a longer text (default: none)"],
          ["--key KEY", "its concurrency key, as typed (default: the unkeyed pool)"],
          ["--blocked-by ID", "an issue this one waits on until it is DONE; repeat it for several, up to 100 (default: none)"],
          ["--parent ID", "the issue this one is split from (default: none)"],
          ["--not-before T", "not claimable before T: ISO 8601 (2026-12-24T09:00:00Z) or from now, +90s, +10m, +2h, +1d (default: at once)"],
          ["--retry-delay S", "backoff base after a failed attempt, 0 to 86400 s: S × 2^(attempt − 1), at most a day (default 0: none)"],
          ["--max-execution S", "an execution held longer than S seconds (1 to 604800) is taken back (default: no limit)"],
          ["--idempotency-key K", "1 to 200 characters; if the company has an issue with K, nothing is created and that issue is printed"],
          ["--payload JSON|@FILE", "what the work needs, as JSON (at most 64 KB), or read from FILE (@- reads stdin); `baton work` hands it on"],
          ["--from FILE", 'one CreateIssueInput per line as JSON ({"title": …, "priority": …}); - reads stdin'],
        ],
        more:
          "With --from, every line is checked before anything is sent: a bad line is one error naming its line number, and nothing is created.\n" +
          "The lines go in createIssues calls of 1,000, each one transaction. Blank lines are skipped.\n" +
          "A relative --not-before is counted from this machine's clock; the server's decides when it has passed.",
        run: createIssue,
      },
      block: {
        args: "ID --on BLOCKER_ID [--run RUN_ID]",
        what: "ID waits on BLOCKER_ID: it is not claimed until BLOCKER_ID is DONE (board key)",
        options: [
          ["--on BLOCKER_ID", "the issue to wait on (required; same company)"],
          ["--run RUN_ID", "with an agent key: the run that holds ID (the board leaves it out)"],
        ],
        more:
          "A dependency that would close a cycle (BLOCKER_ID already waits, through others, on ID) is refused with the cycle in words: exit 1.\n" +
          "An issue that is held keeps its locks: the dependency counts from its next claim.",
        run: blockIssue,
      },
      unblock: {
        args: "ID --on BLOCKER_ID [--run RUN_ID]",
        what: "ID no longer waits on BLOCKER_ID (nothing changes if it did not) (board key)",
        options: [
          ["--on BLOCKER_ID", "the issue it waited on (required)"],
          ["--run RUN_ID", "with an agent key: the run that holds ID (the board leaves it out)"],
        ],
        more: "The way to free an issue whose blocker was CANCELLED: it waits on it for ever otherwise.",
        run: unblockIssue,
      },
      update: {
        args: "ID [--max-attempts N] [--priority P] [--assignee AGENT_ID | --unassign] [--title T] [--description D] [--key K | --no-key]",
        what: "change an issue's fields; only those given change (board key)",
        options: [
          ["--max-attempts N", "1 to 100: raise it to reopen an issue that has used its attempts (then `baton issue requeue ID`)"],
          ["--priority P", listed(PRIORITIES)],
          ["--assignee AGENT_ID", "give it to this agent"],
          ["--unassign", "give it to no agent"],
          ["--title T", "a new title"],
          ["--description D", "a new description"],
          ["--key K", "a new concurrency key (only while the issue is not CLAIMED or IN_PROGRESS)"],
          ["--no-key", "back to the unkeyed pool (same condition)"],
        ],
        run: updateIssue,
      },
      "force-release": {
        args: "ID --reason R",
        what: "take the issue back from whoever holds it, OPEN again (board key)",
        options: [["--reason R", "why (required; written to the ledger)"]],
        run: forceReleaseIssue,
      },
      requeue: { args: "ID", what: "back to OPEN (from BLOCKED, FAILED, ESCALATED…: the board's move)", run: requeueIssue },
      cancel: { args: "ID", what: "CANCELLED: no agent will claim it", run: cancelIssue },
    },
  },
  limits: {
    args: "[--company ID]",
    what: "the company's concurrency limits: each limited key, its active issues and its cap",
    options: [COMPANY],
    run: listLimits,
  },
  limit: {
    what: "cap a concurrency key at N active issues, or remove its cap (board key)",
    verbs: {
      set: {
        args: "KEY N",
        what: "at most N (1 to 10000) issues of KEY CLAIMED or IN_PROGRESS at once",
        more: "A KEY that starts with '-' goes after --: baton limit set -- -KEY N",
        run: setLimit,
      },
      remove: { args: "KEY", what: "no cap on KEY", run: removeLimit },
    },
  },
  runs: {
    args: "[--status S[,S…]] [--company ID]",
    what: "list runs, newest first, with the agent's name and the lease left",
    options: [["--status S[,S…]", `only runs in these statuses, any case: ${listed(RUN_STATUSES)} (default: all)`], COMPANY],
    run: listRuns,
  },
  audit: {
    args: "[--company ID]",
    what: "lockAudit; exit 1 when doubleClaims, halfReleasedLocks, miscountedKeys or miscountedWaits is not zero",
    options: [COMPANY],
    run: audit,
  },
  events: {
    args: "[--after-seq N] [--issue ID] [--agent ID] [--follow] [--company ID]",
    what: "the ledger, oldest first, with each issue's title and agent's name; --follow keeps streaming live",
    options: [
      ["--after-seq N", "only events after seq N (default: from the oldest kept)"],
      ["--issue ID", "only this issue's events"],
      ["--agent ID", "only this agent's events"],
      ["--follow", "after the history, keep printing events as they commit, until Ctrl-C"],
      COMPANY,
    ],
    run: events,
  },
  board: {
    what: "the company's board key",
    verbs: {
      "rotate-key": {
        args: "[--company ID]",
        what: "a new board key (shown once); the old one stops working (board key; the admin token names the company)",
        options: [COMPANY],
        run: rotateBoardKey,
      },
    },
  },
  mcp: {
    args: "",
    what: "serve the Model Context Protocol over stdio, for an LLM agent (agent key)",
    more: MCP_HELP,
    run: mcpCommand,
  },
  work: {
    args: "[--concurrency N] [--once] [--include-unassigned] [--drain-timeout S] [--json] -- COMMAND [ARGS…]",
    what: "run COMMAND once per issue, as a safe worker (agent key)",
    options: [
      ["--concurrency N", "issues run at once, 1 to 1000 (default 1); above 1, COMMAND's output lines start with [ISSUE_ID]"],
      ["--once", "drain: stop once nothing is claimable and nothing runs (as graphile-worker's --once); default: wait for new work"],
      ["--include-unassigned", "also claim issues assigned to no agent (default: only the agent's own)"],
      ["--drain-timeout S", "on Ctrl-C or SIGTERM, how long running commands may go on before they are stopped (default 30)"],
      ["--json", "progress as one JSON object per line on stderr, instead of readable lines"],
    ],
    more: WORK_HELP,
    run: workCommand,
  },
};

const GLOBAL_OPTIONS: [string, string][] = [
  ["--json", "one JSON document (one object per line for streams) instead of a table"],
  ["--url URL", "the API (default BATON_URL, else http://127.0.0.1:4000/graphql)"],
  ["--token TOKEN", "the key to use (default BATON_TOKEN)"],
  ["-h, --help", "this help"],
];

function optionLines(options: [string, string][]): string[] {
  const width = Math.max(...options.map(([flag]) => flag.length));
  return options.map(([flag, what]) => `  ${flag.padEnd(width)}  ${what}`);
}

/** `baton NAME [VERB] --help`: usage, what it does, its options with their defaults, and more. */
function entryHelp(name: string, entry: Entry): string {
  const lines = [`Usage: baton ${name}${entry.args ? ` ${entry.args}` : ""}`, "", `${entry.what[0]!.toUpperCase()}${entry.what.slice(1)}.`, "", "Options:"];
  const own = entry.options ?? [];
  lines.push(...optionLines([...own, ...GLOBAL_OPTIONS.filter(([flag]) => !own.some(([o]) => o === flag))]));
  if (entry.more) lines.push("", entry.more);
  return lines.join("\n");
}

/** `baton NAME --help` for a command with subcommands: each subcommand and what it does. */
function verbsHelp(name: string, verbs: Record<string, Entry>): string {
  const lines = Object.entries(verbs).map(([verb, e]) => [`baton ${name} ${verb}${e.args ? ` ${e.args}` : ""}`, e.what] as const);
  return [
    `Usage: baton ${name} ${Object.keys(verbs).join(" | ")} …`,
    "",
    ...lines.flatMap(([usage, what]) => [`  ${usage}`, `      ${what}`]),
    "",
    `baton ${name} SUBCOMMAND --help: that subcommand's options.`,
  ].join("\n");
}

/** `baton --help`'s list: one line per command, or per subcommand (its arguments are in its own --help). */
export function commandList(): string {
  const lines = Object.entries(COMMANDS).flatMap(([name, c]) =>
    "verbs" in c ? Object.entries(c.verbs).map(([verb, e]) => [`${name} ${verb}`, e.what] as const) : [[name, c.what] as const],
  );
  const width = Math.max(...lines.map(([name]) => name.length));
  return lines.map(([name, what]) => `  ${name.padEnd(width)}  ${what}`).join("\n");
}

/** "a", "a or b", "a, b or c". */
function oneOf(names: string[]): string {
  return names.length > 1 ? `${names.slice(0, -1).join(", ")} or ${names.at(-1)}` : names.join("");
}

/** Whether the words ask for help: --help or -h before any `--` (after it, the words are COMMAND's). */
function asksHelp(words: string[]): boolean {
  const dash = words.indexOf("--");
  return (dash === -1 ? words : words.slice(0, dash)).some((w) => w === "--help" || w === "-h");
}

/**
 * Runs `baton NAME words…`. A command with subcommands takes the first word as
 * the subcommand: none prints its list and exits 2, --help prints it and exits
 * 0, an unknown one is bad usage. --help anywhere before `--` prints the help
 * and runs nothing.
 */
export async function runCommand(ctx: Context, name: string, words: string[]): Promise<number> {
  if (!Object.hasOwn(COMMANDS, name)) throw new Usage(`unknown command '${name}'`);
  const command = COMMANDS[name]!;
  if (!("verbs" in command)) {
    if (!asksHelp(words)) return command.run(ctx, words, `${name}${command.args ? ` ${command.args}` : ""}`);
    ctx.out(entryHelp(name, command));
    return 0;
  }
  const [verb, ...rest] = words;
  if (verb === undefined || verb === "--help" || verb === "-h") {
    ctx.out(verbsHelp(name, command.verbs));
    return verb === undefined ? 2 : 0;
  }
  if (!Object.hasOwn(command.verbs, verb)) throw new Usage(`${name} ${verb}: expected ${oneOf(Object.keys(command.verbs))} (baton ${name} --help)`);
  const entry = command.verbs[verb]!;
  if (asksHelp(rest)) {
    ctx.out(entryHelp(`${name} ${verb}`, entry));
    return 0;
  }
  return entry.run(ctx, rest, `${name} ${verb}${entry.args ? ` ${entry.args}` : ""}`);
}
