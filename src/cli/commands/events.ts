// `baton events`: the ledger, oldest first, paged; with --follow, then live.
import { Documents, EventsPrunedError } from "../../client/index.js";
import { companyOf, parse, Pruned } from "../kit.js";
import type { Context } from "../kit.js";

type LockEvent = Documents.CliLockEventsQuery["lockEvents"][number];
/** The page CliLockEvents asks for: a shorter one is the last. */
const PAGE = 1000;

export async function events(ctx: Context, words: string[]): Promise<number> {
  const usage = "events [--after-seq N] [--issue ID] [--agent ID] [--follow] [--company ID]";
  const p = parse(ctx, words, usage, {
    "after-seq": { type: "string" },
    issue: { type: "string" },
    agent: { type: "string" },
    follow: { type: "boolean" },
    company: { type: "string" },
  });
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
  const issueId = typeof p.values.issue === "string" ? p.values.issue : null;
  const print = (e: Pick<LockEvent, "seq" | "at" | "kind" | "status" | "issueId"> & { agentId?: string | null; reason?: string | null }) =>
    ctx.out(ctx.json ? JSON.stringify(e) : [e.seq, e.at, e.kind, e.status, e.issueId, e.agentId ?? "", e.reason ?? ""].join("  "));
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
    for (const e of lockEvents) if (!agent || e.agentId === agent) print(e);
    if (lockEvents.length) last = lockEvents.at(-1)!.seq;
    if (lockEvents.length < PAGE || stopped) break;
  }
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
}
