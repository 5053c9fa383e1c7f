// The history checker (support/history.ts) must be able to fail: each
// broken history below, written by hand, is one it has to catch.
import { expect, it } from "vitest";
import { judge } from "../../support/history.js";

const ISSUE = "00000000-0000-0000-0000-00000000000a";
const [R1, R2] = ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"];
let seq = 0;
const ev = (kind: string, status: string, run: string | null, checkout: string | null, execution: string | null = null) => ({
  seq: String(++seq),
  issue_id: ISSUE,
  kind,
  status,
  run_id: run,
  checkout_run_id: checkout,
  execution_run_id: execution,
  reason: null,
});
const row = (status: string, lock_epoch: number, attempt_count: number, checkout: string | null = null, execution: string | null = null) => [
  { id: ISSUE, status, lock_epoch, attempt_count, checkout_run_id: checkout, execution_run_id: execution },
];
const history = (...events: ReturnType<typeof ev>[]) => {
  seq = 0;
  return events.map((e, i) => ({ ...e, seq: String(i + 1) }));
};

it("accepts a clean life: claim, acquire, fail, adopt after a death, acquire, done", () => {
  const events = history(
    ev("CLAIMED", "CLAIMED", R1, R1),
    ev("EXECUTION_ACQUIRED", "IN_PROGRESS", R1, R1, R1),
    ev("RELEASED", "OPEN", R1, null),
    ev("CLAIMED", "CLAIMED", R1, R1),
    ev("ADOPTED", "CLAIMED", R2, R2),
    ev("EXECUTION_ACQUIRED", "IN_PROGRESS", R2, R2, R2),
    ev("RELEASED", "DONE", R2, null),
  );
  expect(
    judge(events, row("DONE", 3, 3), [
      { kind: "claimed", runId: R2, issueId: ISSUE, lockEpoch: 3 },
      { kind: "released", runId: R2, issueId: ISSUE },
    ]),
  ).toEqual([]);
});

it("catches a claim of an issue another run holds", () => {
  const events = history(ev("CLAIMED", "CLAIMED", R1, R1), ev("CLAIMED", "CLAIMED", R2, R2));
  expect(judge(events, row("CLAIMED", 2, 0, R2), [])).toEqual([expect.stringContaining(`claimed by run ${R2} while run ${R1} held it`)]);
});

it("catches a release by a run that does not hold the issue, and execution by a non-holder", () => {
  const events = history(ev("CLAIMED", "CLAIMED", R1, R1), ev("EXECUTION_ACQUIRED", "IN_PROGRESS", R2, R1, R2), ev("RELEASED", "OPEN", R2, null));
  const found = judge(events, row("OPEN", 1, 1), []);
  expect(found.some((v) => v.includes("does not hold the checkout"))).toBe(true);
  expect(found.some((v) => v.includes(`names run ${R2}, but run ${R1} held it`))).toBe(true);
});

// docs/invariants.md #13: lockEpoch goes up by one per change of hands and never goes down
it("catches an epoch or an attempt count that the ledger does not account for, and a seq that goes back", () => {
  const events = history(ev("CLAIMED", "CLAIMED", R1, R1), ev("EXECUTION_ACQUIRED", "IN_PROGRESS", R1, R1, R1));
  expect(judge(events, row("IN_PROGRESS", 2, 1, R1, R1), [])).toEqual([expect.stringContaining("lockEpoch is 2")]);
  expect(judge(events, row("IN_PROGRESS", 1, 2, R1, R1), [])).toEqual([expect.stringContaining("2 attempts used, but the ledger accounts for 1")]);
  const gap = [events[0]!, { ...events[1]!, seq: "3" }];
  expect(judge(gap, row("IN_PROGRESS", 1, 1, R1, R1), [])).toEqual([]); // seqs may have gaps
  const back = [
    { ...events[0]!, seq: "5" },
    { ...events[1]!, seq: "5" },
  ];
  expect(judge(back, row("IN_PROGRESS", 1, 1, R1, R1), [])).toEqual([expect.stringContaining("repeats or goes back")]);
});

it("catches an answer the ledger does not bear out", () => {
  const events = history(ev("CLAIMED", "CLAIMED", R1, R1));
  expect(judge(events, row("CLAIMED", 1, 0, R1), [{ kind: "claimed", runId: R2, issueId: ISSUE, lockEpoch: 1 }])).toEqual([
    expect.stringContaining(`run ${R2} was told it claimed`),
  ]);
  expect(judge(events, row("CLAIMED", 1, 0, R1), [{ kind: "released", runId: R1, issueId: ISSUE }])).toEqual([expect.stringContaining("no such release")]);
});

it("catches a status that disagrees with the locks", () => {
  const events = history(ev("CLAIMED", "OPEN", R1, R1));
  expect(judge(events, row("OPEN", 1, 0, R1), [])).toEqual([expect.stringContaining("status OPEN with checkout")]);
});
