// releaseIssue: the holder gives the issue back, clearing both locks at once
// (RELEASE_IF_CHECKOUT_HELD in releaseIssues.ts, for one issue).
import type { LockDeps } from "./deps.js";
import { releaseIssues } from "./releaseIssues.js";
import type { AgentActor, ReleaseIssueResult, ReleaseOutcome } from "./types.js";

export async function releaseIssue(
  deps: LockDeps,
  actor: AgentActor,
  input: { runId: string; issueId: string; outcome: ReleaseOutcome; reason?: string | null },
): Promise<ReleaseIssueResult> {
  const result = await releaseIssues(deps, actor, { ...input, issueIds: [input.issueId] });
  if (result.__typename === "RunNotActive") return result;
  const [issue] = result.issues;
  return issue ? { __typename: "IssueReleased", issue } : result.refused[0]!;
}
