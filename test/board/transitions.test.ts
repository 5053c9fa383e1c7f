// The board offers requeue and cancel from the same status moves the server
// keeps (src/domain/transitions.ts); the executable model's twin must agree.
import { expect, it } from "vitest";
import { actionsFor } from "../../src/board/store.js";
import { BOARD_TRANSITIONS } from "../../src/domain/transitions.js";
import { BOARD_TRANSITIONS as MODEL_TRANSITIONS } from "../../src/model/board.js";

it("the board's and the server's status moves are the model's BOARD_TRANSITIONS", () => {
  expect(BOARD_TRANSITIONS).toEqual(MODEL_TRANSITIONS);
});

it("offers force release only while held, requeue only where a move to OPEN is allowed, cancel only before a terminal status", () => {
  const offered = (status: keyof typeof BOARD_TRANSITIONS, attemptCount = 0) =>
    Object.entries(actionsFor({ status, attemptCount, maxAttempts: 3 }))
      .filter(([, on]) => on)
      .map(([name]) => name);
  expect(offered("BACKLOG")).toEqual(["requeue", "cancel", "edit"]);
  expect(offered("OPEN")).toEqual(["cancel", "edit"]);
  expect(offered("CLAIMED")).toEqual(["forceRelease", "cancel", "edit"]);
  expect(offered("IN_PROGRESS")).toEqual(["forceRelease", "cancel", "edit"]);
  expect(offered("BLOCKED", 3)).toEqual(["requeue", "cancel", "edit"]);
  expect(offered("ESCALATED", 2)).toEqual(["requeue", "cancel", "edit"]);
  expect(offered("ESCALATED", 3)).toEqual(["cancel", "edit"]);
  expect(offered("DONE")).toEqual([]);
  expect(offered("CANCELLED")).toEqual([]);
});
