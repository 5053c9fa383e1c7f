// `baton issue create --from FILE`: one CreateIssueInput per line of JSON
// (FILE `-`: stdin), every line checked before anything is sent, then
// createIssues calls of BATCH lines, each one transaction.
import { readFileSync } from "node:fs";
import { BatonError, MAX_JSON_BYTES } from "../../client/index.js";
import * as Documents from "../generated/graphql.js";
import { type ISSUE_STATUSES, PRIORITIES, Usage } from "../kit.js";
import type { Context } from "../kit.js";

/** The most issues one createIssues call takes (the server's limit). */
const BATCH = 1000;
const FIELDS = [
  "title",
  "description",
  "priority",
  "status",
  "assigneeAgentId",
  "maxAttempts",
  "concurrencyKey",
  "blockedBy",
  "parentId",
  "notBefore",
  "retryDelaySeconds",
  "maxExecutionSeconds",
  "idempotencyKey",
  "payload",
] as const;
/** The statuses an issue may be created in. */
const CREATE_STATUSES = ["OPEN", "BACKLOG"] as const satisfies readonly (typeof ISSUE_STATUSES)[number][];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_TITLE = 500;
const MAX_KEY = 200;
const MAX_BLOCKED_BY = 100;

/** A whole number from min to max, or undefined when it is not one. */
const wholeIn = (value: unknown, min: number, max: number) =>
  Number.isInteger(value) && (value as number) >= min && (value as number) <= max ? (value as number) : undefined;

/** A bad line: bad usage naming the file and its line number, before anything is created. */
class BadLine extends Usage {
  constructor(file: string, line: number, why: string) {
    super(`${file === "-" ? "stdin" : file}, line ${line}: ${why}; nothing was created`);
  }
}

/** One line as the API's input, or why it cannot be. */
function inputOf(text: string): Documents.CreateIssueInput | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'not JSON (each line is one object, such as {"title": "Fix the login page"})';
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return 'not a JSON object (each line is one issue, such as {"title": "…"})';
  const o = value as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown.length) return `unknown field ${JSON.stringify(unknown[0])} (the fields are ${FIELDS.join(", ")})`;
  if (typeof o.title !== "string" || o.title.trim() === "") return "title must be a text that is not empty";
  if ([...o.title].length > MAX_TITLE) return `title must be at most ${MAX_TITLE} characters`;
  const input: Documents.CreateIssueInput = { title: o.title };
  const text_ = (k: string) => o[k] === undefined || o[k] === null || typeof o[k] === "string";
  if (!text_("description")) return "description must be a text or null";
  if (typeof o.description === "string") input.description = o.description;
  if (o.priority !== undefined && o.priority !== null) {
    const p = typeof o.priority === "string" ? o.priority.toUpperCase() : "";
    if (!(PRIORITIES as readonly string[]).includes(p)) return `priority must be one of ${PRIORITIES.join(", ")}`;
    input.priority = p as Documents.IssuePriority;
  }
  if (o.status !== undefined && o.status !== null) {
    const s = typeof o.status === "string" ? o.status.toUpperCase() : "";
    if (!(CREATE_STATUSES as readonly string[]).includes(s)) return `status must be ${CREATE_STATUSES.join(" or ")} (default OPEN)`;
    input.status = s as Documents.IssueStatus;
  }
  if (o.assigneeAgentId !== undefined && o.assigneeAgentId !== null) {
    if (typeof o.assigneeAgentId !== "string" || !UUID.test(o.assigneeAgentId)) return "assigneeAgentId must be an agent's id (baton agents lists them)";
    input.assigneeAgentId = o.assigneeAgentId;
  }
  if (o.maxAttempts !== undefined && o.maxAttempts !== null) {
    if (!Number.isInteger(o.maxAttempts) || (o.maxAttempts as number) < 1 || (o.maxAttempts as number) > 100)
      return "maxAttempts must be a whole number from 1 to 100";
    input.maxAttempts = o.maxAttempts as number;
  }
  if (o.concurrencyKey !== undefined && o.concurrencyKey !== null) {
    if (typeof o.concurrencyKey !== "string" || o.concurrencyKey === "" || o.concurrencyKey.length > MAX_KEY) {
      return `concurrencyKey must be a text of 1 to ${MAX_KEY} characters (leave it out, or null, for the unkeyed pool)`;
    }
    input.concurrencyKey = o.concurrencyKey;
  }
  return graphFields(o, input);
}

/** The work graph's fields of a line (issue 29): checked as the API checks them, so a bad line stops before anything is sent. */
function graphFields(o: Record<string, unknown>, input: Documents.CreateIssueInput): Documents.CreateIssueInput | string {
  const given = (k: string) => o[k] !== undefined && o[k] !== null;
  if (given("blockedBy")) {
    const ids = o.blockedBy;
    if (!Array.isArray(ids) || ids.length > MAX_BLOCKED_BY || !ids.every((id) => typeof id === "string" && UUID.test(id))) {
      return `blockedBy must be a list of at most ${MAX_BLOCKED_BY} issue ids`;
    }
    input.blockedBy = ids as string[];
  }
  if (given("parentId")) {
    if (typeof o.parentId !== "string" || !UUID.test(o.parentId)) return "parentId must be an issue's id";
    input.parentId = o.parentId;
  }
  if (given("notBefore")) {
    if (typeof o.notBefore !== "string" || Number.isNaN(Date.parse(o.notBefore)))
      return 'notBefore must be an ISO 8601 instant, such as "2026-12-24T09:00:00Z"';
    input.notBefore = new Date(o.notBefore).toISOString();
  }
  if (given("retryDelaySeconds")) {
    input.retryDelaySeconds = wholeIn(o.retryDelaySeconds, 0, 86_400);
    if (input.retryDelaySeconds === undefined) return "retryDelaySeconds must be a whole number from 0 to 86400";
  }
  if (given("maxExecutionSeconds")) {
    input.maxExecutionSeconds = wholeIn(o.maxExecutionSeconds, 1, 604_800);
    if (input.maxExecutionSeconds === undefined) return "maxExecutionSeconds must be a whole number from 1 to 604800";
  }
  if (given("idempotencyKey")) {
    if (typeof o.idempotencyKey !== "string" || o.idempotencyKey === "" || o.idempotencyKey.length > MAX_KEY) {
      return `idempotencyKey must be a text of 1 to ${MAX_KEY} characters`;
    }
    input.idempotencyKey = o.idempotencyKey;
  }
  if (given("payload")) {
    const bytes = Buffer.byteLength(JSON.stringify(o.payload), "utf8");
    if (bytes > MAX_JSON_BYTES) return `payload is ${bytes} bytes of JSON; at most ${MAX_JSON_BYTES}`;
    input.payload = o.payload;
  }
  return input;
}

function read(file: string): string {
  try {
    return readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EACCES" ? "not readable" : code === "EISDIR" ? "a directory" : (code ?? "cannot be read");
    throw new Usage(`--from ${file}: ${why}; nothing was created`);
  }
}

/**
 * Creates one issue per line of `file`. Every line is checked first; a line the
 * server still refuses (an assignee of another company, say) stops at its
 * batch, which is one transaction: the message names the line and what the
 * batches before it created.
 */
export async function createFromFile(ctx: Context, file: string): Promise<number> {
  const lines: { n: number; input: Documents.CreateIssueInput }[] = [];
  for (const [i, text] of read(file).split("\n").entries()) {
    if (text.trim() === "") continue;
    const input = inputOf(text);
    if (typeof input === "string") throw new BadLine(file, i + 1, input);
    lines.push({ n: i + 1, input });
  }
  if (lines.length === 0) throw new Usage(`--from ${file}: no issue in it (one JSON object per line); nothing was created`);
  const created: Documents.CliIssueRowFragment[] = [];
  for (let start = 0; start < lines.length; start += BATCH) {
    const batch = lines.slice(start, start + BATCH);
    try {
      const { createIssues } = await ctx.baton.request(Documents.CliCreateIssuesDocument, { inputs: batch.map((l) => l.input) });
      created.push(...createIssues);
    } catch (err) {
      if (!(err instanceof BatonError) || err.code !== "BAD_USER_INPUT") throw err;
      const at = /^inputs\[(\d+)\]\.(.*)$/s.exec(err.message);
      const line = at ? batch[Number(at[1])]?.n : undefined;
      const why = at ? at[2]! : err.message;
      const before = created.length ? `; the ${created.length} issues of the lines before line ${batch[0]!.n} were created` : "; nothing was created";
      throw new Usage(`${file === "-" ? "stdin" : file}, ${line ? `line ${line}` : `lines ${batch[0]!.n}–${batch.at(-1)!.n}`}: ${why}${before}`);
    }
  }
  const calls = Math.ceil(lines.length / BATCH);
  if (ctx.json) ctx.out(JSON.stringify(created));
  else ctx.out(`created ${created.length} issue${created.length === 1 ? "" : "s"} (${calls} createIssues call${calls > 1 ? "s" : ""})`);
  return 0;
}
