// `baton events`: the ledger, oldest first, paged; with --follow, then live.
// A table whose columns have fixed widths (it is printed as events come), each
// issue's title and agent's name beside the ids; --json prints the events as
// the API gives them, one object per line, ids only.
import { EventsPrunedError } from "../../client/index.js";
import * as Documents from "../generated/graphql.js";
import { agentNames, companyOf, cut, parse, Pruned } from "../kit.js";
import type { Context } from "../kit.js";

type LockEvent = Documents.CliLockEventsQuery["lockEvents"][number];
/** What an event printed holds, from a page or from the live stream. */
type Printed = Pick<LockEvent, "seq" | "at" | "kind" | "status" | "issueId"> & { agentId?: string | null; reason?: string | null };
/** The page CliLockEvents asks for: a shorter one is the last. */
const PAGE = 1000;
/** Each column's width but the last (REASON): a longer title or name is cut, a longer seq pushes the line. */
const COLUMNS: [string, number][] = [
  ["SEQ", 12],
  ["AT", 24],
  ["KIND", 18],
  ["STATUS", 11],
  ["ISSUE", 36],
  ["TITLE", 30],
  ["AGENT", 20],
  ["REASON", 0],
];

const row = (cells: string[]) =>
  cells
    .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(COLUMNS[i]![1])))
    .join("  ")
    .trimEnd();

export async function events(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, {
    "after-seq": { type: "string" },
    issue: { type: "string" },
    agent: { type: "string" },
    follow: { type: "boolean" },
    company: { type: "string" },
  });
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
  const issueId = typeof p.values.issue === "string" ? p.values.issue : null;
  // Names for the table: the agents in one request, each title from its page (or, live, one request per new issue).
  const titles = new Map<string, string>();
  let names = ctx.json ? new Map<string, string>() : await agentNames(ctx, companyId);
  const asked = new Set<string>();
  const titleOf = async (issueId: string): Promise<string> => {
    if (!titles.has(issueId)) {
      const { issue } = await ctx.baton.request(Documents.CliIssueTitleDocument, { id: issueId });
      titles.set(issueId, issue?.title ?? "");
    }
    return titles.get(issueId)!;
  };
  const nameOf = async (agentId: string | null | undefined): Promise<string> => {
    if (!agentId) return "";
    if (!names.has(agentId) && !asked.has(agentId) && names.size > 0) {
      asked.add(agentId); // an agent created since the list was read: read it again, once
      names = await agentNames(ctx, companyId);
    }
    return names.get(agentId) ?? agentId;
  };
  const print = async (e: Printed) => {
    header();
    if (ctx.json) return ctx.out(JSON.stringify(e));
    const [title, agent] = [await titleOf(e.issueId), await nameOf(e.agentId)];
    ctx.out(row([e.seq, e.at, e.kind, e.status, e.issueId, cut(title, COLUMNS[5]![1]), cut(agent, COLUMNS[6]![1]), e.reason ?? ""]));
  };
  // The header goes before the first event, or alone once the history is read: never before a refusal.
  let headed = ctx.json;
  const header = () => {
    if (!headed) ctx.out(row(COLUMNS.map(([name]) => name)));
    headed = true;
  };
  // Where the reading stands: the last seq read (null: nothing yet). Without --after-seq the first
  // page starts at the oldest event kept, which retention never refuses.
  let last: string | null = typeof p.values["after-seq"] === "string" ? p.values["after-seq"] : null;
  const agent = typeof p.values.agent === "string" ? p.values.agent : null;
  // Retention pruned events after `last`: the exact history asked for (or the rest of what was
  // printed) cannot be given. Refused with exit 5 rather than continued with a silent gap.
  const pruned = (err: unknown): unknown => (err instanceof EventsPrunedError ? new Pruned(last ?? "0", err.resumeAfterSeq, err.oldestAvailableSeq) : err);
  for (;;) {
    const { lockEvents } = await ctx.baton.request(Documents.CliLockEventsDocument, { companyId, afterSeq: last, issueId }).catch((err: unknown) => {
      throw pruned(err);
    });
    for (const { issue, ...e } of lockEvents) {
      titles.set(e.issueId, issue.title);
      if (!agent || e.agentId === agent) await print(e);
    }
    if (lockEvents.length) last = lockEvents.at(-1)!.seq;
    if (lockEvents.length < PAGE || stopped) break;
  }
  header();
  if (!p.values.follow || stopped) return 0;
  // Live from where the pages ended. With nothing read at all (no event kept, no --after-seq),
  // from "0": should retention have pruned the start, the stream resumes where the kept
  // history begins, since nothing was asked for or shown before it.
  let from = last ?? "0";
  while (!stopped) {
    const live = ctx.baton.lockChanges({ companyId, afterSeq: from, issueId, agentId: agent });
    stream = live;
    try {
      for await (const e of live) {
        last = e.seq;
        await print(e);
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
}
