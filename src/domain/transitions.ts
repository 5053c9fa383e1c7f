// The board's status moves (updateIssue), shared by the statement that keeps
// them (src/locks/operator/updateIssue.ts, UPDATE_IF_TRANSITION_ALLOWED) and
// the board page that offers them (src/board/store.ts). Everything else
// (claim, execution, release) belongs to the lock mutations; DONE and
// CANCELLED are terminal. Staying in the same status is always allowed and
// changes nothing. The executable model keeps its own twin (src/model/board.ts).
import type { IssueStatus } from "./types.js";

export const BOARD_TRANSITIONS: Readonly<Record<IssueStatus, readonly IssueStatus[]>> = {
  BACKLOG: ["OPEN", "CANCELLED"],
  OPEN: ["CANCELLED"],
  CLAIMED: ["CANCELLED"],
  IN_PROGRESS: ["CANCELLED"],
  BLOCKED: ["OPEN", "CANCELLED"],
  ESCALATED: ["OPEN", "CANCELLED"],
  DONE: [],
  CANCELLED: [],
};
