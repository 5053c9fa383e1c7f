// claim_next_issue: the session's run claims the agent's next ready issue and
// takes its execution lock in the same statement (claimIssue with
// startExecution, grouped with the company's other claims): the agent is
// about to work on it.
import * as z from "zod";
import { McpClaimNextDocument } from "../generated/graphql.js";
import { answer, claimed, earlierHoldLost, issueOut, issueShape, problemFields, problemOf } from "./shapes.js";
import type { ToolContext } from "./shapes.js";
import type { Tool } from "./tool.js";

const input = {
  includeUnassigned: z.boolean().optional().describe("Also take issues assigned to nobody (default: only this agent's)"),
};
const output = { issue: issueShape.nullable(), earlierHoldLost, ...problemFields };

export const claimNextIssue: Tool<typeof input, typeof output> = {
  name: "claim_next_issue",
  config: {
    title: "Claim the next issue",
    description:
      "Claims the next ready issue for this agent (highest priority, oldest first) and starts work on it: you hold it until you release it with release_issue or this session ends. Answers issue: null with problem NoIssueAvailable when there is nothing to do now.",
    inputSchema: input,
    outputSchema: output,
  },
  none: { issue: null },
  async run(ctx: ToolContext, args) {
    for (let tries = 1; ; tries++) {
      const runId = await ctx.session.run();
      const { claimIssue: result } = await ctx.call(McpClaimNextDocument, { runId, includeUnassigned: args.includeUnassigned ?? false });
      if (result.__typename === "IssueClaimed") return claimed(ctx, issueOut(result.issue));
      // The run died between calls (a stall the sweep recovered): one more try with a new run.
      if (result.__typename === "RunNotActive" && tries === 1) {
        await ctx.session.runDied(runId);
        continue;
      }
      if (result.__typename !== "NoIssueAvailable") {
        const problem = problemOf(result);
        return answer({ issue: null, ...problem }, `Nothing was claimed: ${problem.message}`);
      }
      break;
    }
    return answer({ issue: null, problem: "NoIssueAvailable", message: "no issue is ready for this agent now" }, "No issue is ready for this agent now.");
  },
};
