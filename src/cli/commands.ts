// The `baton` commands. Each parses its own words, runs one or a few
// operations through the SDK, and prints a table (or, with --json, exactly
// one JSON document; one object per line for streams).
import { parseArgs } from "node:util";
import type { ParseArgsConfig } from "node:util";
import { Documents, EventsPrunedError } from "../client/index.js";
import type { Baton } from "../client/index.js";
import { workCommand } from "./work.js";

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

interface Command {
  args: string;
  what: string;
  run(ctx: Context, words: string[]): Promise<number>;
}

/** parseArgs for a command, with --json and --help everywhere; refuses a missing token for commands that need one. */
export function parse<O extends ParseArgsConfig["options"]>(ctx: Context, words: string[], usage: string, options: O, positionals = 0) {
  let parsed;
  try {
    parsed = parseArgs({ args: words, options: { ...options, json: { type: "boolean" }, help: { type: "boolean", short: "h" } }, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new Usage((err as Error).message);
  }
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

const ISSUE_FIELDS = "id status priority concurrencyKey title assigneeAgentId checkoutRunId executionRunId attemptCount maxAttempts lockEpoch createdAt updatedAt";
const list = (value: unknown) => (typeof value === "string" ? value.split(",").map((s) => s.trim().toUpperCase()).filter(Boolean) : null);

async function companyOf(ctx: Context, explicit?: unknown): Promise<string> {
  if (typeof explicit === "string") return explicit;
  const { me } = await ctx.baton.request<{ me: { companyId: string | null } }>(`{ me { companyId } }`);
  if (!me.companyId) throw new Usage("the admin token belongs to no company: pass --company ID");
  return me.companyId;
}

/** A result union: its member, or a Problem thrown (exit 1). */
function expect<T extends { __typename: string; message?: string }>(result: T, wanted: string): T {
  if (result.__typename !== wanted) throw new Problem(result.__typename, result.message ?? "");
  return result;
}

type Issue = Record<string, unknown> & { id: string };

/** A key as a table shows it: "-" for the unkeyed pool, a long one cut (--json has it whole). */
const KEY_WIDTH = 32;
/** A command's first word names its subcommand: none prints the usage and exits 2, --help prints it and exits 0. */
function subcommand(ctx: Context, words: string[], usage: string): [verb: string, rest: string[]] | number {
  const [verb, ...rest] = words;
  if (verb === undefined || verb === "--help" || verb === "-h") {
    ctx.out(usage);
    return verb === undefined ? 2 : 0;
  }
  return [verb, rest];
}

function keyCell(key: unknown): string {
  if (typeof key !== "string") return "-";
  return key.length > KEY_WIDTH ? `${key.slice(0, KEY_WIDTH - 1)}…` : key;
}

function printIssues(ctx: Context, issues: Issue[]): void {
  if (ctx.json) return ctx.out(JSON.stringify(issues));
  table(
    ctx,
    ["ID", "STATUS", "PRIORITY", "KEY", "ATTEMPTS", "EPOCH", "TITLE"],
    issues.map((i) => [i.id, i.status as string, i.priority as string, keyCell(i.concurrencyKey), `${i.attemptCount}/${i.maxAttempts}`, i.lockEpoch as number, i.title as string]),
  );
}

type Limit = Documents.ConcurrencyLimitFieldsFragment;

function printLimits(ctx: Context, limits: Limit[]): void {
  if (ctx.json) return ctx.out(JSON.stringify(limits));
  table(
    ctx,
    ["KEY", "ACTIVE", "MAX", "STATE"],
    // The key whole: it is what `baton limit set` and `remove` take.
    limits.map((l) => [l.key, l.active, l.maxActive, l.active >= l.maxActive ? "at limit" : ""]),
  );
}

type Agent = Documents.AgentFieldsFragment;

function printAgent(ctx: Context, agent: Agent): void {
  if (ctx.json) return ctx.out(JSON.stringify(agent));
  for (const [k, v] of Object.entries(agent)) ctx.out(`${k.padEnd(22)} ${v ?? ""}`);
}

/**
 * A new key, shown once: with --json, {"apiKey": "…"}; otherwise the key alone
 * on stdout (so that KEY=$(baton … rotate-key …) holds just the key) and what it
 * is on stderr. It goes nowhere else: no log line, no error message.
 */
function printNewKey(ctx: Context, apiKey: string, whose: string): void {
  if (ctx.json) return ctx.out(JSON.stringify({ apiKey }));
  ctx.err(`baton: the new key for ${whose}, shown once: keep it now. The key it replaces no longer works.`);
  ctx.out(apiKey);
}

/** setConcurrencyLimit's bounds (the server checks them too). */
const MAX_LIMIT = 10_000;

export const COMMANDS: Record<string, Command> = {
  whoami: {
    args: "",
    what: "the token's role, company and agent",
    async run(ctx, words) {
      if (!parse(ctx, words, "whoami", {})) return 0;
      const { me } = await ctx.baton.request<{ me: { role: string; companyId: string | null; agentId: string | null } }>(`{ me { role companyId agentId } }`);
      if (ctx.json) ctx.out(JSON.stringify(me));
      else table(ctx, ["ROLE", "COMPANY", "AGENT"], [[me.role, me.companyId, me.agentId]]);
      return 0;
    },
  },

  issues: {
    args: "[--status S[,S…]] [--agent ID] [--limit N] [--company ID]",
    what: "list issues (oldest first), paging through the API",
    async run(ctx, words) {
      const usage = "issues [--status S[,S…]] [--agent ID] [--limit N] [--company ID]";
      const p = parse(ctx, words, usage, { status: { type: "string" }, agent: { type: "string" }, limit: { type: "string" }, company: { type: "string" } });
      if (!p) return 0;
      const limit = p.values.limit === undefined ? 50 : Number(p.values.limit);
      if (!Number.isInteger(limit) || limit < 1) throw new Usage("--limit must be a whole number of at least 1");
      const companyId = await companyOf(ctx, p.values.company);
      const issues: Issue[] = [];
      let after: string | null = null;
      while (issues.length < limit) {
        type Page = { issues: { edges: { node: Issue }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } };
        const { issues: page }: Page = await ctx.baton.request<Page>(
          `query($c: ID!, $s: [IssueStatus!], $a: ID, $first: Int, $after: String) { issues(companyId: $c, status: $s, assigneeAgentId: $a, first: $first, after: $after) { edges { node { ${ISSUE_FIELDS} } } pageInfo { hasNextPage endCursor } } }`,
          { c: companyId, s: list(p.values.status), a: p.values.agent ?? null, first: Math.min(500, limit - issues.length), after },
        );
        issues.push(...page.edges.map((e) => e.node));
        if (!page.pageInfo.hasNextPage) break;
        after = page.pageInfo.endCursor;
      }
      printIssues(ctx, issues);
      return 0;
    },
  },

  issue: {
    args: "show ID | create --title T [--key KEY] … | force-release ID --reason R | requeue ID | cancel ID",
    what: "one issue: show it, create one, or change it",
    async run(ctx, words) {
      const chosen = subcommand(ctx, words, "Usage: baton issue show ID | create --title T [--priority P] [--assignee AGENT_ID] [--max-attempts N] [--key KEY] | force-release ID --reason R | requeue ID | cancel ID");
      if (typeof chosen === "number") return chosen;
      const [verb, rest] = chosen;
      switch (verb) {
        case "show": {
          const p = parse(ctx, rest, "issue show ID", {}, 1);
          if (!p) return 0;
          const { issue } = await ctx.baton.request<{ issue: Issue | null }>(`query($id: ID!) { issue(id: $id) { ${ISSUE_FIELDS} companyId description executionAgentNameKey claimedAt executionLockedAt } }`, { id: p.positionals[0]! });
          if (!issue) throw new Problem("IssueNotFound", `no issue ${p.positionals[0]} that this token may see`);
          if (ctx.json) ctx.out(JSON.stringify(issue));
          else for (const [k, v] of Object.entries(issue)) ctx.out(`${k.padEnd(22)} ${v ?? ""}`);
          return 0;
        }
        case "create": {
          const usage = "issue create --title T [--priority P] [--assignee AGENT_ID] [--max-attempts N] [--description D] [--key KEY]";
          const p = parse(ctx, rest, usage, {
            title: { type: "string" },
            priority: { type: "string" },
            assignee: { type: "string" },
            "max-attempts": { type: "string" },
            description: { type: "string" },
            key: { type: "string" },
          });
          if (!p) return 0;
          if (typeof p.values.title !== "string") throw new Usage(`--title is required: baton ${usage}`);
          const input: Record<string, unknown> = { title: p.values.title };
          if (p.values.priority) input.priority = String(p.values.priority).toUpperCase();
          if (p.values.assignee) input.assigneeAgentId = p.values.assignee;
          if (p.values.description) input.description = p.values.description;
          if (p.values["max-attempts"] !== undefined) input.maxAttempts = Number(p.values["max-attempts"]);
          // The concurrency key, as typed (keys are compared exactly); without it, the unkeyed pool.
          if (typeof p.values.key === "string") input.concurrencyKey = p.values.key;
          const { createIssue } = await ctx.baton.request<{ createIssue: Issue }>(`mutation($i: CreateIssueInput!) { createIssue(input: $i) { ${ISSUE_FIELDS} } }`, { i: input });
          if (ctx.json) ctx.out(JSON.stringify(createIssue));
          else printIssues(ctx, [createIssue]);
          return 0;
        }
        case "force-release": {
          const p = parse(ctx, rest, "issue force-release ID --reason R", { reason: { type: "string" } }, 1);
          if (!p) return 0;
          if (typeof p.values.reason !== "string") throw new Usage("--reason is required");
          const { forceReleaseIssue } = await ctx.baton.request<{ forceReleaseIssue: { __typename: string; message?: string; issue?: Issue } }>(
            `mutation($id: ID!, $r: String!) { forceReleaseIssue(issueId: $id, reason: $r) { __typename ... on IssueReleased { issue { ${ISSUE_FIELDS} } } ... on Problem { message } } }`,
            { id: p.positionals[0]!, r: p.values.reason },
          );
          printIssues(ctx, [expect(forceReleaseIssue, "IssueReleased").issue!]);
          return 0;
        }
        case "requeue":
        case "cancel": {
          const p = parse(ctx, rest, `issue ${verb} ID`, {}, 1);
          if (!p) return 0;
          const { updateIssue } = await ctx.baton.request<{ updateIssue: { __typename: string; message?: string; issue?: Issue } }>(
            `mutation($id: ID!, $s: IssueStatus!) { updateIssue(id: $id, input: { status: $s }) { __typename ... on IssueUpdated { issue { ${ISSUE_FIELDS} } } ... on Problem { message } } }`,
            { id: p.positionals[0]!, s: verb === "requeue" ? "OPEN" : "CANCELLED" },
          );
          printIssues(ctx, [expect(updateIssue, "IssueUpdated").issue!]);
          return 0;
        }
        default:
          throw new Usage(`issue ${verb}: expected show, create, force-release, requeue or cancel`);
      }
    },
  },

  limits: {
    args: "[--company ID]",
    what: "the company's concurrency limits: each limited key, its active issues and its cap",
    async run(ctx, words) {
      const p = parse(ctx, words, "limits [--company ID]", { company: { type: "string" } });
      if (!p) return 0;
      const companyId = await companyOf(ctx, p.values.company);
      const { concurrencyLimits } = await ctx.baton.request(Documents.ConcurrencyLimitsDocument, { companyId });
      printLimits(ctx, concurrencyLimits);
      return 0;
    },
  },

  limit: {
    args: "set KEY N | remove KEY",
    what: "cap a concurrency key at N active issues, or remove its cap (board key)",
    async run(ctx, words) {
      const chosen = subcommand(ctx, words, "Usage: baton limit set KEY N | remove KEY   (a KEY that starts with '-' goes after --: baton limit set -- -KEY N)");
      if (typeof chosen === "number") return chosen;
      const [verb, rest] = chosen;
      switch (verb) {
        case "set": {
          const p = parse(ctx, rest, "limit set KEY N", {}, 2);
          if (!p) return 0;
          const [key, n] = p.positionals as [string, string];
          const maxActive = /^\d+$/.test(n) ? Number(n) : NaN;
          if (!(maxActive >= 1 && maxActive <= MAX_LIMIT)) throw new Usage(`N must be a whole number from 1 to ${MAX_LIMIT} (baton limit remove KEY removes a cap)`);
          const { setConcurrencyLimit } = await ctx.baton.request(Documents.SetConcurrencyLimitDocument, { key, maxActive });
          printLimits(ctx, setConcurrencyLimit ? [setConcurrencyLimit] : []); // with a maxActive, the answer is the limit
          return 0;
        }
        case "remove": {
          const p = parse(ctx, rest, "limit remove KEY", {}, 1);
          if (!p) return 0;
          const key = p.positionals[0]!;
          await ctx.baton.request(Documents.SetConcurrencyLimitDocument, { key, maxActive: null });
          if (ctx.json) ctx.out(JSON.stringify({ key, maxActive: null }));
          else ctx.out(`${key}: no limit`);
          return 0;
        }
        default:
          throw new Usage(`limit ${verb}: expected set or remove`);
      }
    },
  },

  runs: {
    args: "[--status S[,S…]] [--company ID]",
    what: "list runs, newest first, with the lease left",
    async run(ctx, words) {
      const p = parse(ctx, words, "runs [--status S[,S…]] [--company ID]", { status: { type: "string" }, company: { type: "string" } });
      if (!p) return 0;
      const companyId = await companyOf(ctx, p.values.company);
      const { runs } = await ctx.baton.request<{ runs: { id: string; agentId: string; status: string; leaseExpiresAt: string; lastHeartbeatAt: string }[] }>(
        `query($c: ID!, $s: [RunStatus!]) { runs(companyId: $c, status: $s, first: 500) { id agentId status lastHeartbeatAt leaseExpiresAt } }`,
        { c: companyId, s: list(p.values.status) },
      );
      if (ctx.json) ctx.out(JSON.stringify(runs));
      else {
        const left = (r: { status: string; leaseExpiresAt: string }) =>
          r.status === "RUNNING" ? `${Math.max(0, Math.round((Date.parse(r.leaseExpiresAt) - Date.now()) / 1000))} s` : "";
        table(ctx, ["ID", "AGENT", "STATUS", "LEASE LEFT"], runs.map((r) => [r.id, r.agentId, r.status, left(r)]));
      }
      return 0;
    },
  },

  audit: {
    args: "[--company ID]",
    what: "lockAudit; exit 1 when doubleClaims, halfReleasedLocks or miscountedKeys is not zero",
    async run(ctx, words) {
      const p = parse(ctx, words, "audit [--company ID]", { company: { type: "string" } });
      if (!p) return 0;
      const companyId = await companyOf(ctx, p.values.company);
      const { lockAudit } = await ctx.baton.request<{ lockAudit: Record<string, unknown> & { doubleClaims: number; halfReleasedLocks: number; miscountedKeys: number } }>(
        `query($c: ID!) { lockAudit(companyId: $c) { doubleClaims halfReleasedLocks miscountedKeys locksHeldByDeadRuns unescalatedExhausted attemptHistogram { attemptCount issues } } }`,
        { c: companyId },
      );
      if (ctx.json) ctx.out(JSON.stringify(lockAudit));
      else for (const [k, v] of Object.entries(lockAudit)) ctx.out(`${k.padEnd(22)} ${typeof v === "object" ? JSON.stringify(v) : v}`);
      return lockAudit.doubleClaims === 0 && lockAudit.halfReleasedLocks === 0 && lockAudit.miscountedKeys === 0 ? 0 : 1;
    },
  },

  events: {
    args: "[--after-seq N] [--issue ID] [--agent ID] [--follow] [--company ID]",
    what: "the ledger, oldest first; --follow keeps streaming live",
    async run(ctx, words) {
      const usage = "events [--after-seq N] [--issue ID] [--agent ID] [--follow] [--company ID]";
      const p = parse(ctx, words, usage, { "after-seq": { type: "string" }, issue: { type: "string" }, agent: { type: "string" }, follow: { type: "boolean" }, company: { type: "string" } });
      if (!p) return 0;
      // Following, Ctrl-C or SIGTERM ends it cleanly (exit 0) at any point, paging included.
      let stopped = false;
      let stream: AsyncIterableIterator<unknown> | null = null;
      if (p.values.follow) {
        const stop = () => {
          stopped = true;
          void stream?.return?.();
        };
        process.once("SIGINT", stop).once("SIGTERM", stop);
      }
      const companyId = await companyOf(ctx, p.values.company);
      const print = (e: { seq: string; at: string; kind: string; status: string; issueId: string; agentId?: string | null; reason?: string | null }) =>
        ctx.out(ctx.json ? JSON.stringify(e) : [e.seq, e.at, e.kind, e.status, e.issueId, e.agentId ?? "", e.reason ?? ""].join("  "));
      // Where the reading stands: the last seq read (null: nothing yet). Without --after-seq the first
      // page starts at the oldest event kept, which retention never refuses.
      let last: string | null = typeof p.values["after-seq"] === "string" ? p.values["after-seq"] : null;
      const agent = typeof p.values.agent === "string" ? p.values.agent : null;
      // Retention pruned events after `last`: the exact history asked for (or the rest of what was
      // printed) cannot be given. Refused with exit 5 rather than continued with a silent gap.
      const pruned = (err: unknown): unknown => (err instanceof EventsPrunedError ? new Pruned(last ?? "0", err.resumeAfterSeq, err.oldestAvailableSeq) : err);
      for (;;) {
        const { lockEvents } = await ctx.baton
          .request<{ lockEvents: { seq: string; at: string; kind: string; status: string; issueId: string; agentId: string | null; reason: string | null }[] }>(
            `query($c: ID!, $after: ID, $i: ID) { lockEvents(companyId: $c, afterSeq: $after, issueId: $i, first: 1000) { seq at kind status issueId agentId reason } }`,
            { c: companyId, after: last, i: p.values.issue ?? null },
          )
          .catch((err: unknown) => {
            throw pruned(err);
          });
        for (const e of lockEvents) if (!agent || e.agentId === agent) print(e);
        if (lockEvents.length) last = lockEvents.at(-1)!.seq;
        if (lockEvents.length < 1000 || stopped) break;
      }
      if (!p.values.follow || stopped) return 0;
      // Live from where the pages ended. With nothing read at all (no event kept, no --after-seq),
      // from "0": should retention have pruned the start, the stream resumes where the kept
      // history begins, since nothing was asked for or shown before it.
      let from = last ?? "0";
      while (!stopped) {
        const live = ctx.baton.lockChanges({ companyId, afterSeq: from, issueId: (p.values.issue as string | undefined) ?? null, agentId: agent });
        stream = live;
        try {
          for await (const e of live) {
            last = e.seq;
            print(e);
          }
          return 0;
        } catch (err) {
          if (stopped) return 0;
          if (err instanceof EventsPrunedError && last === null) {
            from = err.resumeAfterSeq;
            continue;
          }
          throw pruned(err);
        }
      }
      return 0;
    },
  },

  agent: {
    args: "rotate-key ID | disable ID --reason R | enable ID",
    what: "an agent's key and state: a new key (shown once), disable it, enable it (board key, admin)",
    async run(ctx, words) {
      const chosen = subcommand(ctx, words, "Usage: baton agent rotate-key ID | disable ID --reason R | enable ID");
      if (typeof chosen === "number") return chosen;
      const [verb, rest] = chosen;
      switch (verb) {
        case "rotate-key": {
          const p = parse(ctx, rest, "agent rotate-key ID", {}, 1);
          if (!p) return 0;
          const agentId = p.positionals[0]!;
          const { rotateAgentKey } = await ctx.baton.request(Documents.RotateAgentKeyDocument, { agentId });
          printNewKey(ctx, rotateAgentKey.apiKey, `agent ${agentId}`);
          return 0;
        }
        case "disable": {
          const p = parse(ctx, rest, "agent disable ID --reason R", { reason: { type: "string" } }, 1);
          if (!p) return 0;
          if (typeof p.values.reason !== "string") throw new Usage("--reason is required: baton agent disable ID --reason R");
          const { disableAgent } = await ctx.baton.request(Documents.DisableAgentDocument, { agentId: p.positionals[0]!, reason: p.values.reason });
          printAgent(ctx, disableAgent);
          return 0;
        }
        case "enable": {
          const p = parse(ctx, rest, "agent enable ID", {}, 1);
          if (!p) return 0;
          const { enableAgent } = await ctx.baton.request(Documents.EnableAgentDocument, { agentId: p.positionals[0]! });
          printAgent(ctx, enableAgent);
          return 0;
        }
        default:
          throw new Usage(`agent ${verb}: expected rotate-key, disable or enable`);
      }
    },
  },

  board: {
    args: "rotate-key [--company ID]",
    what: "a new board key (shown once); the old one stops working (board key; admin with --company)",
    async run(ctx, words) {
      const chosen = subcommand(ctx, words, "Usage: baton board rotate-key [--company ID]   (the admin token names the company)");
      if (typeof chosen === "number") return chosen;
      const [verb, rest] = chosen;
      if (verb !== "rotate-key") throw new Usage(`board ${verb}: expected rotate-key`);
      const p = parse(ctx, rest, "board rotate-key [--company ID]", { company: { type: "string" } });
      if (!p) return 0;
      const companyId = await companyOf(ctx, p.values.company);
      const { rotateBoardKey } = await ctx.baton.request(Documents.RotateBoardKeyDocument, { companyId });
      printNewKey(ctx, rotateBoardKey.apiKey, `company ${companyId}`);
      return 0;
    },
  },

  work: {
    args: "[--concurrency N] [--once] [--include-unassigned] [--drain-timeout S] -- COMMAND [ARGS…]",
    what: "run COMMAND once per issue, as a safe worker (agent key)",
    run: workCommand,
  },
};
