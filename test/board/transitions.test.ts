// The board offers requeue and cancel from its own copy of the board's status
// moves (it is bundled for the browser apart from the server): the copy must
// be the model's BOARD_TRANSITIONS, status for status.
import { expect, it } from "vitest";
import { actionsFor, BOARD_MOVES } from "../../src/board/store.js";
import { BOARD_TRANSITIONS } from "../../src/model/board.js";

it("the board's status moves are the model's BOARD_TRANSITIONS", () => {
  expect(BOARD_MOVES).toEqual(BOARD_TRANSITIONS);
});

it("offers force release only while held, requeue only where a move to OPEN is allowed, cancel only before a terminal status", () => {
  const offered = (status: keyof typeof BOARD_MOVES, attemptCount = 0) =>
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
