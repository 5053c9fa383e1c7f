// `baton issues` (the list) and `baton issue show | create | force-release |
// requeue | cancel` (one issue).
import { Documents } from "../../client/index.js";
import { companyOf, expect, parse, Problem, statuses, table, Usage } from "../kit.js";
import type { Context } from "../kit.js";

type Issue = Documents.CliIssueRowFragment;

/** A key as a table shows it: "-" for the unkeyed pool, a long one cut (--json has it whole). */
const KEY_WIDTH = 32;
/** The most issues one page asks for. */
const PAGE_MAX = 500;

function keyCell(key: string | null): string {
  if (key === null) return "-";
  return key.length > KEY_WIDTH ? `${key.slice(0, KEY_WIDTH - 1)}…` : key;
}

function printIssues(ctx: Context, issues: Issue[]): void {
  if (ctx.json) {
    ctx.out(JSON.stringify(issues));
    return;
  }
  table(
    ctx,
    ["ID", "STATUS", "PRIORITY", "KEY", "ATTEMPTS", "EPOCH", "TITLE"],
    issues.map((i) => [i.id, i.status, i.priority, keyCell(i.concurrencyKey), `${i.attemptCount}/${i.maxAttempts}`, i.lockEpoch, i.title]),
  );
}

export async function listIssues(ctx: Context, words: string[]): Promise<number> {
  const usage = "issues [--status S[,S…]] [--agent ID] [--limit N] [--company ID]";
  const p = parse(ctx, words, usage, { status: { type: "string" }, agent: { type: "string" }, limit: { type: "string" }, company: { type: "string" } });
  if (!p) return 0;
  const limit = p.values.limit === undefined ? 50 : Number(p.values.limit);
  if (!Number.isInteger(limit) || limit < 1) throw new Usage("--limit must be a whole number of at least 1");
  const companyId = await companyOf(ctx, p.values.company);
  const issues: Issue[] = [];
  let after: string | null = null;
  while (issues.length < limit) {
    const { issues: page }: Documents.CliIssuesQuery = await ctx.baton.request(Documents.CliIssuesDocument, {
      companyId,
      status: statuses<Documents.IssueStatus>(p.values.status),
      assigneeAgentId: typeof p.values.agent === "string" ? p.values.agent : null,
      first: Math.min(PAGE_MAX, limit - issues.length),
      after,
    });
    issues.push(...page.edges.map((e) => e.node));
    if (!page.pageInfo.hasNextPage) break;
    after = page.pageInfo.endCursor;
  }
  printIssues(ctx, issues);
  return 0;
}

export async function showIssue(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "issue show ID", {}, 1);
  if (!p) return 0;
  const { issue } = await ctx.baton.request(Documents.CliIssueShowDocument, { id: p.positionals[0]! });
  if (!issue) throw new Problem("IssueNotFound", `no issue ${p.positionals[0]} that this token may see`);
  if (ctx.json) ctx.out(JSON.stringify(issue));
  else for (const [k, v] of Object.entries(issue)) ctx.out(`${k.padEnd(22)} ${v ?? ""}`);
  return 0;
}

export async function createIssue(ctx: Context, words: string[]): Promise<number> {
  const usage = "issue create --title T [--priority P] [--assignee AGENT_ID] [--max-attempts N] [--description D] [--key KEY]";
  const p = parse(ctx, words, usage, {
    title: { type: "string" },
    priority: { type: "string" },
    assignee: { type: "string" },
    "max-attempts": { type: "string" },
    description: { type: "string" },
    key: { type: "string" },
  });
  if (!p) return 0;
  if (typeof p.values.title !== "string") throw new Usage(`--title is required: baton ${usage}`);
  const input: Documents.CreateIssueInput = { title: p.values.title };
  if (p.values.priority) input.priority = String(p.values.priority).toUpperCase() as Documents.IssuePriority;
  if (p.values.assignee) input.assigneeAgentId = String(p.values.assignee);
  if (p.values.description) input.description = String(p.values.description);
  if (p.values["max-attempts"] !== undefined) input.maxAttempts = Number(p.values["max-attempts"]);
  // The concurrency key, as typed (keys are compared exactly); without it, the unkeyed pool.
  if (typeof p.values.key === "string") input.concurrencyKey = p.values.key;
  const { createIssue } = await ctx.baton.request(Documents.CliCreateIssueDocument, { input });
  if (ctx.json) ctx.out(JSON.stringify(createIssue));
  else printIssues(ctx, [createIssue]);
  return 0;
}

export async function forceReleaseIssue(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "issue force-release ID --reason R", { reason: { type: "string" } }, 1);
  if (!p) return 0;
  if (typeof p.values.reason !== "string") throw new Usage("--reason is required");
  const { forceReleaseIssue } = await ctx.baton.request(Documents.CliForceReleaseIssueDocument, { issueId: p.positionals[0]!, reason: p.values.reason });
  printIssues(ctx, [expect(forceReleaseIssue, "IssueReleased").issue]);
  return 0;
}

/** `baton issue VERB ID`: the issue set to `status` (updateIssue checks the transition). */
function setStatus(verb: string, status: Documents.IssueStatus) {
  return async (ctx: Context, words: string[]): Promise<number> => {
    const p = parse(ctx, words, `issue ${verb} ID`, {}, 1);
    if (!p) return 0;
    const { updateIssue } = await ctx.baton.request(Documents.CliSetIssueStatusDocument, { id: p.positionals[0]!, status });
    printIssues(ctx, [expect(updateIssue, "IssueUpdated").issue]);
    return 0;
  };
}

export const requeueIssue = setStatus("requeue", "OPEN");
export const cancelIssue = setStatus("cancel", "CANCELLED");
