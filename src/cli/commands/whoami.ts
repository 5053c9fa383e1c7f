// `baton whoami`: the token's role, company and agent.
import * as Documents from "../generated/graphql.js";
import { parse, table } from "../kit.js";
import type { Context } from "../kit.js";

export async function whoami(ctx: Context, words: string[]): Promise<number> {
  if (!parse(ctx, words, "whoami", {})) return 0;
  const { me } = await ctx.baton.request(Documents.MeDocument, {});
  if (ctx.json) ctx.out(JSON.stringify(me));
  else table(ctx, ["ROLE", "COMPANY", "AGENT"], [[me.role, me.companyId, me.agentId]]);
  return 0;
}
