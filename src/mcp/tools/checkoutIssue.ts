// checkout_issue: the session's run claims one named issue (claimIssue by id,
// with expectedStatuses, OPEN by default) and takes its execution lock.
// Idempotent for the session that holds it; anyone else's hold answers
// CheckoutConflict naming the holder and whether it is live.
import * as z from "zod";
import { McpAcquireDocument, McpCheckoutDocument } from "../generated/graphql.js";
import { holdLost, lostHold } from "./holds.js";
import { answer, ISSUE_STATUSES, issueId, issueOut, issueShape, problemFields, problemOf } from "./shapes.js";
import type { ProblemOut, ToolContext } from "./shapes.js";
import type { Tool } from "./tool.js";

const input = {
  issueId,
  expectedStatuses: z
    .array(z.enum(ISSUE_STATUSES))
    .min(1)
    .max(ISSUE_STATUSES.length)
    .optional()
    .describe('The statuses the issue may be in to be taken (default ["OPEN"])'),
};
const output = { issue: issueShape.nullable(), ...problemFields };

export const checkoutIssue: Tool<typeof input, typeof output> = {
  name: "checkout_issue",
  config: {
    title: "Check out one issue",
    description:
      "Claims the named issue and starts work on it, if its status is one of expectedStatuses (default OPEN). Calling it again for an issue you hold answers it again. If another run holds it, answers problem CheckoutConflict with the holder.",
    inputSchema: input,
    outputSchema: output,
  },
  none: { issue: null },
  about: (args) => args.issueId,
  async run(ctx: ToolContext, args) {
    const refusedWith = async (refusal: ProblemOut) => {
      const problem = (await lostHold(ctx, args.issueId, refusal)) ?? refusal;
      return answer({ issue: null, ...problem }, `Not checked out: ${problem.message}`);
    };
    let runId = await ctx.session.run();
    const variables = { issueId: args.issueId, expectedStatuses: args.expectedStatuses ?? ["OPEN" as const] };
    let claimed = (await ctx.call(McpCheckoutDocument, { runId, ...variables })).claimIssue;
    if (claimed.__typename === "RunNotActive") {
      await ctx.session.runDied(runId);
      runId = await ctx.session.run();
      claimed = (await ctx.call(McpCheckoutDocument, { runId, ...variables })).claimIssue;
    }
    if (claimed.__typename === "CheckoutConflict") {
      const holder = { runId: claimed.ownerRunId ?? null, agentId: claimed.ownerAgentId ?? null, live: claimed.holderRunIsLive };
      const epoch = await ctx.session.holdOf(args.issueId);
      const problem = epoch === undefined ? { ...problemOf(claimed), holder } : holdLost(args.issueId, epoch, holder, problemOf(claimed));
      return answer({ issue: null, ...problem }, `Not checked out: ${problem.message}`);
    }
    if (claimed.__typename !== "IssueClaimed") return refusedWith(problemOf(claimed));
    await ctx.session.held(claimed.issue.id, claimed.issue.lockEpoch);
    const { acquireExecution: started } = await ctx.call(McpAcquireDocument, { runId, issueId: args.issueId });
    if (started.__typename !== "ExecutionAcquired") {
      const problem = problemOf(started);
      return answer({ issue: issueOut(claimed.issue), ...problem }, `Checked out, but work could not start: ${problem.message}`);
    }
    const issue = issueOut(started.issue);
    return answer({ issue }, `You hold issue ${issue.id} "${issue.title}" (epoch ${issue.lockEpoch}), IN_PROGRESS: work on it, then call release_issue.`);
  },
};
