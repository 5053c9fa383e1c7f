// The read queries (src/reads/lists.ts): issues paged by a stable cursor and
// filtered, and me, company, agents and runs.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

it("pages through issues with a stable cursor and filters by status and assignee", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: Array.from({ length: 7 }, (_, i) => ({
      title: `t${i}`,
      assigneeAgentId: i % 2 ? agent.id : null,
      status: (i === 6 ? "BACKLOG" : "OPEN") as Ops.IssueStatus,
    })),
  });
  const seen: string[] = [];
  let after: string | null = null;
  for (;;) {
    const { issues }: Ops.IssuesQuery = await co.board.ok(Ops.IssuesDocument, { companyId: co.id, first: 3, after });
    seen.push(...issues.edges.map((e) => e.node.id));
    if (!issues.pageInfo.hasNextPage) break;
    after = issues.pageInfo.endCursor!;
  }
  expect(seen).toEqual(createIssues.map((i) => i.id));
  const backlog = await co.board.ok(Ops.IssuesDocument, { companyId: co.id, status: ["BACKLOG"] });
  expect(backlog.issues.edges.map((e) => e.node.title)).toEqual(["t6"]);
  const assigned = await co.board.ok(Ops.IssuesDocument, { companyId: co.id, assigneeAgentId: agent.id });
  expect(assigned.issues.edges.map((e) => e.node.title)).toEqual(["t1", "t3", "t5"]);
});

it("answers me, company, agents and runs", async () => {
  const co = await createCompany(h, 2);
  expect((await co.board.ok(Ops.MeDocument)).me).toEqual({ role: "BOARD", companyId: co.id, agentId: null });
  expect((await co.agents[0]!.client.ok(Ops.MeDocument)).me).toEqual({ role: "AGENT", companyId: co.id, agentId: co.agents[0]!.id });
  expect((await h.admin.ok(Ops.MeDocument)).me).toEqual({ role: "ADMIN", companyId: null, agentId: null });
  expect((await co.board.ok(Ops.CompanyDocument, { id: co.id })).company?.name).toBe("Acme");
  expect((await co.board.ok(Ops.AgentsDocument, { companyId: co.id })).agents.map((a) => a.nameKey)).toEqual(["agent-1", "agent-2"]);
  const r1 = (await co.agents[0]!.client.ok(Ops.StartRunDocument)).startRun;
  const r2 = (await co.agents[1]!.client.ok(Ops.StartRunDocument)).startRun;
  await co.agents[1]!.client.ok(Ops.FinishRunDocument, { runId: r2.id, status: "SUCCEEDED" });
  const { runs } = await co.board.ok(Ops.RunsDocument, { companyId: co.id });
  expect(runs.map((r) => r.id)).toEqual([r2.id, r1.id]);
  const running = await co.board.ok(Ops.RunsDocument, { companyId: co.id, status: ["RUNNING"] });
  expect(running.runs.map((r) => r.id)).toEqual([r1.id]);
});
