// list_issues: the company's issues, oldest first, filtered by status and
// readiness (ready: OPEN, an attempt left, nothing waited on, not delayed).
import * as z from "zod";
import { McpIssuesDocument } from "../generated/graphql.js";
import { answer, ISSUE_STATUSES, issueOut, issueShape } from "./shapes.js";
import type { ToolContext } from "./shapes.js";
import type { Tool } from "./tool.js";

const input = {
  status: z.array(z.enum(ISSUE_STATUSES)).min(1).max(ISSUE_STATUSES.length).optional().describe("Only issues in these statuses"),
  ready: z.boolean().optional().describe("Only issues claim_next_issue could take now (true), or only the others (false)"),
  first: z.number().int().min(1).max(100).optional().describe("How many (1..100, default 20)"),
};
const output = { issues: z.array(issueShape) };

export const listIssues: Tool<typeof input, typeof output> = {
  name: "list_issues",
  config: {
    title: "List issues",
    description: "Lists your company's issues, optionally only those in some statuses or only the ready ones.",
    inputSchema: input,
    outputSchema: output,
    annotations: { readOnlyHint: true },
  },
  none: { issues: [] },
  async run(ctx: ToolContext, args) {
    const { issues } = await ctx.call(McpIssuesDocument, {
      companyId: ctx.companyId,
      status: args.status ?? null,
      ready: args.ready ?? null,
      first: args.first ?? 20,
    });
    const list = issues.edges.map((e) => issueOut(e.node));
    return answer({ issues: list }, `${list.length} issue(s).`);
  },
};
