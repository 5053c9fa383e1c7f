import { builder } from "../builder.js";
import { ISSUE_PRIORITIES, ISSUE_STATUSES, LOCK_EVENT_KINDS, RELEASE_OUTCOMES, RUN_STATUSES } from "../../domain/types.js";

export const RoleEnum = builder.enumType("Role", { values: ["ADMIN", "BOARD", "AGENT"] as const });
export const IssueStatusEnum = builder.enumType("IssueStatus", { values: ISSUE_STATUSES });
export const IssuePriorityEnum = builder.enumType("IssuePriority", {
  description: "Claim order: CRITICAL first.",
  values: ISSUE_PRIORITIES,
});
export const RunStatusEnum = builder.enumType("RunStatus", { values: RUN_STATUSES });
export const ReleaseOutcomeEnum = builder.enumType("ReleaseOutcome", { values: RELEASE_OUTCOMES });
export const LockEventKindEnum = builder.enumType("LockEventKind", { values: LOCK_EVENT_KINDS });
