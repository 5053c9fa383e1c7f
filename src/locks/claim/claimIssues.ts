// claimIssues: take the checkout of the caller's next `limit` claimable issues
// in one statement (CLAIM_NEXT_SKIP_LOCKED, claimNextSkipLocked.ts), with
// their execution locks too when asked, and answer what it got. claimIssue
// without an issue id uses CLAIM_NEXT_FOR_EACH (claimNextForEach.ts), which
// answers a group of callers.
import { claimNextSkipLocked } from "./claimNextSkipLocked.js";
import type { LockDeps } from "../shared/deps.js";
import { refuseRun, withoutLive } from "../runs/runs.js";
import type { AgentActor, NoIssueAvailable, RunNotActive } from "../shared/types.js";
import type { Issue, Run } from "../../domain/types.js";
import { InvalidInputError } from "../../domain/errors.js";

export const MAX_CLAIM_BATCH = 1000;

export interface IssuesClaimed {
  __typename: "IssuesClaimed";
  issues: Issue[];
  run: Run;
}
export type ClaimIssuesResult = IssuesClaimed | NoIssueAvailable | RunNotActive;

export async function claimIssues(
  deps: LockDeps,
  actor: AgentActor,
  input: { runId: string; limit: number; includeUnassigned?: boolean | null; acquireExecution?: boolean | null },
): Promise<ClaimIssuesResult> {
  const { runId, limit } = input;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CLAIM_BATCH) {
    throw new InvalidInputError(`limit must be between 1 and ${MAX_CLAIM_BATCH}`);
  }
  const row = await claimNextSkipLocked(deps, actor, {
    runId,
    includeUnassigned: input.includeUnassigned ?? false,
    limit,
    acquireExecution: input.acquireExecution ?? false,
  });
  const refused = refuseRun(row.run, runId, actor);
  if (refused) return refused;
  if (row.issues.length === 0 || !row.run) return { __typename: "NoIssueAvailable", message: "no claimable issue" };
  return { __typename: "IssuesClaimed", issues: row.issues, run: withoutLive(row.run) };
}
