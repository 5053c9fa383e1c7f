// forceReleaseIssue: the board takes an issue back from whatever holds it.
import { appendEvents, issueJson, raw, sql, stampEvent, statement } from "../../db/sql.js";
import { commitChange } from "../shared/commit.js";
import type { LockDeps } from "../shared/deps.js";
import { CLEAR_LOCKS, boardLockedIssueCte, reopenOrEscalate } from "../shared/fragments.js";
import { MAX_REASON_LENGTH } from "../release/releaseIssues.js";
import type { ForceReleaseResult } from "../shared/types.js";
import type { Issue, LockEvent } from "../../domain/types.js";
import { InvalidInputError } from "../../domain/errors.js";
import { issueNotFound } from "../shared/types.js";
import { validateText } from "../../domain/validate.js";

/**
 * Invariant: both locks clear together with the
 * status; an issue that holds no lock is left as it is (no event). The event
 * names the run and agent whose hold was ended.
 */
function forceReleaseStatement(companyId: string, issueId: string, reason: string) {
  return statement(
    "FORCE_RELEASE_ANY_HOLDER",
    sql`
    WITH ${boardLockedIssueCte(companyId, issueId)},
    changed AS (
      UPDATE issues i
         SET status = ${raw(reopenOrEscalate("i"))}, ${raw(CLEAR_LOCKS)}, ${raw(stampEvent("i"))}, updated_at = now()
        FROM cur LEFT JOIN heartbeat_runs h ON h.id = cur.checkout_run_id
       WHERE i.id = cur.id AND cur.checkout_run_id IS NOT NULL
      RETURNING i.*, 'FORCE_RELEASED' AS ev_kind, cur.checkout_run_id AS ev_run_id,
                h.agent_id AS ev_agent_id, ${reason}::text AS ev_reason
    ),
    ${appendEvents("changed")}
    SELECT (SELECT ${issueJson("c")} FROM cur c) AS current,
           (SELECT ${issueJson("c")} FROM changed c) AS issue,
           (SELECT list FROM events) AS events`,
  );
}

export async function forceReleaseIssue(deps: LockDeps, companyId: string, input: { issueId: string; reason: string }): Promise<ForceReleaseResult> {
  const reason = input.reason.trim();
  if (!reason) throw new InvalidInputError("reason must not be empty");
  validateText("reason", reason, MAX_REASON_LENGTH);
  const row = await commitChange<{ current: Issue | null; issue: Issue | null; events: LockEvent[] }>(
    deps,
    forceReleaseStatement(companyId, input.issueId, reason),
  );
  if (!row.current) return issueNotFound(input.issueId);
  return { __typename: "IssueReleased", issue: row.issue ?? row.current };
}
