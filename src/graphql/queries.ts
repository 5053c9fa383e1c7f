import { getCompany, getRun, listAgents, listCompanies, listLockEvents, listRuns } from "../reads/lists.js";
import { getIssues } from "../reads/lists.js";
import { lockAudit } from "../reads/lockAudit.js";
import { listConcurrencyLimits } from "../locks/operator/concurrencyLimits.js";
import { builder } from "./builder.js";
import { issuePage } from "./issuePages.js";
import { readScope, requireAdmin, requireCompanyOverseer, requireCompanyReader, requirePrincipal } from "./context.js";
import { validateId, validateSeq } from "../domain/validate.js";
import { AgentRef, CompanyRef, PrincipalRef } from "./types/company.js";
import { PAGE_LIMITS, pageSize } from "../bounds/pages.js";
import { ConcurrencyLimitRef } from "./types/concurrencyLimit.js";
import { IssueStatusEnum, RunStatusEnum } from "./types/enums.js";
import { IssueConnectionRef, IssueRef } from "./types/issue.js";
import { LockAuditRef, LockEventRef } from "./types/lockEvent.js";
import { HeartbeatRunRef } from "./types/run.js";

/** A seq is a decimal string (bigint). */
export function parseSeq(name: string, value: string | null | undefined): string | null {
  if (value == null) return null;
  return validateSeq(name, value);
}

builder.queryFields((t) => ({
  me: t.field({ type: PrincipalRef, resolve: (_root, _args, ctx) => requirePrincipal(ctx) }),

  company: t.field({
    type: CompanyRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      const scope = readScope(ctx);
      const companyId = validateId("id", id);
      if (scope !== null && scope !== companyId) return null;
      return getCompany(ctx.services.db, companyId);
    },
  }),

  companies: t.field({
    type: [CompanyRef],
    description: "Every company, by name: the admin token's company picker. Admin token only.",
    args: { first: t.arg.int({ defaultValue: PAGE_LIMITS.companies.fallback }) },
    resolve: (_root, args, ctx) => {
      requireAdmin(ctx);
      return listCompanies(ctx.services.db, pageSize("first", args.first, PAGE_LIMITS.companies));
    },
  }),

  agents: t.field({
    type: [AgentRef],
    args: { companyId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => listAgents(ctx.services.db, requireCompanyOverseer(ctx, args.companyId)),
  }),

  issue: t.field({
    type: IssueRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, { id }, ctx) => {
      const [issue] = await getIssues(ctx.services.db, [validateId("id", id)], readScope(ctx));
      return issue ?? null;
    },
  }),

  issues: t.field({
    type: IssueConnectionRef,
    args: {
      companyId: t.arg.id({ required: true }),
      status: t.arg({ type: [IssueStatusEnum] }),
      assigneeAgentId: t.arg.id(),
      parentId: t.arg.id({ description: "Only the sub-issues of this issue." }),
      ready: t.arg.boolean({ description: "Only ready issues (true), or only the others (false): see Issue.ready." }),
      first: t.arg.int({ defaultValue: PAGE_LIMITS.issues.fallback }),
      after: t.arg.string(),
    },
    resolve: (_root, args, ctx) =>
      issuePage(
        ctx,
        requireCompanyReader(ctx, args.companyId),
        {
          status: args.status ?? null,
          assigneeAgentId: args.assigneeAgentId != null ? validateId("assigneeAgentId", args.assigneeAgentId) : null,
          parentId: args.parentId != null ? validateId("parentId", args.parentId) : null,
          ready: args.ready ?? null,
        },
        args.first,
        args.after ?? null,
      ),
  }),

  run: t.field({
    type: HeartbeatRunRef,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => getRun(ctx.services.db, validateId("id", id), readScope(ctx)),
  }),

  runs: t.field({
    type: [HeartbeatRunRef],
    description: "Newest first.",
    args: {
      companyId: t.arg.id({ required: true }),
      status: t.arg({ type: [RunStatusEnum] }),
      first: t.arg.int({ defaultValue: PAGE_LIMITS.runs.fallback }),
    },
    resolve: (_root, args, ctx) =>
      listRuns(ctx.services.db, requireCompanyReader(ctx, args.companyId), args.status ?? null, pageSize("first", args.first, PAGE_LIMITS.runs)),
  }),

  lockEvents: t.field({
    type: [LockEventRef],
    description:
      "Committed events with afterSeq < seq < beforeSeq (both optional), ascending; with newestFirst, descending: " +
      "a board's event tail, paged back by passing the smallest seq it holds as beforeSeq.",
    args: {
      companyId: t.arg.id({ required: true }),
      afterSeq: t.arg.id(),
      beforeSeq: t.arg.id(),
      issueId: t.arg.id(),
      agentId: t.arg.id(),
      newestFirst: t.arg.boolean({ defaultValue: false }),
      first: t.arg.int({ defaultValue: PAGE_LIMITS.lockEvents.fallback }),
    },
    resolve: (_root, args, ctx) =>
      listLockEvents(ctx.services.db, requireCompanyReader(ctx, args.companyId), {
        afterSeq: parseSeq("afterSeq", args.afterSeq),
        beforeSeq: parseSeq("beforeSeq", args.beforeSeq),
        newestFirst: args.newestFirst ?? false,
        issueId: args.issueId != null ? validateId("issueId", args.issueId) : null,
        agentId: args.agentId != null ? validateId("agentId", args.agentId) : null,
        first: pageSize("first", args.first, PAGE_LIMITS.lockEvents),
      }),
  }),

  concurrencyLimits: t.field({
    type: [ConcurrencyLimitRef],
    description: "The company's limited concurrency keys, by key, with how many of each key's issues are active now.",
    args: { companyId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => listConcurrencyLimits(ctx.services.db, requireCompanyOverseer(ctx, args.companyId)),
  }),

  lockAudit: t.field({
    type: LockAuditRef,
    args: { companyId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => lockAudit(ctx.services.db, requireCompanyOverseer(ctx, args.companyId)),
  }),
}));
