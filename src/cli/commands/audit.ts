// `baton audit`: lockAudit, with an exit code a script can test.
import * as Documents from "../generated/graphql.js";
import { companyOf, parse } from "../kit.js";
import type { Context } from "../kit.js";

/**
 * Exit 1 when any lock invariant the audit counts is broken (doubleClaims, halfReleasedLocks, miscountedKeys,
 * miscountedWaits), else 0. waitingOnCancelled is shown, not failed: it is work someone has to decide on, not a fault.
 */
export async function audit(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "audit [--company ID]", { company: { type: "string" } });
  const companyId = await companyOf(ctx, p.values.company);
  const { lockAudit } = await ctx.baton.request(Documents.CliLockAuditDocument, { companyId });
  if (ctx.json) ctx.out(JSON.stringify(lockAudit));
  else for (const [k, v] of Object.entries(lockAudit)) ctx.out(`${k.padEnd(22)} ${typeof v === "object" ? JSON.stringify(v) : v}`);
  const broken = lockAudit.doubleClaims + lockAudit.halfReleasedLocks + lockAudit.miscountedKeys + lockAudit.miscountedWaits;
  return broken === 0 ? 0 : 1;
}
