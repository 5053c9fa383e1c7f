// `baton company create NAME` (admin token): a company and its board key.
import * as Documents from "../generated/graphql.js";
import { parse, Usage } from "../kit.js";
import type { Context } from "../kit.js";

/**
 * A new company: with --json, {companyId, name, boardKey}; otherwise its id and
 * then its board key on stdout, one a line, and what they are on stderr. The
 * board key is shown only this once.
 */
export async function createCompany(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, {}, 1);
  const name = p.positionals[0]!;
  if (name.trim() === "") throw new Usage("NAME must not be empty: baton company create NAME");
  const { createCompany } = await ctx.baton.request(Documents.CliCreateCompanyDocument, { name });
  if (ctx.json) {
    ctx.out(JSON.stringify({ companyId: createCompany.company.id, name: createCompany.company.name, boardKey: createCompany.boardKey }));
    return 0;
  }
  ctx.err(`baton: company ${JSON.stringify(createCompany.company.name)} created: its id, then its board key, shown once: keep it now.`);
  ctx.out(createCompany.company.id);
  ctx.out(createCompany.boardKey);
  return 0;
}
