// releaseIssue: the holder gives the issue back, clearing both locks at once
// (RELEASE_IF_CHECKOUT_HELD in releaseIssues.ts; the API groups a company's
// concurrent releases into one statement), and with `next` claims its next
// one in the same request.
import type { LockDeps } from "../shared/deps.js";
import { refusal, releaseDetails, releaseForEach } from "./releaseIssues.js";
import type { ReleaseInput } from "./releaseIssues.js";
import { refuseRun } from "../runs/runs.js";
import type { AgentActor, ReleaseIssueResult } from "../shared/types.js";
import { issueNotFound } from "../shared/types.js";
import { claimIssue } from "../claim/claimIssue.js";
import { certainlyNotApplied } from "../../db/sql.js";

/** releaseIssue's `next`: claim the caller's next issue once this one is released. */
export interface ClaimNext {
  includeUnassigned?: boolean | null;
  startExecution?: boolean | null;
}

/**
 * With `next`, a released issue is followed by claimIssue without an issue id
 * for the same run, exactly as the two calls one after the other (each its own
 * grouped statement): the claim sees the release, and a refused release claims
 * nothing.
 */
export async function releaseIssue(
  deps: LockDeps,
  actor: AgentActor,
  input: ReleaseInput & { issueId: string; next?: ClaimNext | null },
): Promise<ReleaseIssueResult> {
  const { runId, issueId, outcome } = input;
  const request = { actor, runId, issueId, outcome, ...releaseDetails(input) };
  const answer = deps.groups ? await deps.groups.release.submit(actor.companyId, request) : (await releaseForEach(deps, actor.companyId, [request]))[0]!;
  const refused = refuseRun(answer.run, runId, actor);
  if (refused) return refused;
  if (!answer.current || !answer.verdict) return issueNotFound(issueId);
  if (answer.verdict !== "RELEASE") return refusal(runId, answer.verdict, answer.current);
  const released = { __typename: "IssueReleased" as const, issue: answer.issue!, freed: answer.freed ?? [] };
  if (!input.next) return released;
  // The release has committed: a claim that certainly changed nothing (its retries spent, say) is no next issue, never
  // the whole answer; one whose outcome is unknown (the connection lost) is thrown, for the caller to treat as such.
  const claimed = await claimIssue(deps, actor, {
    runId,
    includeUnassigned: input.next.includeUnassigned ?? false,
    startExecution: input.next.startExecution ?? true,
  }).catch((err: unknown) => {
    if (certainlyNotApplied(err)) return null;
    throw err;
  });
  // Nothing claimable, or the run ended in between: no next issue.
  return { ...released, next: claimed?.__typename === "IssueClaimed" ? claimed : null };
}
