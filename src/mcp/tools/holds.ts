// A lost hold is said, never hidden. The session remembers the epoch at which
// it claimed each issue (src/mcp/session.ts); once its run no longer holds
// that issue at that epoch (force-released, recovered after a stall, its key
// revoked), every tool call about the issue answers HoldLost with who holds it
// now. Nothing here changes the issue: the API refuses any change by a run
// that does not hold it, so the old epoch can change nothing either way.
import { McpIssueHolderDocument, McpRunDocument } from "../generated/graphql.js";
import type { Holder, ProblemOut, ToolContext } from "./shapes.js";

/** A run is live while RUNNING with its lease ahead (the API's own rule; the clock here may differ by little). */
function liveRun(run: { status: string; leaseExpiresAt: string } | null): boolean {
  return run !== null && run.status === "RUNNING" && Date.parse(run.leaseExpiresAt) > Date.now();
}

/** The holder of an issue whose checkout is `runId` (null: nobody). */
async function holderOf(ctx: ToolContext, runId: string | null): Promise<Holder> {
  if (!runId) return { runId: null, agentId: null, live: false };
  const { run } = await ctx.call(McpRunDocument, { runId });
  return { runId, agentId: run?.agentId ?? null, live: liveRun(run) };
}

function sayHolder(holder: Holder | null): string {
  if (!holder) return "who holds it now is unknown: this session's key no longer works";
  if (!holder.runId) return "nobody holds it now";
  return `run ${holder.runId}${holder.agentId ? ` of agent ${holder.agentId}` : ""} holds it now${holder.live ? "" : " (that run is not live: recovery will free it)"}`;
}

/** HoldLost; `refusal`: what the API answered the call (a claim again, say), told too so that the agent knows why it failed. */
export function holdLost(issueId: string, epoch: number, holder: Holder | null, refusal?: ProblemOut): ProblemOut {
  const why = refusal ? ` This call was refused: ${refusal.problem}: ${refusal.message}.` : "";
  return {
    problem: "HoldLost",
    message: `this session no longer holds issue ${issueId} (it claimed it at epoch ${epoch}); ${sayHolder(holder)}.${why} Do not go on with its work: claim it again or take another issue.`,
    holder,
  };
}

/**
 * HoldLost if the session claimed `issueId` and no longer holds it at that
 * epoch; null if it still holds it, or never claimed it (then the API's own
 * answer stands).
 */
export async function lostHold(ctx: ToolContext, issueId: string, refusal?: ProblemOut): Promise<ProblemOut | null> {
  const epoch = await ctx.session.holdOf(issueId);
  if (epoch === undefined) return null;
  if (ctx.session.keyRevoked) return holdLost(issueId, epoch, null, refusal);
  const [run, { issue }] = await Promise.all([ctx.session.currentRun(), ctx.call(McpIssueHolderDocument, { issueId })]);
  if (issue && run !== null && issue.checkoutRunId === run && issue.lockEpoch === epoch) return null;
  return holdLost(issueId, epoch, await holderOf(ctx, issue?.checkoutRunId ?? null), refusal);
}
