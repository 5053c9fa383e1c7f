// create_sub_issues: splits an issue the session holds into sub-issues, in
// one transaction (createSubIssues). With parentWaits the parent waits on
// them all: released with REQUEUE, it comes back once every one is DONE.
import * as z from "zod";
import { MAX_DESCRIPTION_LENGTH, MAX_TITLE_LENGTH } from "../../domain/validate.js";
import { MAX_SUB_ISSUES_PER_CALL } from "../../locks/graph/createSubIssues.js";
import { McpCreateSubIssuesDocument } from "../generated/graphql.js";
import { lostHold } from "./holds.js";
import { answer, anId, issueId, issueOut, issueShape, PRIORITIES, problemFields, problemOf } from "./shapes.js";
import type { ToolContext } from "./shapes.js";
import type { Tool } from "./tool.js";

const subIssue = z.object({
  title: z.string().min(1).max(MAX_TITLE_LENGTH),
  description: z.string().max(MAX_DESCRIPTION_LENGTH).optional(),
  priority: z.enum(PRIORITIES).optional(),
  assigneeAgentId: anId("an agent id").optional().describe("Who should do it (default: nobody, so any agent taking unassigned work)"),
  concurrencyKey: z.string().min(1).max(200).optional(),
  idempotencyKey: z.string().min(1).max(200).optional().describe("Sent again, the same key creates nothing and answers the issue it made"),
});

const input = {
  parentId: issueId,
  issues: z.array(subIssue).min(1).max(MAX_SUB_ISSUES_PER_CALL),
  parentWaits: z.boolean().optional().describe("The parent waits until every sub-issue is DONE (then release it with REQUEUE)"),
};
const output = { parent: issueShape.nullable(), issues: z.array(issueShape), ...problemFields };

export const createSubIssues: Tool<typeof input, typeof output> = {
  name: "create_sub_issues",
  config: {
    title: "Split an issue into sub-issues",
    description:
      "Creates sub-issues of an issue you hold, all or none. With parentWaits: true the parent waits on them: release it with outcome REQUEUE and it comes back to be claimed once every sub-issue is DONE.",
    inputSchema: input,
    outputSchema: output,
  },
  none: { parent: null, issues: [] },
  about: (args) => args.parentId,
  async run(ctx: ToolContext, args) {
    const runId = await ctx.session.run();
    const inputs = args.issues.map((i) => ({ ...i, parentId: args.parentId }));
    const { createSubIssues: result } = await ctx.call(McpCreateSubIssuesDocument, {
      runId,
      parentId: args.parentId,
      inputs,
      parentWaits: args.parentWaits ?? false,
    });
    if (result.__typename === "SubIssuesCreated") {
      const issues = result.issues.map(issueOut);
      const waits = args.parentWaits ? ` Issue ${args.parentId} now waits on them: release it with REQUEUE.` : "";
      return answer({ parent: issueOut(result.parent), issues }, `Created ${issues.length} sub-issue(s): ${issues.map((i) => i.id).join(", ")}.${waits}`);
    }
    if (result.__typename === "RunNotActive") await ctx.session.runDied(runId);
    const refusal = problemOf(result);
    const problem = (await lostHold(ctx, args.parentId, refusal)) ?? refusal;
    return answer({ parent: null, issues: [], ...problem }, `Nothing was created: ${problem.message}`);
  },
};
