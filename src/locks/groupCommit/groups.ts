// The API's group commits: one per single-issue agent statement. Claims of a
// company may share a statement freely (CLAIM_NEXT_FOR_EACH hands each row
// out once); acquisitions and releases of the same issue never share one.
import { acquireForEach } from "../execution/acquireExecution.js";
import { claimNextForEach } from "../claim/claimNextForEach.js";
import type { LockGroups, StatementDeps } from "../shared/deps.js";
import { GroupCommit } from "./groupCommit.js";
import { releaseForEach } from "../release/releaseIssues.js";

export function createLockGroups(deps: StatementDeps): LockGroups {
  return {
    claim: new GroupCommit((companyId, group) => claimNextForEach(deps, companyId, group)),
    acquire: new GroupCommit(
      (companyId, group) => acquireForEach(deps, companyId, group),
      (request) => request.issueId.toLowerCase(),
    ),
    release: new GroupCommit(
      (companyId, group) => releaseForEach(deps, companyId, group),
      (request) => request.issueId.toLowerCase(),
    ),
  };
}
