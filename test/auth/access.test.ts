// The auth matrix (docs/access.md), through real GraphQL over
// HTTP: missing and unknown tokens, the admin token, board keys and agent
// keys, each inside and outside its scope. Every refusal is checked to have
// changed nothing, by a fingerprint of every table.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Client, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, GraphQLResponse, Harness } from "../helpers/harness.js";

let h: Harness;
/** Two agents; the scene of the agent and board checks. */
let acme: Company;
/** Another company: one agent, an issue claimed by a live run of that agent. */
let globex: Company;
let globexIssue: Ops.IssueFieldsFragment;
let globexRun: Ops.RunFieldsFragment;

const snapshot = () => h.snapshot();

/** Asserts that `res` failed with `code`, and that it leaks no stack trace. */
function expectCode(res: GraphQLResponse<unknown>, code: string) {
  expect(res.errors ?? [], JSON.stringify(res)).not.toHaveLength(0);
  expect(res.errors![0]!.extensions?.code, JSON.stringify(res.errors)).toBe(code);
  expect(JSON.stringify(res)).not.toMatch(/ {4}at |stack/i);
}

/** Nothing came back: no data at all, or only nulls for the fields asked for. */
function expectNoData(res: GraphQLResponse<unknown>, label: string) {
  const data = (res.data ?? null) as Record<string, unknown> | null;
  expect(data === null || Object.values(data).every((v) => v === null), `${label}: ${JSON.stringify(data)}`).toBe(true);
}

beforeAll(async () => {
  h = await startHarness();
  acme = await createCompany(h, 2);
  globex = await createCompany(h, 1);
  const { createIssue } = await globex.board.ok(Ops.CreateIssueDocument, { input: { title: "Globex secret", assigneeAgentId: globex.agents[0]!.id } });
  globexIssue = createIssue;
  const { startRun } = await globex.agents[0]!.client.ok(Ops.StartRunDocument);
  globexRun = startRun;
  const claim = await globex.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: globexRun.id, issueId: globexIssue.id });
  expect(claim.claimIssue.__typename).toBe("IssueClaimed");
});
afterAll(() => h?.close());

async function acmeIssue(extra: Partial<Ops.CreateIssueInput> = {}) {
  const { createIssue } = await acme.board.ok(Ops.CreateIssueDocument, { input: { title: "Acme work", ...extra } });
  return createIssue;
}

/** Every operation of the API, with arguments that would succeed for the right caller. */
function everyOperation(ids: { companyId: string; issueId: string; runId: string }) {
  const { companyId, issueId, runId } = ids;
  return [
    ["me", (c: Client) => c.request(Ops.MeDocument)],
    ["company", (c: Client) => c.request(Ops.CompanyDocument, { id: companyId })],
    ["agents", (c: Client) => c.request(Ops.AgentsDocument, { companyId })],
    ["issue", (c: Client) => c.request(Ops.IssueDocument, { id: issueId })],
    ["issues", (c: Client) => c.request(Ops.IssuesDocument, { companyId })],
    ["run", (c: Client) => c.request(Ops.RunDocument, { id: runId })],
    ["runs", (c: Client) => c.request(Ops.RunsDocument, { companyId })],
    ["lockEvents", (c: Client) => c.request(Ops.LockEventsDocument, { companyId })],
    ["lockAudit", (c: Client) => c.request(Ops.LockAuditDocument, { companyId })],
    ["createCompany", (c: Client) => c.request(Ops.CreateCompanyDocument, { name: "Intruder Inc" })],
    ["createAgent", (c: Client) => c.request(Ops.CreateAgentDocument, { name: "Intruder" })],
    ["createIssue", (c: Client) => c.request(Ops.CreateIssueDocument, { input: { title: "intruder" } })],
    ["createIssues", (c: Client) => c.request(Ops.CreateIssuesDocument, { inputs: [{ title: "intruder" }] })],
    ["updateIssue", (c: Client) => c.request(Ops.UpdateIssueDocument, { id: issueId, input: { title: "defaced" } })],
    ["forceReleaseIssue", (c: Client) => c.request(Ops.ForceReleaseDocument, { issueId, reason: "intruder" })],
    ["runHeartbeat", (c: Client) => c.request(Ops.RunHeartbeatDocument)],
    ["startRun", (c: Client) => c.request(Ops.StartRunDocument)],
    ["heartbeatRun", (c: Client) => c.request(Ops.HeartbeatRunDocument, { runId })],
    ["finishRun", (c: Client) => c.request(Ops.FinishRunDocument, { runId, status: "FAILED" })],
    ["claimIssue", (c: Client) => c.request(Ops.ClaimIssueDocument, { runId, issueId, expectedStatuses: ["OPEN", "CLAIMED", "IN_PROGRESS"] })],
    ["claimIssue (next)", (c: Client) => c.request(Ops.ClaimIssueDocument, { runId, includeUnassigned: true })],
    ["acquireExecution", (c: Client) => c.request(Ops.AcquireExecutionDocument, { runId, issueId })],
    ["releaseIssue", (c: Client) => c.request(Ops.ReleaseIssueDocument, { runId, issueId, outcome: "DONE" })],
  ] as const;
}

const BOARD_MUTATIONS = ["createAgent", "createIssue", "createIssues", "updateIssue", "forceReleaseIssue", "runHeartbeat"];
const AGENT_MUTATIONS = ["startRun", "heartbeatRun", "finishRun", "claimIssue", "claimIssue (next)", "acquireExecution", "releaseIssue"];

describe("missing or unknown token", () => {
  it("is UNAUTHENTICATED for every query and mutation, and changes nothing", async () => {
    const before = await snapshot();
    const callers = [
      ["no token", h.client(null)],
      ["unknown opaque token", h.client("not-a-real-token")],
      ["unknown key of the right shape", h.client(`baton_board_${"A".repeat(43)}`)],
      ["admin token with a suffix", h.client("test-admin-token-0123456789x")],
    ] as const;
    const ops = everyOperation({ companyId: globex.id, issueId: globexIssue.id, runId: globexRun.id });
    for (const [who, client] of callers) {
      for (const [name, op] of ops) {
        const res = await op(client);
        expectCode(res, "UNAUTHENTICATED");
        expectNoData(res, `${who}: ${name}`);
      }
    }
    // Not a bearer token at all.
    const basic = await h.client(null).raw(`{ me { role } }`, undefined, { authorization: "Basic YWRtaW46YWRtaW4=" });
    expectCode(basic, "UNAUTHENTICATED");
    const empty = await h.client(null).raw(`{ me { role } }`, undefined, { authorization: "Bearer " });
    expectCode(empty, "UNAUTHENTICATED");
    expect(await snapshot()).toEqual(before);
  });
});

describe("admin token", () => {
  it("creates companies whose board key works", async () => {
    const { createCompany } = await h.admin.ok(Ops.CreateCompanyDocument, { name: "Initech" });
    expect(createCompany.company.name).toBe("Initech");
    const me = await h.client(createCompany.boardKey).ok(Ops.MeDocument);
    expect(me.me).toEqual({ role: "BOARD", companyId: createCompany.company.id, agentId: null });
    expect((await h.admin.ok(Ops.MeDocument)).me).toEqual({ role: "ADMIN", companyId: null, agentId: null });
  });

  it("reads anything of any company", async () => {
    for (const company of [acme, globex]) {
      const { company: read } = await h.admin.ok(Ops.CompanyDocument, { id: company.id });
      expect(read?.id).toBe(company.id);
      const { agents } = await h.admin.ok(Ops.AgentsDocument, { companyId: company.id });
      expect(agents.map((a) => a.id).sort()).toEqual(company.agents.map((a) => a.id).sort());
    }
    const { issues } = await h.admin.ok(Ops.IssuesDocument, { companyId: globex.id });
    expect(issues.edges.map((e) => e.node.id)).toContain(globexIssue.id);
    expect((await h.admin.ok(Ops.IssueDocument, { id: globexIssue.id })).issue).toMatchObject({ id: globexIssue.id, status: "CLAIMED" });
    expect((await h.admin.ok(Ops.RunDocument, { id: globexRun.id })).run).toMatchObject({ id: globexRun.id, status: "RUNNING" });
    const { runs } = await h.admin.ok(Ops.RunsDocument, { companyId: globex.id });
    expect(runs.map((r) => r.id)).toContain(globexRun.id);
    await h.settled(globex.id);
    const { lockEvents } = await h.admin.ok(Ops.LockEventsDocument, { companyId: globex.id });
    expect(lockEvents.map((e) => [e.kind, e.issueId, e.issue.id])).toEqual([["CLAIMED", globexIssue.id, globexIssue.id]]);
    const { lockAudit } = await h.admin.ok(Ops.LockAuditDocument, { companyId: globex.id });
    expect(lockAudit.doubleClaims).toBe(0);
  });

  it("cannot run board or agent mutations (FORBIDDEN), and nothing changes", async () => {
    const before = await snapshot();
    const ops = everyOperation({ companyId: globex.id, issueId: globexIssue.id, runId: globexRun.id });
    for (const [name, op] of ops) {
      if (!BOARD_MUTATIONS.includes(name) && !AGENT_MUTATIONS.includes(name)) continue;
      const res = await op(h.admin);
      expectCode(res, "FORBIDDEN");
      expectNoData(res, name);
    }
    expect(await snapshot()).toEqual(before);
  });
});

describe("board key", () => {
  it("runs the board mutations inside its own company", async () => {
    const company = await createCompany(h, 0);
    const { createAgent } = await company.board.ok(Ops.CreateAgentDocument, { name: "Worker" });
    expect(createAgent.agent.companyId).toBe(company.id);
    const { createIssue } = await company.board.ok(Ops.CreateIssueDocument, { input: { title: "Routed", assigneeAgentId: createAgent.agent.id } });
    const { createIssues } = await company.board.ok(Ops.CreateIssuesDocument, { inputs: [{ title: "one" }, { title: "two" }] });
    expect(createIssues).toHaveLength(2);
    const updated = await company.board.ok(Ops.UpdateIssueDocument, { id: createIssue.id, input: { title: "Routed (edited)" } });
    expect(updated.updateIssue).toMatchObject({ __typename: "IssueUpdated", issue: { title: "Routed (edited)" } });
    const { runHeartbeat } = await company.board.ok(Ops.RunHeartbeatDocument);
    expect(runHeartbeat.claims.map((c) => [c.issue.id, c.issue.status, c.run.agentId])).toEqual([[createIssue.id, "CLAIMED", createAgent.agent.id]]);
    const released = await company.board.ok(Ops.ForceReleaseDocument, { issueId: createIssue.id, reason: "operator" });
    expect(released.forceReleaseIssue).toMatchObject({ __typename: "IssueReleased", issue: { status: "OPEN", checkoutRunId: null } });
    // …and reads all of it.
    expect((await company.board.ok(Ops.CompanyDocument, { id: company.id })).company?.id).toBe(company.id);
    expect((await company.board.ok(Ops.AgentsDocument, { companyId: company.id })).agents).toHaveLength(1);
    expect((await company.board.ok(Ops.IssuesDocument, { companyId: company.id })).issues.edges).toHaveLength(3);
    expect((await company.board.ok(Ops.RunsDocument, { companyId: company.id })).runs).toHaveLength(1);
    await h.settled(company.id);
    const { lockEvents } = await company.board.ok(Ops.LockEventsDocument, { companyId: company.id });
    expect(lockEvents.map((e) => e.kind)).toEqual(["CLAIMED", "FORCE_RELEASED"]);
    expect((await company.board.ok(Ops.LockAuditDocument, { companyId: company.id })).lockAudit.doubleClaims).toBe(0);
  });

  it("cannot create a company or run agent mutations (FORBIDDEN), and nothing changes", async () => {
    const issue = await acmeIssue({ assigneeAgentId: acme.agents[0]!.id });
    const { startRun: run } = await acme.agents[0]!.client.ok(Ops.StartRunDocument);
    const before = await snapshot();
    for (const [name, op] of everyOperation({ companyId: acme.id, issueId: issue.id, runId: run.id })) {
      if (name !== "createCompany" && !AGENT_MUTATIONS.includes(name)) continue;
      const res = await op(acme.board);
      expectCode(res, "FORBIDDEN");
      expectNoData(res, name);
    }
    expect(await snapshot()).toEqual(before);
    expect((await acme.board.ok(Ops.IssueDocument, { id: issue.id })).issue).toMatchObject({ status: "OPEN", checkoutRunId: null });
    expect((await acme.board.ok(Ops.RunDocument, { id: run.id })).run).toMatchObject({ status: "RUNNING", leaseExpiresAt: run.leaseExpiresAt });
  });

  it("cannot list another company's agents, issues, runs, events or audit (FORBIDDEN)", async () => {
    const lists = [
      () => acme.board.request(Ops.AgentsDocument, { companyId: globex.id }),
      () => acme.board.request(Ops.IssuesDocument, { companyId: globex.id }),
      () => acme.board.request(Ops.RunsDocument, { companyId: globex.id }),
      () => acme.board.request(Ops.LockEventsDocument, { companyId: globex.id }),
      () => acme.board.request(Ops.LockAuditDocument, { companyId: globex.id }),
    ];
    for (const list of lists) {
      const res = await list();
      expectCode(res, "FORBIDDEN");
      expectNoData(res, "list");
    }
  });

  it("reads another company's company, issue and run ids as not found (null)", async () => {
    const company = await acme.board.request(Ops.CompanyDocument, { id: globex.id });
    expect(company).toEqual({ data: { company: null } });
    const issue = await acme.board.request(Ops.IssueDocument, { id: globexIssue.id });
    expect(issue).toEqual({ data: { issue: null } });
    const run = await acme.board.request(Ops.RunDocument, { id: globexRun.id });
    expect(run).toEqual({ data: { run: null } });
    // Filters of its own lists do not reach into the other company either.
    await h.settled(acme.id);
    const { lockEvents } = await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, issueId: globexIssue.id });
    expect(lockEvents).toEqual([]);
    const { issues } = await acme.board.ok(Ops.IssuesDocument, { companyId: acme.id, assigneeAgentId: globex.agents[0]!.id });
    expect(issues.edges).toEqual([]);
  });

  it("cannot change another company's issue: it reads as IssueNotFound, and nothing changes", async () => {
    const before = await snapshot();
    const updated = await acme.board.ok(Ops.UpdateIssueDocument, { id: globexIssue.id, input: { title: "defaced", status: "CANCELLED" } });
    expect(updated.updateIssue).toMatchObject({ __typename: "IssueNotFound", issueId: globexIssue.id });
    const released = await acme.board.ok(Ops.ForceReleaseDocument, { issueId: globexIssue.id, reason: "hostile takeover" });
    expect(released.forceReleaseIssue).toMatchObject({ __typename: "IssueNotFound", issueId: globexIssue.id });
    // Indistinguishable from an id that exists nowhere.
    const ghost = randomUUID();
    const missing = await acme.board.ok(Ops.ForceReleaseDocument, { issueId: ghost, reason: "hostile takeover" });
    expect(missing.forceReleaseIssue.__typename).toBe("IssueNotFound");
    if (missing.forceReleaseIssue.__typename === "IssueNotFound" && released.forceReleaseIssue.__typename === "IssueNotFound") {
      expect(released.forceReleaseIssue.message.replace(globexIssue.id, "ID")).toBe(missing.forceReleaseIssue.message.replace(ghost, "ID"));
    }
    expect(await snapshot()).toEqual(before);
    expect((await h.admin.ok(Ops.IssueDocument, { id: globexIssue.id })).issue).toMatchObject({
      title: "Globex secret",
      status: "CLAIMED",
      checkoutRunId: globexRun.id,
    });
  });
});

describe("names", () => {
  // docs/invariants.md #14: keys and names
  it("an agent's name is unique within its company once normalised, and names are 1–200 characters: BAD_USER_INPUT, nothing created", async () => {
    const company = await createCompany(h, 0);
    const other = await createCompany(h, 0);
    await company.board.ok(Ops.CreateAgentDocument, { name: "Ada Lovelace" });
    const before = await h.snapshot();
    for (const twin of ["ada lovelace", "  ADA   LOVELACE ", "Ada-Lovelace"]) {
      expect(await company.board.errorCode(Ops.CreateAgentDocument, { name: twin }), twin).toBe("BAD_USER_INPUT");
    }
    for (const name of ["", "   ", "x".repeat(201)]) {
      expect(await company.board.errorCode(Ops.CreateAgentDocument, { name }), `agent name of ${name.length}`).toBe("BAD_USER_INPUT");
      expect(await h.admin.errorCode(Ops.CreateCompanyDocument, { name }), `company name of ${name.length}`).toBe("BAD_USER_INPUT");
    }
    expect(await h.snapshot()).toEqual(before);
    // The same name in another company is another agent; 200 characters is fine.
    await other.board.ok(Ops.CreateAgentDocument, { name: "Ada Lovelace" });
    await company.board.ok(Ops.CreateAgentDocument, { name: "y".repeat(200) });
    await h.admin.ok(Ops.CreateCompanyDocument, { name: "z".repeat(200) });
  });
});

describe("agent key", () => {
  it("works the whole life cycle with its own runs", async () => {
    const agent = acme.agents[0]!;
    const issue = await acmeIssue({ assigneeAgentId: agent.id });
    const { startRun: run } = await agent.client.ok(Ops.StartRunDocument);
    expect(run).toMatchObject({ agentId: agent.id, companyId: acme.id, status: "RUNNING" });
    expect((await agent.client.ok(Ops.HeartbeatRunDocument, { runId: run.id })).heartbeatRun.__typename).toBe("RunUpdated");
    const claim = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    expect(claim.claimIssue).toMatchObject({ __typename: "IssueClaimed", issue: { status: "CLAIMED", checkoutRunId: run.id } });
    const acquired = await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: issue.id });
    expect(acquired.acquireExecution).toMatchObject({ __typename: "ExecutionAcquired", issue: { status: "IN_PROGRESS" } });
    const released = await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: issue.id, outcome: "DONE" });
    expect(released.releaseIssue).toMatchObject({ __typename: "IssueReleased", issue: { status: "DONE" } });
    const finished = await agent.client.ok(Ops.FinishRunDocument, { runId: run.id, status: "SUCCEEDED" });
    expect(finished.finishRun).toMatchObject({ __typename: "RunUpdated", run: { status: "SUCCEEDED" } });
  });

  it("reads its own company's issues, runs and events", async () => {
    const agent = acme.agents[1]!;
    const issue = await acmeIssue();
    const { startRun: run } = await agent.client.ok(Ops.StartRunDocument);
    const claim = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    expect(claim.claimIssue.__typename).toBe("IssueClaimed");
    expect((await agent.client.ok(Ops.IssueDocument, { id: issue.id })).issue).toMatchObject({ id: issue.id, status: "CLAIMED" });
    const { issues } = await agent.client.ok(Ops.IssuesDocument, { companyId: acme.id, first: 500 });
    expect(issues.edges.map((e) => e.node.id)).toContain(issue.id);
    expect((await agent.client.ok(Ops.RunDocument, { id: run.id })).run?.id).toBe(run.id);
    const { runs } = await agent.client.ok(Ops.RunsDocument, { companyId: acme.id });
    expect(runs.map((r) => r.id)).toContain(run.id);
    await h.settled(acme.id);
    const { lockEvents } = await agent.client.ok(Ops.LockEventsDocument, { companyId: acme.id, issueId: issue.id });
    expect(lockEvents.map((e) => [e.kind, e.runId, e.issue.id])).toEqual([["CLAIMED", run.id, issue.id]]);
    // The other agent's runs are the company's runs too.
    expect((await acme.agents[0]!.client.ok(Ops.RunDocument, { id: run.id })).run?.agentId).toBe(agent.id);
  });

  it("cannot list its company's agents or read its lock audit (FORBIDDEN): those are the board's", async () => {
    const agent = acme.agents[0]!.client;
    for (const read of [() => agent.request(Ops.AgentsDocument, { companyId: acme.id }), () => agent.request(Ops.LockAuditDocument, { companyId: acme.id })]) {
      const res = await read();
      expectCode(res, "FORBIDDEN");
      expectNoData(res, "read");
    }
  });

  it("cannot read another company (FORBIDDEN for lists, null for ids)", async () => {
    const agent = acme.agents[0]!.client;
    for (const list of [
      () => agent.request(Ops.IssuesDocument, { companyId: globex.id }),
      () => agent.request(Ops.RunsDocument, { companyId: globex.id }),
      () => agent.request(Ops.LockEventsDocument, { companyId: globex.id }),
      () => agent.request(Ops.AgentsDocument, { companyId: globex.id }),
      () => agent.request(Ops.LockAuditDocument, { companyId: globex.id }),
    ]) {
      const res = await list();
      expectCode(res, "FORBIDDEN");
      expectNoData(res, "list");
    }
    expect(await agent.request(Ops.IssueDocument, { id: globexIssue.id })).toEqual({ data: { issue: null } });
    expect(await agent.request(Ops.RunDocument, { id: globexRun.id })).toEqual({ data: { run: null } });
    expect(await agent.request(Ops.CompanyDocument, { id: globex.id })).toEqual({ data: { company: null } });
  });

  it("cannot use another agent's run (FORBIDDEN), and nothing changes", async () => {
    const [me, other] = acme.agents as [Company["agents"][0], Company["agents"][0]];
    const executing = await acmeIssue({ assigneeAgentId: other.id });
    const checkedOut = await acmeIssue({ assigneeAgentId: other.id });
    const pool = await acmeIssue();
    const mine = await acmeIssue({ assigneeAgentId: me.id, priority: "CRITICAL" });
    const { startRun: theirs } = await other.client.ok(Ops.StartRunDocument);
    expect((await other.client.ok(Ops.ClaimIssueDocument, { runId: theirs.id, issueId: executing.id })).claimIssue.__typename).toBe("IssueClaimed");
    expect((await other.client.ok(Ops.AcquireExecutionDocument, { runId: theirs.id, issueId: executing.id })).acquireExecution.__typename).toBe(
      "ExecutionAcquired",
    );
    expect((await other.client.ok(Ops.ClaimIssueDocument, { runId: theirs.id, issueId: checkedOut.id })).claimIssue.__typename).toBe("IssueClaimed");
    await h.settled(acme.id);
    const eventsBefore = (await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, first: 1000 })).lockEvents.length;
    const runBefore = (await acme.board.ok(Ops.RunDocument, { id: theirs.id })).run!;
    const before = await snapshot();

    const attempts = [
      ["claimIssue (named, pool)", () => me.client.request(Ops.ClaimIssueDocument, { runId: theirs.id, issueId: pool.id })],
      ["claimIssue (named, mine)", () => me.client.request(Ops.ClaimIssueDocument, { runId: theirs.id, issueId: mine.id })],
      ["claimIssue (next)", () => me.client.request(Ops.ClaimIssueDocument, { runId: theirs.id, includeUnassigned: true })],
      ["acquireExecution", () => me.client.request(Ops.AcquireExecutionDocument, { runId: theirs.id, issueId: checkedOut.id })],
      ["releaseIssue (executing)", () => me.client.request(Ops.ReleaseIssueDocument, { runId: theirs.id, issueId: executing.id, outcome: "DONE" })],
      ["releaseIssue (checked out)", () => me.client.request(Ops.ReleaseIssueDocument, { runId: theirs.id, issueId: checkedOut.id, outcome: "REQUEUE" })],
      ["heartbeatRun", () => me.client.request(Ops.HeartbeatRunDocument, { runId: theirs.id })],
      ["finishRun", () => me.client.request(Ops.FinishRunDocument, { runId: theirs.id, status: "CANCELLED" })],
    ] as const;
    for (const [name, attempt] of attempts) {
      const res = await attempt();
      expectCode(res, "FORBIDDEN");
      expectNoData(res, name);
    }

    expect(await snapshot()).toEqual(before);
    const status = async (id: string) => (await acme.board.ok(Ops.IssueDocument, { id })).issue;
    expect(await status(executing.id)).toMatchObject({ status: "IN_PROGRESS", checkoutRunId: theirs.id, executionRunId: theirs.id });
    expect(await status(checkedOut.id)).toMatchObject({ status: "CLAIMED", checkoutRunId: theirs.id, executionRunId: null });
    expect(await status(pool.id)).toMatchObject({ status: "OPEN", checkoutRunId: null });
    expect(await status(mine.id)).toMatchObject({ status: "OPEN", checkoutRunId: null });
    expect((await acme.board.ok(Ops.RunDocument, { id: theirs.id })).run).toEqual(runBefore);
    await h.settled(acme.id);
    expect((await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, first: 1000 })).lockEvents).toHaveLength(eventsBefore);

    // A finished run of another agent is still another agent's run.
    const { startRun: ended } = await other.client.ok(Ops.StartRunDocument);
    await other.client.ok(Ops.FinishRunDocument, { runId: ended.id, status: "SUCCEEDED" });
    const afterEnd = await snapshot();
    expectCode(await me.client.request(Ops.HeartbeatRunDocument, { runId: ended.id }), "FORBIDDEN");
    expectCode(await me.client.request(Ops.FinishRunDocument, { runId: ended.id, status: "FAILED" }), "FORBIDDEN");
    expect(await snapshot()).toEqual(afterEnd);
  });

  it("sees another company's run as a run that does not exist (RunNotActive, status null)", async () => {
    const agent = acme.agents[0]!.client;
    const { startRun: own } = await agent.ok(Ops.StartRunDocument);
    const ownIssue = await acmeIssue({ assigneeAgentId: acme.agents[0]!.id });
    const before = await snapshot();
    const withRun = (runId: string) =>
      [
        () => agent.ok(Ops.ClaimIssueDocument, { runId, includeUnassigned: true }).then((d) => d.claimIssue),
        () => agent.ok(Ops.ClaimIssueDocument, { runId, issueId: globexIssue.id, expectedStatuses: ["OPEN", "CLAIMED"] }).then((d) => d.claimIssue),
        () => agent.ok(Ops.ClaimIssueDocument, { runId, issueId: ownIssue.id }).then((d) => d.claimIssue),
        () => agent.ok(Ops.AcquireExecutionDocument, { runId, issueId: globexIssue.id }).then((d) => d.acquireExecution),
        () => agent.ok(Ops.ReleaseIssueDocument, { runId, issueId: globexIssue.id, outcome: "REQUEUE" }).then((d) => d.releaseIssue),
        () => agent.ok(Ops.HeartbeatRunDocument, { runId }).then((d) => d.heartbeatRun),
        () => agent.ok(Ops.FinishRunDocument, { runId, status: "FAILED" }).then((d) => d.finishRun),
      ] as const;
    const ghost = randomUUID();
    const foreign = withRun(globexRun.id);
    const missing = withRun(ghost);
    for (let i = 0; i < foreign.length; i++) {
      const got = await foreign[i]!();
      expect(got, `operation ${i}`).toMatchObject({ __typename: "RunNotActive", runId: globexRun.id, runStatus: null });
      const none = await missing[i]!();
      expect(none).toMatchObject({ __typename: "RunNotActive", runId: ghost, runStatus: null });
      // Nothing tells the two apart.
      if ("message" in got && "message" in none) expect(got.message.replace(globexRun.id, "ID")).toBe(none.message.replace(ghost, "ID"));
    }
    expect(await snapshot()).toEqual(before);
    expect((await h.admin.ok(Ops.RunDocument, { id: globexRun.id })).run).toMatchObject({ status: "RUNNING", leaseExpiresAt: globexRun.leaseExpiresAt });
    expect((await acme.board.ok(Ops.RunDocument, { id: own.id })).run?.status).toBe("RUNNING");
  });

  it("sees another company's issue as IssueNotFound, even with its own live run", async () => {
    const agent = acme.agents[0]!.client;
    const { startRun: own } = await agent.ok(Ops.StartRunDocument);
    const before = await snapshot();
    const claim = await agent.ok(Ops.ClaimIssueDocument, {
      runId: own.id,
      issueId: globexIssue.id,
      expectedStatuses: ["OPEN", "CLAIMED", "IN_PROGRESS"],
    });
    expect(claim.claimIssue).toMatchObject({ __typename: "IssueNotFound", issueId: globexIssue.id });
    const acquired = await agent.ok(Ops.AcquireExecutionDocument, { runId: own.id, issueId: globexIssue.id });
    expect(acquired.acquireExecution).toMatchObject({ __typename: "IssueNotFound", issueId: globexIssue.id });
    const released = await agent.ok(Ops.ReleaseIssueDocument, { runId: own.id, issueId: globexIssue.id, outcome: "FAILED" });
    expect(released.releaseIssue).toMatchObject({ __typename: "IssueNotFound", issueId: globexIssue.id });
    expect(await snapshot()).toEqual(before);
    expect((await h.admin.ok(Ops.IssueDocument, { id: globexIssue.id })).issue).toMatchObject({ status: "CLAIMED", checkoutRunId: globexRun.id });
    await h.settled(globex.id);
    const { lockEvents } = await h.admin.ok(Ops.LockEventsDocument, { companyId: globex.id });
    expect(lockEvents).toHaveLength(1);
  });

  it("cannot run board or admin mutations (FORBIDDEN), and nothing changes", async () => {
    const issue = await acmeIssue();
    const { startRun: run } = await acme.agents[0]!.client.ok(Ops.StartRunDocument);
    await acme.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: issue.id });
    const before = await snapshot();
    for (const [name, op] of everyOperation({ companyId: acme.id, issueId: issue.id, runId: run.id })) {
      if (name !== "createCompany" && !BOARD_MUTATIONS.includes(name)) continue;
      const res = await op(acme.agents[0]!.client);
      expectCode(res, "FORBIDDEN");
      expectNoData(res, name);
    }
    // updateIssue with a status change too: an agent cannot cancel or reopen.
    expectCode(await acme.agents[0]!.client.request(Ops.UpdateIssueDocument, { id: issue.id, input: { status: "CANCELLED" } }), "FORBIDDEN");
    expect(await snapshot()).toEqual(before);
    expect((await acme.board.ok(Ops.IssueDocument, { id: issue.id })).issue).toMatchObject({ title: "Acme work", status: "CLAIMED", checkoutRunId: run.id });
  });
});

describe("keys", () => {
  // docs/invariants.md #14: keys and names
  it("are long, random, distinct, and stored only as a hash", async () => {
    const boardKeys = [acme.board.token!, globex.board.token!];
    for (let i = 0; i < 3; i++) boardKeys.push((await h.admin.ok(Ops.CreateCompanyDocument, { name: `Keyco ${i}` })).createCompany.boardKey);
    const agentKeys = [...acme.agents, ...globex.agents].map((a) => a.client.token!);
    for (let i = 0; i < 3; i++) agentKeys.push((await acme.board.ok(Ops.CreateAgentDocument, { name: `Key agent ${i}` })).createAgent.apiKey);

    for (const keys of [boardKeys, agentKeys]) {
      expect(new Set(keys).size).toBe(keys.length);
      // What differs between keys is the random part; it must carry >= 128 bits.
      let prefix = keys[0]!;
      for (const key of keys) while (!key.startsWith(prefix)) prefix = prefix.slice(0, -1);
      for (const key of keys) {
        const random = key.slice(prefix.length);
        const bitsPerChar = /^[0-9a-f]+$/i.test(random) ? 4 : /^[A-Za-z0-9_\-+/=]+$/.test(random) ? 6 : 0;
        expect(random.length * bitsPerChar, key).toBeGreaterThanOrEqual(128);
        // Not a counter or a timestamp: many distinct characters.
        expect(new Set(random).size, key).toBeGreaterThanOrEqual(16);
      }
    }

    const all = [...boardKeys, ...agentKeys];
    const rows = await h.sql<{ key_hash: string }>(`SELECT * FROM api_keys`);
    expect(rows.length).toBeGreaterThanOrEqual(all.length);
    for (const row of rows) for (const key of all) expect(row.key_hash).not.toBe(key);
    // No column of any table holds a key, or its random tail.
    for (const table of ["companies", "agents", "api_keys", "issues", "heartbeat_runs", "lock_events"]) {
      const [dump] = await h.sql<{ text: string }>(`SELECT coalesce(string_agg(x::text, '|'), '') AS text FROM ${table} x`);
      for (const key of all) {
        expect(dump!.text.includes(key), `${table} holds a key`).toBe(false);
        expect(dump!.text.includes(key.slice(-24)), `${table} holds part of a key`).toBe(false);
      }
    }
    // Each key resolves to exactly its principal.
    const me = await h.client(agentKeys.at(-1)!).ok(Ops.MeDocument);
    expect(me.me).toMatchObject({ role: "AGENT", companyId: acme.id });
    expect((await h.client(boardKeys[1]!).ok(Ops.MeDocument)).me).toEqual({ role: "BOARD", companyId: globex.id, agentId: null });
  });

  it("are not accepted in a mangled form", async () => {
    const key = acme.board.token!;
    for (const bad of [key.slice(0, -1), `${key}x`, key.toUpperCase(), key.slice(0, -1) + (key.endsWith("A") ? "B" : "A")]) {
      expectCode(await h.client(bad).request(Ops.MeDocument), "UNAUTHENTICATED");
    }
  });
});
