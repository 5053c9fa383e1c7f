// `baton issue block ID --on ID` and `baton issue unblock ID --on ID`: one
// issue waits on another until it is DONE, or no longer (addDependency,
// removeDependency, as the board makes them). A refused edge that would close
// a cycle is told in words: which issue waits on which, round to the first.
import * as Documents from "../generated/graphql.js";
import { cut, expect, parse, Problem, Usage } from "../kit.js";
import type { Context } from "../kit.js";

type Issue = Documents.CliIssueRowFragment & Documents.CliIssueEdgesFragment;

/** The most titles one refusal looks up (a longer cycle names the rest by id). */
const TITLES_MAX = 50;
const TITLE_WIDTH = 40;

/** The ids' titles, in one request; an id it cannot read (or past TITLES_MAX) has none. */
async function titles(ctx: Context, ids: string[]): Promise<Map<string, string>> {
  const wanted = [...new Set(ids)].slice(0, TITLES_MAX);
  const query = `query CliCycleTitles(${wanted.map((_, i) => `$i${i}: ID!`).join(", ")}) { ${wanted.map((_, i) => `i${i}: issue(id: $i${i}) { title }`).join(" ")} }`;
  try {
    const answer = await ctx.baton.request<Record<string, { title: string } | null>>(query, Object.fromEntries(wanted.map((id, i) => [`i${i}`, id])));
    return new Map(wanted.flatMap((id, i) => (answer[`i${i}`] ? [[id, answer[`i${i}`]!.title] as const] : [])));
  } catch {
    return new Map(); // the refusal is what matters: it is told with ids alone
  }
}

/**
 * Why `issueId` cannot wait on `blockedById`, in words. `path` is the cycle the
 * edge would close (DependencyCycle.path): from blockedById along blockedBy
 * edges to issueId, each issue once; one issue for an issue asked to wait on itself.
 */
async function cycleInWords(ctx: Context, issueId: string, blockedById: string, path: string[]): Promise<string> {
  const names = await titles(ctx, [issueId, blockedById, ...path]);
  const named = (id: string) => (names.has(id) ? `${cut(names.get(id), TITLE_WIDTH)} [${id}]` : id);
  if (path.length <= 1) return `${named(issueId)} cannot wait on itself; nothing changed`;
  const chain = path
    .slice(1)
    .map((id, i) => `${i === 0 ? "" : ", which "}waits on ${named(id)}`)
    .join("");
  return `${named(issueId)} cannot wait on ${named(blockedById)}: that would close a cycle, as ${named(path[0]!)} ${chain}; nothing changed`;
}

/** One line for the issue's dependencies after the change; --json prints the issue. */
function printEdges(ctx: Context, issue: Issue, said: string): void {
  if (ctx.json) {
    ctx.out(JSON.stringify(issue));
    return;
  }
  const list = (ids: string[]) => (ids.length ? ids.join(", ") : "none");
  ctx.out(`${said}. It is blocked by: ${list(issue.blockedBy)}; waiting on: ${list(issue.waitingOn)}; ready: ${issue.ready ? "yes" : "no"}`);
}

function edgeArgs(ctx: Context, words: string[], usage: string) {
  const p = parse(ctx, words, usage, { on: { type: "string" }, run: { type: "string" } }, 1);
  if (typeof p.values.on !== "string") throw new Usage(`--on is required: baton ${usage}`);
  return { issueId: p.positionals[0]!, blockedById: p.values.on, runId: typeof p.values.run === "string" ? p.values.run : null };
}

export async function blockIssue(ctx: Context, words: string[], usage: string): Promise<number> {
  const vars = edgeArgs(ctx, words, usage);
  const { addDependency } = await ctx.baton.request(Documents.CliAddDependencyDocument, vars);
  if (addDependency.__typename === "DependencyCycle") {
    throw new Problem("DependencyCycle", await cycleInWords(ctx, vars.issueId, vars.blockedById, addDependency.path));
  }
  const { issue } = expect(addDependency, "DependencyAdded");
  printEdges(ctx, issue, `${issue.id} waits on ${vars.blockedById} until it is DONE`);
  return 0;
}

export async function unblockIssue(ctx: Context, words: string[], usage: string): Promise<number> {
  const vars = edgeArgs(ctx, words, usage);
  const { removeDependency } = await ctx.baton.request(Documents.CliRemoveDependencyDocument, vars);
  const { issue } = expect(removeDependency, "DependencyRemoved");
  printEdges(ctx, issue, `${issue.id} does not wait on ${vars.blockedById}`);
  return 0;
}
