// release_issue: the session's run gives back an issue it holds, both locks
// together, with an outcome (DONE, BLOCKED, FAILED, REQUEUE) and, for FAILED
// or REQUEUE, an optional delay before it may be claimed again. A hold the
// session lost is answered HoldLost: it was not released by this call.
import * as z from "zod";
import { MAX_RETRY_SECONDS } from "../../domain/validate.js";
import { MAX_REASON_LENGTH } from "../../locks/release/releaseIssues.js";
import { McpReleaseDocument } from "../generated/graphql.js";
import { lostHold } from "./holds.js";
import { answer, issueId, issueOut, issueShape, problemFields, problemOf } from "./shapes.js";
import type { ToolContext } from "./shapes.js";
import type { Tool } from "./tool.js";

const input = {
  issueId,
  outcome: z
    .enum(["DONE", "BLOCKED", "FAILED", "REQUEUE"])
    .describe(
      "DONE: finished. BLOCKED: cannot go on without a person. FAILED: this attempt failed (retried while attempts are left). REQUEUE: give it back undone",
    ),
  reason: z.string().max(MAX_REASON_LENGTH).optional().describe("Why, in a few words: kept in the issue's events"),
  retryAfterSeconds: z.number().int().min(0).max(MAX_RETRY_SECONDS).optional().describe("FAILED or REQUEUE: not to be claimed again for this many seconds"),
};
const output = { issue: issueShape.nullable(), ...problemFields };

const AFTER: Record<string, string> = {
  DONE: "It is DONE.",
  BLOCKED: "It is BLOCKED until someone unblocks it.",
  FAILED: "It is given back as failed.",
  REQUEUE: "It is given back to the queue.",
};

export const releaseIssue: Tool<typeof input, typeof output> = {
  name: "release_issue",
  config: {
    title: "Release an issue",
    description:
      "Gives back an issue you hold, with its outcome. Only the holder may release: if this session lost the issue (force-released, recovered, key revoked) the answer is problem HoldLost and nothing changes.",
    inputSchema: input,
    outputSchema: output,
    annotations: { destructiveHint: false, idempotentHint: false },
  },
  none: { issue: null },
  about: (args) => args.issueId,
  async run(ctx: ToolContext, args) {
    const runId = await ctx.session.run();
    const { releaseIssue: result } = await ctx.call(McpReleaseDocument, {
      runId,
      issueId: args.issueId,
      outcome: args.outcome,
      reason: args.reason ?? null,
      retryAfterSeconds: args.retryAfterSeconds ?? null,
    });
    if (result.__typename === "IssueReleased") {
      await ctx.session.released(args.issueId);
      const issue = issueOut(result.issue);
      return answer({ issue }, `Released issue ${issue.id}: ${AFTER[args.outcome]} You no longer hold it.`);
    }
    if (result.__typename === "RunNotActive") await ctx.session.runDied(runId);
    const refusal = problemOf(result);
    const problem = (await lostHold(ctx, args.issueId, refusal)) ?? refusal;
    return answer({ issue: null, ...problem }, `Not released: ${problem.message}`);
  },
};
