// `baton issues` and `baton ready` (the lists) and `baton issue show | create |
// update | force-release | requeue | cancel` (one issue; create --from FILE, many).
import * as Documents from "../generated/graphql.js";
import {
  agentNames,
  companyOf,
  cut,
  expect,
  instant,
  ISSUE_STATUSES,
  jsonArg,
  oneOf,
  parse,
  PRIORITIES,
  Problem,
  statuses,
  table,
  Usage,
  wholeNumber,
} from "../kit.js";
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
/** The longest execution limit the server takes (maxExecutionSeconds): a week. */
const MAX_EXECUTION_SECONDS = 604_800;
/** The longest backoff base the server takes (retryDelaySeconds): a day. */
const MAX_RETRY_DELAY_SECONDS = 86_400;

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

/** The filters of `baton issues` (and `baton ready`, which sets ready). */
type Filters = Omit<Documents.CliIssuesQueryVariables, "first" | "after">;

/** Up to `limit` issues that match, oldest first, a page at a time; printed as `baton issues` prints them. */
async function listMatching(ctx: Context, filters: Filters, limit: number): Promise<void> {
  const issues: Issue[] = [];
  let after: string | null = null;
  while (issues.length < limit) {
    const { issues: page }: Documents.CliIssuesQuery = await ctx.baton.request(Documents.CliIssuesDocument, {
      ...filters,
      first: Math.min(PAGE_MAX, limit - issues.length),
      after,
    });
    issues.push(...page.edges.map((e) => e.node));
    if (!page.pageInfo.hasNextPage) break;
    after = page.pageInfo.endCursor;
  }
  const names = ctx.json || !issues.some((i) => i.assigneeAgentId) ? new Map<string, string>() : await agentNames(ctx, filters.companyId);
  await printIssues(ctx, issues, names);
}

const text = (value: unknown) => (typeof value === "string" ? value : null);

export async function listIssues(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, {
    status: { type: "string" },
    agent: { type: "string" },
    parent: { type: "string" },
    limit: { type: "string" },
    company: { type: "string" },
  });
  const limit = wholeNumber("--limit", p.values.limit, 1, LIMIT_MAX, 50);
  const status = statuses(p.values.status, ISSUE_STATUSES);
  const companyId = await companyOf(ctx, p.values.company);
  await listMatching(ctx, { companyId, status, assigneeAgentId: text(p.values.agent), parentId: text(p.values.parent) }, limit);
  return 0;
}

/** `baton ready`: the issues claim-next may take now (OPEN, an attempt left, waiting on nothing, not delayed). */
export async function listReady(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, { agent: { type: "string" }, limit: { type: "string" }, company: { type: "string" } });
  const limit = wholeNumber("--limit", p.values.limit, 1, LIMIT_MAX, 50);
  const companyId = await companyOf(ctx, p.values.company);
  await listMatching(ctx, { companyId, ready: true, assigneeAgentId: text(p.values.agent) }, limit);
  return 0;
}

/** A field of `baton issue show` as one line: lists of ids joined, JSON (payload, result) compact, nothing for null. */
function cell(key: string, value: unknown): string {
  if (value === null || value === undefined) return "";
  if (key === "subIssues") {
    const { edges, pageInfo } = value as { edges: { node: { id: string } }[]; pageInfo: { hasNextPage: boolean } };
    return `${edges.map((e) => e.node.id).join(", ")}${pageInfo.hasNextPage ? ", … (baton issues --parent ID lists them all)" : ""}`;
  }
  if (Array.isArray(value) && (key === "blockedBy" || key === "waitingOn")) return value.join(", ");
  if (key === "payload" || key === "result" || typeof value === "object") return JSON.stringify(value);
  return String(value);
}

export async function showIssue(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, {}, 1);
  const { issue } = await ctx.baton.request(Documents.CliIssueShowDocument, { id: p.positionals[0]! });
  if (!issue) throw new Problem("IssueNotFound", `no issue ${p.positionals[0]} that this token may see`);
  if (ctx.json) ctx.out(JSON.stringify(issue));
  else for (const [k, v] of Object.entries(issue)) ctx.out(`${k.padEnd(22)} ${cell(k, v)}`.trimEnd());
  return 0;
}

/** The options of `baton issue create` that are fields of one issue (--from takes them from each line instead). */
const CREATE_FIELDS = {
  title: { type: "string" },
  priority: { type: "string" },
  assignee: { type: "string" },
  "max-attempts": { type: "string" },
  description: { type: "string" },
  key: { type: "string" },
  "blocked-by": { type: "string", multiple: true },
  parent: { type: "string" },
  "not-before": { type: "string" },
  "retry-delay": { type: "string" },
  "max-execution": { type: "string" },
  "idempotency-key": { type: "string" },
  payload: { type: "string" },
} as const;

/** `baton issue create`'s options as the API's input. */
function createInput(v: Record<string, unknown>, usage: string): Documents.CreateIssueInput {
  if (typeof v.title !== "string") throw new Usage(`--title (or --from FILE) is required: baton ${usage}`);
  const input: Documents.CreateIssueInput = { title: v.title };
  if (typeof v.priority === "string") input.priority = oneOf("--priority", v.priority, PRIORITIES);
  if (typeof v.assignee === "string") input.assigneeAgentId = v.assignee;
  if (typeof v.description === "string") input.description = v.description;
  if (v["max-attempts"] !== undefined) input.maxAttempts = wholeNumber("--max-attempts", v["max-attempts"], 1, MAX_ATTEMPTS, 3);
  // The concurrency key, as typed (keys are compared exactly); without it, the unkeyed pool.
  if (typeof v.key === "string") input.concurrencyKey = v.key;
  if (Array.isArray(v["blocked-by"])) input.blockedBy = v["blocked-by"] as string[];
  if (typeof v.parent === "string") input.parentId = v.parent;
  if (typeof v["not-before"] === "string") input.notBefore = instant("--not-before", v["not-before"]);
  if (v["retry-delay"] !== undefined) input.retryDelaySeconds = wholeNumber("--retry-delay", v["retry-delay"], 0, MAX_RETRY_DELAY_SECONDS, 0);
  if (v["max-execution"] !== undefined) input.maxExecutionSeconds = wholeNumber("--max-execution", v["max-execution"], 1, MAX_EXECUTION_SECONDS, 0);
  if (typeof v["idempotency-key"] === "string") input.idempotencyKey = v["idempotency-key"];
  if (typeof v.payload === "string") input.payload = jsonArg("--payload", v.payload);
  return input;
}

export async function createIssue(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, { ...CREATE_FIELDS, from: { type: "string" } });
  if (typeof p.values.from === "string") {
    const others = Object.keys(CREATE_FIELDS).filter((o) => p.values[o] !== undefined);
    if (others.length) throw new Usage(`--from takes each issue's fields from its line: leave out --${others.join(", --")}`);
    return createFromFile(ctx, p.values.from);
  }
  const input = createInput(p.values, usage);
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
