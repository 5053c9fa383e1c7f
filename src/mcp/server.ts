// The MCP server of one session: Baton's seven tools (src/mcp/tools/), each
// run with the session's context and guarded so that no answer carries a
// stack. stdio (src/mcp/stdio.ts) builds one for its process; /mcp
// (src/mcp/http/route.ts) one per request, from the session's row.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { ZodRawShape } from "zod";
import { addDependency } from "./tools/addDependency.js";
import { checkoutIssue } from "./tools/checkoutIssue.js";
import { claimNextIssue } from "./tools/claimNextIssue.js";
import { createSubIssues } from "./tools/createSubIssues.js";
import { getIssue } from "./tools/getIssue.js";
import { listIssues } from "./tools/listIssues.js";
import { releaseIssue } from "./tools/releaseIssue.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { UnauthenticatedError } from "../client/errors.js";
import { holdLost } from "./tools/holds.js";
import { answer, guarded } from "./tools/shapes.js";
import type { ToolContext } from "./tools/shapes.js";
import type { Tool } from "./tools/tool.js";

const TOOLS = [claimNextIssue, checkoutIssue, getIssue, listIssues, releaseIssue, createSubIssues, addDependency] as const;

const SERVER_INFO = { name: "baton", version: "0.1.0" } as const;

const INSTRUCTIONS =
  "Baton hands out issues so that no two agents ever work on the same one. claim_next_issue gives you your next issue; work on it, then release_issue with DONE (or REQUEUE, BLOCKED, FAILED). Split big work with create_sub_issues (parentWaits: true, then release with REQUEUE: the issue comes back when the parts are DONE). If an answer says HoldLost, stop working on that issue: someone else has it now.";

/**
 * A call refused because the session's key no longer works: about an issue
 * the session held, that is a lost hold (HoldLost, holder unknown); any other
 * call is refused (UNAUTHENTICATED, by guarded()).
 */
async function keyRefusals(ctx: ToolContext, tool: Tool<ZodRawShape, ZodRawShape>, args: Record<string, unknown>): Promise<CallToolResult> {
  try {
    return await tool.run(ctx, args);
  } catch (err) {
    if (!(err instanceof UnauthenticatedError)) throw err;
    ctx.session.keyRefused();
    const issueId = tool.about?.(args);
    const epoch = issueId === undefined ? undefined : await ctx.session.holdOf(issueId);
    if (issueId === undefined || epoch === undefined) throw err;
    const lost = holdLost(issueId, epoch, null);
    return answer({ ...tool.none, ...lost }, lost.message);
  }
}

export function mcpServer(ctx: ToolContext, onUnexpected: (err: unknown) => void): McpServer {
  const server = new McpServer(SERVER_INFO, { instructions: INSTRUCTIONS });
  for (const tool of TOOLS as readonly Tool<ZodRawShape, ZodRawShape>[]) {
    server.registerTool(tool.name, tool.config, (args: Record<string, unknown>) => {
      const call = guarded(() => keyRefusals(ctx, tool, args), onUnexpected);
      ctx.track?.(call);
      return call;
    });
  }
  return server;
}
