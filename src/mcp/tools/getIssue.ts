// get_issue: one issue as the agent needs it to work on it — what it waits
// on, its sub-issues, and its last 20 lock events — and HoldLost when this
// session claimed it and no longer holds it.
import * as z from "zod";
import { McpIssueDocument } from "../generated/graphql.js";
import { lostHold } from "./holds.js";
import { answer, ISSUE_STATUSES, issueId, issueOut, issueShape, problemFields } from "./shapes.js";
import type { ToolContext } from "./shapes.js";
import type { Tool } from "./tool.js";

const input = { issueId };
const detailShape = issueShape.extend({
  blockedBy: z.array(z.string()).describe("Issues this one waits on until they are DONE"),
  waitingOn: z.array(z.string()).describe("The part of blockedBy not DONE yet"),
  subIssues: z.array(z.object({ id: z.string(), title: z.string(), status: z.enum(ISSUE_STATUSES) })),
  events: z
    .array(z.object({ seq: z.string(), kind: z.string(), status: z.enum(ISSUE_STATUSES), reason: z.string().nullable(), at: z.string() }))
    .describe("The issue's last 20 lock events, newest first"),
});
const output = { issue: detailShape.nullable(), ...problemFields };

export const getIssue: Tool<typeof input, typeof output> = {
  name: "get_issue",
  config: {
    title: "Read an issue",
    description:
      "Reads one issue of your company: its fields, blockedBy and waitingOn, its sub-issues and its last 20 lock events. If this session held it and no longer does, also answers problem HoldLost with who holds it now.",
    inputSchema: input,
    outputSchema: output,
    annotations: { readOnlyHint: true },
  },
  none: { issue: null },
  about: (args) => args.issueId,
  async run(ctx: ToolContext, args) {
    const { issue: found, lockEvents } = await ctx.call(McpIssueDocument, { id: args.issueId, companyId: ctx.companyId });
    if (!found) {
      return answer(
        { issue: null, problem: "IssueNotFound", message: `no issue ${args.issueId} in your company` },
        `No issue ${args.issueId} in your company.`,
      );
    }
    const issue = {
      ...issueOut(found),
      blockedBy: found.blockedBy,
      waitingOn: found.waitingOn,
      subIssues: found.subIssues.edges.map((e) => e.node),
      events: lockEvents.map(({ seq, kind, status, reason, at }) => ({ seq, kind, status, reason: reason ?? null, at })),
    };
    const lost = await lostHold(ctx, args.issueId);
    if (lost) return answer({ issue, ...lost }, lost.message);
    const waiting = issue.waitingOn.length ? `; waits on ${issue.waitingOn.length} issue(s)` : "";
    return answer({ issue }, `Issue ${issue.id} "${issue.title}" is ${issue.status} (epoch ${issue.lockEpoch})${waiting}.`);
  },
};
