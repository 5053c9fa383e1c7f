// add_dependency: an issue the session holds waits on another until that one
// is DONE (addDependency). An edge that would close a cycle is refused with
// DependencyCycle and the cycle's path.
import * as z from "zod";
import { McpAddDependencyDocument } from "../generated/graphql.js";
import { lostHold } from "./holds.js";
import { answer, issueId, issueOut, issueShape, problemFields, problemOf } from "./shapes.js";
import type { ToolContext } from "./shapes.js";
import type { Tool } from "./tool.js";

const input = { issueId: issueId.describe("The issue you hold, which is to wait"), blockedById: issueId.describe("The issue it waits on until DONE") };
const output = {
  issue: issueShape.extend({ blockedBy: z.array(z.string()), waitingOn: z.array(z.string()) }).nullable(),
  path: z.array(z.string()).optional().describe("DependencyCycle: the cycle the edge would close"),
  ...problemFields,
};

export const addDependency: Tool<typeof input, typeof output> = {
  name: "add_dependency",
  config: {
    title: "Wait on another issue",
    description:
      "Makes an issue you hold wait on another one until it is DONE; you keep holding it. Refused with problem DependencyCycle if the other issue already waits on this one.",
    inputSchema: input,
    outputSchema: output,
  },
  none: { issue: null },
  about: (args) => args.issueId,
  async run(ctx: ToolContext, args) {
    const runId = await ctx.session.run();
    const { addDependency: result } = await ctx.call(McpAddDependencyDocument, { runId, issueId: args.issueId, blockedById: args.blockedById });
    if (result.__typename === "DependencyAdded") {
      const issue = { ...issueOut(result.issue), blockedBy: result.issue.blockedBy, waitingOn: result.issue.waitingOn };
      return answer({ issue }, `Issue ${issue.id} now waits on ${args.blockedById} until it is DONE.`);
    }
    if (result.__typename === "DependencyCycle") {
      return answer({ issue: null, path: result.path, ...problemOf(result) }, `Refused: ${result.message}`);
    }
    const refusal = problemOf(result);
    const problem = (await lostHold(ctx, args.issueId, refusal)) ?? refusal;
    return answer({ issue: null, ...problem }, `Not added: ${problem.message}`);
  },
};
