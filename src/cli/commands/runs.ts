// `baton runs`: the company's runs, newest first, with the lease left.
import { Documents } from "../../client/index.js";
import { companyOf, parse, statuses, table } from "../kit.js";
import type { Context } from "../kit.js";

type Run = Documents.CliRunsQuery["runs"][number];

/** Whole seconds until a RUNNING run's lease expires (0 once it has); blank for a finished run. */
function leaseLeft(run: Run): string {
  return run.status === "RUNNING" ? `${Math.max(0, Math.round((Date.parse(run.leaseExpiresAt) - Date.now()) / 1000))} s` : "";
}

export async function listRuns(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "runs [--status S[,S…]] [--company ID]", { status: { type: "string" }, company: { type: "string" } });
  if (!p) return 0;
  const companyId = await companyOf(ctx, p.values.company);
  const { runs } = await ctx.baton.request(Documents.CliRunsDocument, { companyId, status: statuses<Documents.RunStatus>(p.values.status) });
  if (ctx.json) ctx.out(JSON.stringify(runs));
  else
    table(
      ctx,
      ["ID", "AGENT", "STATUS", "LEASE LEFT"],
      runs.map((r) => [r.id, r.agentId, r.status, leaseLeft(r)]),
    );
  return 0;
}
