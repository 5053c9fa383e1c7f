// `baton issues` (the list) and `baton issue show | create | update |
// force-release | requeue | cancel` (one issue; create --from FILE, many).
import * as Documents from "../generated/graphql.js";
import { agentNames, companyOf, cut, expect, ISSUE_STATUSES, oneOf, parse, PRIORITIES, Problem, statuses, table, Usage, wholeNumber } from "../kit.js";
import type { Context } from "../kit.js";
import { createFromFile } from "./bulk.js";

type Issue = Documents.CliIssueRowFragment;

/** A key as a table shows it: "-" for the unkeyed pool, a long one cut (--json has it whole). */
const KEY_WIDTH = 32;
/** An assignee's name as a table shows it. */
const NAME_WIDTH = 24;
/** The most issues one page asks for. */
const PAGE_MAX = 500;
/** The most issues `baton issues` prints. */
const LIMIT_MAX = 1_000_000;
/** An issue's attempts, as the server bounds them (maxAttempts). */
const MAX_ATTEMPTS = 100;

function keyCell(key: string | null): string {
  if (key === null) return "-";
  return cut(key, KEY_WIDTH);
}

/** The issues as a table with each assignee's name ("-": none; the id when the name cannot be read), or as one JSON array. */
async function printIssues(ctx: Context, issues: Issue[], known?: Map<string, string>): Promise<void> {
  if (ctx.json) {
    ctx.out(JSON.stringify(issues));
    return;
  }
  const assigned = issues.find((i) => i.assigneeAgentId !== null);
  const names = known ?? (assigned ? await agentNames(ctx, assigned.companyId) : new Map<string, string>());
  const assignee = (id: string | null) => (id === null ? "-" : cut(names.get(id), NAME_WIDTH) || id);
  table(
    ctx,
    ["ID", "STATUS", "PRIORITY", "KEY", "ATTEMPTS", "EPOCH", "ASSIGNEE", "TITLE"],
    issues.map((i) => [
      i.id,
      i.status,
      i.priority,
      keyCell(i.concurrencyKey),
      `${i.attemptCount}/${i.maxAttempts}`,
      i.lockEpoch,
      assignee(i.assigneeAgentId),
      i.title,
    ]),
  );
}

export async function listIssues(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, { status: { type: "string" }, agent: { type: "string" }, limit: { type: "string" }, company: { type: "string" } });
  const limit = wholeNumber("--limit", p.values.limit, 1, LIMIT_MAX, 50);
  const status = statuses(p.values.status, ISSUE_STATUSES);
  const companyId = await companyOf(ctx, p.values.company);
  const issues: Issue[] = [];
  let after: string | null = null;
  while (issues.length < limit) {
    const { issues: page }: Documents.CliIssuesQuery = await ctx.baton.request(Documents.CliIssuesDocument, {
      companyId,
      status,
      assigneeAgentId: typeof p.values.agent === "string" ? p.values.agent : null,
      first: Math.min(PAGE_MAX, limit - issues.length),
      after,
    });
    issues.push(...page.edges.map((e) => e.node));
    if (!page.pageInfo.hasNextPage) break;
    after = page.pageInfo.endCursor;
  }
  const names = ctx.json || !issues.some((i) => i.assigneeAgentId) ? new Map<string, string>() : await agentNames(ctx, companyId);
  await printIssues(ctx, issues, names);
  return 0;
}

export async function showIssue(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, {}, 1);
  const { issue } = await ctx.baton.request(Documents.CliIssueShowDocument, { id: p.positionals[0]! });
  if (!issue) throw new Problem("IssueNotFound", `no issue ${p.positionals[0]} that this token may see`);
  if (ctx.json) ctx.out(JSON.stringify(issue));
  else for (const [k, v] of Object.entries(issue)) ctx.out(`${k.padEnd(22)} ${v ?? ""}`);
  return 0;
}

export async function createIssue(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, {
    title: { type: "string" },
    priority: { type: "string" },
    assignee: { type: "string" },
    "max-attempts": { type: "string" },
    description: { type: "string" },
    key: { type: "string" },
    from: { type: "string" },
  });
  if (typeof p.values.from === "string") {
    const others = ["title", "priority", "assignee", "max-attempts", "description", "key"].filter((o) => p.values[o] !== undefined);
    if (others.length) throw new Usage(`--from takes each issue's fields from its line: leave out --${others.join(", --")}`);
    return createFromFile(ctx, p.values.from);
  }
  if (typeof p.values.title !== "string") throw new Usage(`--title (or --from FILE) is required: baton ${usage}`);
  const input: Documents.CreateIssueInput = { title: p.values.title };
  if (typeof p.values.priority === "string") input.priority = oneOf("--priority", p.values.priority, PRIORITIES);
  if (typeof p.values.assignee === "string") input.assigneeAgentId = p.values.assignee;
  if (typeof p.values.description === "string") input.description = p.values.description;
  if (p.values["max-attempts"] !== undefined) input.maxAttempts = wholeNumber("--max-attempts", p.values["max-attempts"], 1, MAX_ATTEMPTS, 3);
  // The concurrency key, as typed (keys are compared exactly); without it, the unkeyed pool.
  if (typeof p.values.key === "string") input.concurrencyKey = p.values.key;
  const { createIssue } = await ctx.baton.request(Documents.CliCreateIssueDocument, { input });
  if (ctx.json) ctx.out(JSON.stringify(createIssue));
  else await printIssues(ctx, [createIssue]);
  return 0;
}

/** The answer, with the hint the server gives an issue out of attempts naming the command that raises them. */
function withHint<T extends { __typename: string }>(result: T, id: string): T {
  const message = (result as { message?: string }).message;
  if (result.__typename !== "InvalidTransition" || !message?.includes("raise maxAttempts")) return result;
  return { ...result, message: message.replace("raise maxAttempts", `raise them (baton issue update ${id} --max-attempts N)`) };
}

export async function updateIssue(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(
    ctx,
    words,
    usage,
    {
      "max-attempts": { type: "string" },
      priority: { type: "string" },
      assignee: { type: "string" },
      unassign: { type: "boolean" },
      title: { type: "string" },
      description: { type: "string" },
      key: { type: "string" },
      "no-key": { type: "boolean" },
    },
    1,
  );
  const v = p.values;
  if (v.assignee !== undefined && v.unassign) throw new Usage("--assignee and --unassign contradict each other: give one");
  if (v.key !== undefined && v["no-key"]) throw new Usage("--key and --no-key contradict each other: give one");
  const input: Documents.UpdateIssueInput = {};
  if (v["max-attempts"] !== undefined) input.maxAttempts = wholeNumber("--max-attempts", v["max-attempts"], 1, MAX_ATTEMPTS, 3);
  if (typeof v.priority === "string") input.priority = oneOf("--priority", v.priority, PRIORITIES);
  if (typeof v.assignee === "string") input.assigneeAgentId = v.assignee;
  if (v.unassign) input.assigneeAgentId = null;
  if (typeof v.title === "string") input.title = v.title;
  if (typeof v.description === "string") input.description = v.description;
  if (typeof v.key === "string") input.concurrencyKey = v.key;
  if (v["no-key"]) input.concurrencyKey = null;
  if (Object.keys(input).length === 0) throw new Usage(`nothing to change: baton ${usage}`);
  const id = p.positionals[0]!;
  const { updateIssue } = await ctx.baton.request(Documents.CliUpdateIssueDocument, { id, input });
  const { issue } = expect(withHint(updateIssue, id), "IssueUpdated");
  if (ctx.json) ctx.out(JSON.stringify(issue));
  else await printIssues(ctx, [issue]);
  return 0;
}

export async function forceReleaseIssue(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, { reason: { type: "string" } }, 1);
  if (typeof p.values.reason !== "string") throw new Usage("--reason is required");
  const { forceReleaseIssue } = await ctx.baton.request(Documents.CliForceReleaseIssueDocument, { issueId: p.positionals[0]!, reason: p.values.reason });
  await printIssues(ctx, [expect(forceReleaseIssue, "IssueReleased").issue]);
  return 0;
}

/** `baton issue VERB ID`: the issue set to `status` (updateIssue checks the transition). */
function setStatus(status: Documents.IssueStatus) {
  return async (ctx: Context, words: string[], usage: string): Promise<number> => {
    const p = parse(ctx, words, usage, {}, 1);
    const id = p.positionals[0]!;
    const { updateIssue } = await ctx.baton.request(Documents.CliSetIssueStatusDocument, { id, status });
    await printIssues(ctx, [expect(withHint(updateIssue, id), "IssueUpdated").issue]);
    return 0;
  };
}

export const requeueIssue = setStatus("OPEN");
export const cancelIssue = setStatus("CANCELLED");
