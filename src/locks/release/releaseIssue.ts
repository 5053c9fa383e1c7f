// releaseIssue: the holder gives the issue back, clearing both locks at once
// (RELEASE_IF_CHECKOUT_HELD in releaseIssues.ts; the API groups a company's
// concurrent releases into one statement).
import type { LockDeps } from "../shared/deps.js";
import { refusal, releaseDetails, releaseForEach } from "./releaseIssues.js";
import type { ReleaseInput } from "./releaseIssues.js";
import { refuseRun } from "../runs/runs.js";
import type { AgentActor, ReleaseIssueResult } from "../shared/types.js";
import { issueNotFound } from "../shared/types.js";

export async function releaseIssue(deps: LockDeps, actor: AgentActor, input: ReleaseInput & { issueId: string }): Promise<ReleaseIssueResult> {
  const { runId, issueId, outcome } = input;
  const request = { actor, runId, issueId, outcome, ...releaseDetails(input) };
  const answer = deps.groups ? await deps.groups.release.submit(actor.companyId, request) : (await releaseForEach(deps, actor.companyId, [request]))[0]!;
  const refused = refuseRun(answer.run, runId, actor);
  if (refused) return refused;
  if (!answer.current || !answer.verdict) return issueNotFound(issueId);
  if (answer.verdict === "RELEASE") return { __typename: "IssueReleased", issue: answer.issue!, freed: answer.freed ?? [] };
  return refusal(runId, answer.verdict, answer.current);
}
