// `baton limits` (the company's concurrency limits) and `baton limit set |
// remove` (one key's cap, board key).
import * as Documents from "../generated/graphql.js";
import { companyOf, parse, table, Usage } from "../kit.js";
import type { Context } from "../kit.js";

type Limit = Documents.ConcurrencyLimitFieldsFragment;

/** setConcurrencyLimit's bounds (the server checks them too). */
const MAX_LIMIT = 10_000;

function printLimits(ctx: Context, limits: Limit[]): void {
  if (ctx.json) {
    ctx.out(JSON.stringify(limits));
    return;
  }
  table(
    ctx,
    ["KEY", "ACTIVE", "MAX", "STATE"],
    // The key whole: it is what `baton limit set` and `remove` take.
    limits.map((l) => [l.key, l.active, l.maxActive, l.active >= l.maxActive ? "at limit" : ""]),
  );
}

export async function listLimits(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "limits [--company ID]", { company: { type: "string" } });
  const companyId = await companyOf(ctx, p.values.company);
  const { concurrencyLimits } = await ctx.baton.request(Documents.ConcurrencyLimitsDocument, { companyId });
  printLimits(ctx, concurrencyLimits);
  return 0;
}

export async function setLimit(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "limit set KEY N", {}, 2);
  const [key, n] = p.positionals as [string, string];
  const maxActive = /^\d+$/.test(n) ? Number(n) : NaN;
  if (!(maxActive >= 1 && maxActive <= MAX_LIMIT)) throw new Usage(`N must be a whole number from 1 to ${MAX_LIMIT} (baton limit remove KEY removes a cap)`);
  const { setConcurrencyLimit } = await ctx.baton.request(Documents.SetConcurrencyLimitDocument, { key, maxActive });
  printLimits(ctx, setConcurrencyLimit ? [setConcurrencyLimit] : []); // with a maxActive, the answer is the limit
  return 0;
}

export async function removeLimit(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "limit remove KEY", {}, 1);
  const key = p.positionals[0]!;
  await ctx.baton.request(Documents.SetConcurrencyLimitDocument, { key, maxActive: null });
  if (ctx.json) ctx.out(JSON.stringify({ key, maxActive: null }));
  else ctx.out(`${key}: no limit`);
  return 0;
}
