// Reading the ledger in pages both ways (the board's event tail reads newest
// first and pages back with beforeSeq), filtered by agent; and the admin
// token's list of companies (the board's company picker).
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

let h: Harness;
let co: Company;
/** Every seq of the company, ascending. */
let all: string[];

beforeAll(async () => {
  h = await startHarness();
  co = await createCompany(h, 2);
  // Each agent claims, starts and finishes issues of its own: events by two agents, interleaved.
  for (const agent of co.agents) {
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
    for (let i = 0; i < 4; i++) {
      const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: `t${i}`, assigneeAgentId: agent.id } });
      const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id });
      expect(claimIssue.__typename).toBe("IssueClaimed");
      await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: createIssue.id });
      const { releaseIssue } = await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: createIssue.id, outcome: "DONE" });
      expect(releaseIssue.__typename).toBe("IssueReleased");
    }
  }
  await h.settled(co.id);
  all = (await co.board.ok(Ops.LedgerPageDocument, { companyId: co.id, first: 1000 })).lockEvents.map((e) => e.seq);
  expect(all).toHaveLength(24);
});
afterAll(() => h?.close());

it("reads newest first, and pages back with beforeSeq: every event once, none skipped", async () => {
  const seen: string[] = [];
  let beforeSeq: string | null = null;
  for (;;) {
    const { lockEvents }: Ops.LedgerPageQuery = await co.board.ok(Ops.LedgerPageDocument, { companyId: co.id, newestFirst: true, beforeSeq, first: 5 });
    seen.push(...lockEvents.map((e) => e.seq));
    if (lockEvents.length < 5) break;
    beforeSeq = lockEvents.at(-1)!.seq;
  }
  expect(seen).toEqual([...all].reverse());
});

it("bounds a page on both sides, in either order", async () => {
  const window = (newestFirst: boolean) =>
    co.board
      .ok(Ops.LedgerPageDocument, { companyId: co.id, afterSeq: all[3], beforeSeq: all[8], newestFirst, first: 100 })
      .then((r) => r.lockEvents.map((e) => e.seq));
  expect(await window(false)).toEqual(all.slice(4, 8));
  expect(await window(true)).toEqual(all.slice(4, 8).reverse());
});

it("filters by agent", async () => {
  const agent = co.agents[1]!;
  const { lockEvents } = await co.board.ok(Ops.LedgerPageDocument, { companyId: co.id, agentId: agent.id, first: 100 });
  expect(lockEvents).toHaveLength(12);
  expect(new Set(lockEvents.map((e) => e.agentId))).toEqual(new Set([agent.id]));
});

it("refuses a beforeSeq that is not a seq, and changes nothing", async () => {
  const before = await h.snapshot();
  expect(await co.board.errorCode(Ops.LedgerPageDocument, { companyId: co.id, beforeSeq: "-1" })).toBe("BAD_USER_INPUT");
  expect(await co.board.errorCode(Ops.LedgerPageDocument, { companyId: co.id, beforeSeq: "99999999999999999999" })).toBe("BAD_USER_INPUT");
  expect(await h.snapshot()).toEqual(before);
});

it("lists every company by name for the admin token, and for no other key", async () => {
  const other = await h.admin.ok(Ops.CreateCompanyDocument, { name: "Aardvark Ltd" });
  const { companies } = await h.admin.ok(Ops.CompaniesDocument, { first: 10 });
  expect(companies.map((c) => c.name)).toEqual(["Aardvark Ltd", "Acme"]);
  expect(companies.map((c) => c.id)).toEqual([other.createCompany.company.id, co.id]);
  expect((await h.admin.ok(Ops.CompaniesDocument, { first: 1 })).companies).toHaveLength(1);
  expect(await h.admin.errorCode(Ops.CompaniesDocument, { first: 501 })).toBe("BAD_USER_INPUT");
  expect(await co.board.errorCode(Ops.CompaniesDocument, {})).toBe("FORBIDDEN");
  expect(await co.agents[0]!.client.errorCode(Ops.CompaniesDocument, {})).toBe("FORBIDDEN");
});
