// `baton runs`: the company's runs, newest first, with the lease left.
import * as Documents from "../generated/graphql.js";
import { agentNames, companyOf, cut, parse, RUN_STATUSES, statuses, table } from "../kit.js";
import type { Context } from "../kit.js";

type Run = Documents.CliRunsQuery["runs"][number];

/** Whole seconds until a RUNNING run's lease expires (0 once it has); blank for a finished run. */
function leaseLeft(run: Run): string {
  return run.status === "RUNNING" ? `${Math.max(0, Math.round((Date.parse(run.leaseExpiresAt) - Date.now()) / 1000))} s` : "";
}

/** A run's agent as a table shows it: its name, cut. */
const NAME_WIDTH = 24;

export async function listRuns(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, { status: { type: "string" }, company: { type: "string" } });
  const status = statuses(p.values.status, RUN_STATUSES);
  const companyId = await companyOf(ctx, p.values.company);
  const { runs } = await ctx.baton.request(Documents.CliRunsDocument, { companyId, status });
  if (ctx.json) {
    ctx.out(JSON.stringify(runs));
    return 0;
  }
  const names = runs.length ? await agentNames(ctx, companyId) : new Map<string, string>();
  table(
    ctx,
    ["ID", "AGENT", "AGENT ID", "STATUS", "LEASE LEFT"],
    runs.map((r) => [r.id, cut(names.get(r.agentId), NAME_WIDTH), r.agentId, r.status, leaseLeft(r)]),
  );
  return 0;
}
