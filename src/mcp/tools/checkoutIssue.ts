// checkout_issue: the session's run claims one named issue (claimIssue by id,
// with expectedStatuses, OPEN by default) and takes its execution lock, in
// one request (startExecution).
// Idempotent for the session that holds it; anyone else's hold answers
// CheckoutConflict naming the holder and whether it is live.
import * as z from "zod";
import { McpCheckoutDocument } from "../generated/graphql.js";
import { holdLost, lostHold } from "./holds.js";
import { answer, claimed, earlierHoldLost, ISSUE_STATUSES, issueId, issueOut, issueShape, problemFields, problemOf } from "./shapes.js";
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
const output = { issue: issueShape.nullable(), earlierHoldLost, ...problemFields };

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
    let checkout = (await ctx.call(McpCheckoutDocument, { runId, ...variables })).claimIssue;
    if (checkout.__typename === "RunNotActive") {
      await ctx.session.runDied(runId);
      runId = await ctx.session.run();
      checkout = (await ctx.call(McpCheckoutDocument, { runId, ...variables })).claimIssue;
    }
    if (checkout.__typename === "CheckoutConflict") {
      const holder = { runId: checkout.ownerRunId ?? null, agentId: checkout.ownerAgentId ?? null, live: checkout.holderRunIsLive };
      const epoch = await ctx.session.holdOf(args.issueId);
      const problem = epoch === undefined ? { ...problemOf(checkout), holder } : holdLost(args.issueId, epoch, holder, problemOf(checkout));
      return answer({ issue: null, ...problem }, `Not checked out: ${problem.message}`);
    }
    if (checkout.__typename !== "IssueClaimed") return refusedWith(problemOf(checkout));
    return claimed(ctx, issueOut(checkout.issue));
  },
};
