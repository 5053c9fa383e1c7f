// `baton audit`: lockAudit, with an exit code a script can test.
import * as Documents from "../generated/graphql.js";
import { companyOf, parse } from "../kit.js";
import type { Context } from "../kit.js";

/** Exit 1 when any lock invariant the audit counts is broken (doubleClaims, halfReleasedLocks, miscountedKeys), else 0. */
export async function audit(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "audit [--company ID]", { company: { type: "string" } });
  const companyId = await companyOf(ctx, p.values.company);
  const { lockAudit } = await ctx.baton.request(Documents.CliLockAuditDocument, { companyId });
  if (ctx.json) ctx.out(JSON.stringify(lockAudit));
  else for (const [k, v] of Object.entries(lockAudit)) ctx.out(`${k.padEnd(22)} ${typeof v === "object" ? JSON.stringify(v) : v}`);
  return lockAudit.doubleClaims === 0 && lockAudit.halfReleasedLocks === 0 && lockAudit.miscountedKeys === 0 ? 0 : 1;
}
