// Malformed input (docs/access.md, Errors): every case is a GraphQL error
// with extensions.code BAD_USER_INPUT (or the server's validation error for
// wrong types and query shape), and changes nothing — checked by a
// fingerprint of every table. No response ever carries a stack trace, and an
// unexpected failure inside the server is masked.
import { randomUUID } from "node:crypto";
import { getIntrospectionQuery, print } from "graphql";
import type { DocumentNode } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Client, Company, GraphQLResponse, Harness } from "../helpers/harness.js";

let h: Harness;
let acme: Company;
let globex: Company;
/** acme: an OPEN issue assigned to agent 0, and one CLAIMED by agent 0's live run. */
let openIssue: Ops.IssueFieldsFragment;
let claimedIssue: Ops.IssueFieldsFragment;
let run: Ops.RunFieldsFragment;

/** Sends a document; every answer is checked for a stack trace as it arrives, whatever the test goes on to check. */
async function send<T = Record<string, unknown>>(client: Client, query: string | DocumentNode, variables?: object) {
  const text = typeof query === "string" ? query : print(query);
  const res = await client.raw<T>(text, variables as Record<string, unknown> | undefined);
  expectNoStack(res);
  return res;
}

const snapshot = () => h.snapshot();

async function unchanged(fn: () => Promise<void>) {
  const before = await snapshot();
  await fn();
  expect(await snapshot()).toEqual(before);
}

const issueCount = async () => (await h.sql<{ n: number }>(`SELECT count(*)::int AS n FROM issues`))[0]!.n;

function expectNoStack(res: GraphQLResponse<unknown>) {
  const text = JSON.stringify(res);
  expect(text).not.toContain("    at ");
  expect(JSON.stringify(res.errors ?? [])).not.toMatch(/stack/i);
}

/** Refused as malformed input: BAD_USER_INPUT, and no data for the fields asked. */
function expectBadInput(res: GraphQLResponse<unknown>, label = "") {
  expect(res.errors ?? [], `${label} ${JSON.stringify(res)}`).not.toHaveLength(0);
  expect(res.errors![0]!.extensions?.code, `${label} ${JSON.stringify(res.errors)}`).toBe("BAD_USER_INPUT");
  const data = (res.data ?? null) as Record<string, unknown> | null;
  expect(data === null || Object.values(data).every((v) => v === null), `${label} ${JSON.stringify(data)}`).toBe(true);
  expectNoStack(res);
}

/** Refused before execution (parse or validation error): errors and no data. */
function expectRefused(res: GraphQLResponse<unknown>, label = "") {
  expect(res.errors ?? [], `${label} ${JSON.stringify(res)}`).not.toHaveLength(0);
  expect(res.data ?? null, label).toBeNull();
  expectNoStack(res);
}

beforeAll(async () => {
  h = await startHarness();
  acme = await createCompany(h, 2);
  globex = await createCompany(h, 1);
  const agent = acme.agents[0]!;
  openIssue = (await acme.board.ok(Ops.CreateIssueDocument, { input: { title: "Open one", assigneeAgentId: agent.id } })).createIssue;
  const held = (await acme.board.ok(Ops.CreateIssueDocument, { input: { title: "Held one", assigneeAgentId: agent.id } })).createIssue;
  run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const claim = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: held.id });
  if (claim.claimIssue.__typename !== "IssueClaimed") throw new Error(`setup: ${claim.claimIssue.__typename}`);
  claimedIssue = claim.claimIssue.issue;
});
afterAll(() => h?.close());

describe("non-UUID ids", () => {
  const BAD_IDS = [
    "not-a-uuid",
    "42",
    "' OR 1=1 --",
    "0000000-0000-0000-0000-000000000000",
    "g0000000-0000-0000-0000-000000000000",
    "00000000000000000000000000000000",
    `{${randomUUID()}}`,
    `${randomUUID()}x`,
    ` ${randomUUID()}`,
    "x".repeat(10_000),
  ];

  /** Every argument that takes an id, each with the bad id in that one slot. */
  function slots(bad: string) {
    const board = acme.board;
    const agent = acme.agents[0]!.client;
    return [
      ["issue(id)", board, Ops.IssueDocument, { id: bad }],
      ["run(id)", board, Ops.RunDocument, { id: bad }],
      ["company(id)", board, Ops.CompanyDocument, { id: bad }],
      ["agents(companyId)", board, Ops.AgentsDocument, { companyId: bad }],
      ["issues(companyId)", board, Ops.IssuesDocument, { companyId: bad }],
      ["issues(assigneeAgentId)", board, Ops.IssuesDocument, { companyId: acme.id, assigneeAgentId: bad }],
      ["runs(companyId)", board, Ops.RunsDocument, { companyId: bad }],
      ["lockEvents(companyId)", board, Ops.LockEventsDocument, { companyId: bad }],
      ["lockEvents(issueId)", board, Ops.LockEventsDocument, { companyId: acme.id, issueId: bad }],
      ["lockAudit(companyId)", board, Ops.LockAuditDocument, { companyId: bad }],
      ["issue(id) as admin", h.admin, Ops.IssueDocument, { id: bad }],
      ["lockEvents(companyId) as admin", h.admin, Ops.LockEventsDocument, { companyId: bad }],
      ["createIssue(assigneeAgentId)", board, Ops.CreateIssueDocument, { input: { title: "t", assigneeAgentId: bad } }],
      ["createIssues(assigneeAgentId)", board, Ops.CreateIssuesDocument, { inputs: [{ title: "fine" }, { title: "t", assigneeAgentId: bad }] }],
      ["updateIssue(id)", board, Ops.UpdateIssueDocument, { id: bad, input: { title: "t" } }],
      ["updateIssue(assigneeAgentId)", board, Ops.UpdateIssueDocument, { id: openIssue.id, input: { assigneeAgentId: bad } }],
      ["forceReleaseIssue(issueId)", board, Ops.ForceReleaseDocument, { issueId: bad, reason: "r" }],
      ["claimIssue(runId)", agent, Ops.ClaimIssueDocument, { runId: bad }],
      ["claimIssue(runId, issueId)", agent, Ops.ClaimIssueDocument, { runId: bad, issueId: openIssue.id }],
      ["claimIssue(issueId)", agent, Ops.ClaimIssueDocument, { runId: run.id, issueId: bad }],
      ["acquireExecution(runId)", agent, Ops.AcquireExecutionDocument, { runId: bad, issueId: claimedIssue.id }],
      ["acquireExecution(issueId)", agent, Ops.AcquireExecutionDocument, { runId: run.id, issueId: bad }],
      ["releaseIssue(runId)", agent, Ops.ReleaseIssueDocument, { runId: bad, issueId: claimedIssue.id, outcome: "REQUEUE" }],
      ["releaseIssue(issueId)", agent, Ops.ReleaseIssueDocument, { runId: run.id, issueId: bad, outcome: "REQUEUE" }],
      ["heartbeatRun(runId)", agent, Ops.HeartbeatRunDocument, { runId: bad }],
      ["finishRun(runId)", agent, Ops.FinishRunDocument, { runId: bad, status: "FAILED" }],
    ] as const;
  }

  it("are BAD_USER_INPUT in every id argument, and change nothing", async () => {
    // Collects every slot that misbehaves, so one run names them all.
    const wrong: string[] = [];
    await unchanged(async () => {
      for (const bad of BAD_IDS) {
        for (const [name, client, doc, variables] of slots(bad)) {
          const res = await send(client, doc, variables);
          const data = (res.data ?? null) as Record<string, unknown> | null;
          const refused = res.errors?.[0]?.extensions?.code === "BAD_USER_INPUT" && (data === null || Object.values(data).every((v) => v === null));
          if (!refused) wrong.push(`${name} = ${JSON.stringify(bad.slice(0, 40))}: ${JSON.stringify(res).slice(0, 200)}`);
          expectNoStack(res);
        }
      }
    });
    expect(wrong).toEqual([]);
    expect(await acme.board.ok(Ops.IssueDocument, { id: claimedIssue.id })).toEqual({ issue: claimedIssue });
  });

  it("an empty string is a malformed id too, not a missing one (no filter silently dropped)", async () => {
    const wrong: string[] = [];
    await unchanged(async () => {
      for (const [name, client, doc, variables] of slots("")) {
        const res = await send(client, doc, variables);
        if (res.errors?.[0]?.extensions?.code !== "BAD_USER_INPUT") wrong.push(`${name}: ${JSON.stringify(res).slice(0, 160)}`);
        expectNoStack(res);
      }
      const res = await send(acme.board, Ops.IssuesDocument, { companyId: acme.id, after: "" });
      if (res.errors?.[0]?.extensions?.code !== "BAD_USER_INPUT") wrong.push(`issues(after: ""): ${JSON.stringify(res).slice(0, 160)}`);
    });
    expect(wrong).toEqual([]);
  });

  it("are BAD_USER_INPUT when written inline as literals too (an Int literal is a valid ID, not a UUID)", async () => {
    expectBadInput(await send(acme.board, `{ issue(id: 42) { id } }`));
    expectBadInput(await send(acme.board, `{ issue(id: "nope") { id } }`));
    await unchanged(async () => {
      expectBadInput(await send(acme.board, `mutation { forceReleaseIssue(issueId: 7, reason: "r") { __typename } }`));
    });
  });

  it("a well-formed id in upper case is the same id", async () => {
    const { issue } = await acme.board.ok(Ops.IssueDocument, { id: openIssue.id.toUpperCase() });
    expect(issue?.id).toBe(openIssue.id);
  });
});

describe("issue titles", () => {
  // docs/invariants.md #14: keys and names
  it("empty, blank or over 500 characters is BAD_USER_INPUT, and nothing is created or edited", async () => {
    await unchanged(async () => {
      for (const title of ["", " ", "   \t\n  ", "x".repeat(501), "é".repeat(501), "🦀".repeat(501)]) {
        const label = `title of length ${title.length}`;
        expectBadInput(await send(acme.board, Ops.CreateIssueDocument, { input: { title } }), label);
        expectBadInput(await send(acme.board, Ops.CreateIssuesDocument, { inputs: [{ title: "fine" }, { title }] }), label);
        expectBadInput(await send(acme.board, Ops.UpdateIssueDocument, { id: openIssue.id, input: { title } }), label);
      }
    });
  });

  it.each([
    ["a NUL character (which PostgreSQL cannot store)", "nul\u0000byte"],
    ["half of a surrogate pair (which would be stored changed, as U+FFFD)", "half\ud800pair"],
  ])("text with %s is BAD_USER_INPUT, not a server error or a silent change", async (_what, nul) => {
    const agent = acme.agents[0]!.client;
    const cases = [
      ["createIssue title", acme.board, Ops.CreateIssueDocument, { input: { title: nul } }],
      ["createIssue description", acme.board, Ops.CreateIssueDocument, { input: { title: "t", description: nul } }],
      ["updateIssue title", acme.board, Ops.UpdateIssueDocument, { id: openIssue.id, input: { title: nul } }],
      ["createAgent name", acme.board, Ops.CreateAgentDocument, { name: nul }],
      ["createCompany name", h.admin, Ops.CreateCompanyDocument, { name: nul }],
      ["forceReleaseIssue reason", acme.board, Ops.ForceReleaseDocument, { issueId: claimedIssue.id, reason: nul }],
      ["releaseIssue reason", agent, Ops.ReleaseIssueDocument, { runId: run.id, issueId: claimedIssue.id, outcome: "REQUEUE", reason: nul }],
    ] as const;
    const wrong: string[] = [];
    await unchanged(async () => {
      for (const [name, client, doc, variables] of cases) {
        const res = await send(client, doc, variables);
        if (res.errors?.[0]?.extensions?.code !== "BAD_USER_INPUT") wrong.push(`${name}: ${JSON.stringify(res).slice(0, 200)}`);
        expectNoStack(res);
      }
    });
    expect(wrong).toEqual([]);
  });

  // docs/invariants.md #14: keys and names
  it("500 characters is fine, counted as PostgreSQL counts them (an emoji is one character, though two UTF-16 units)", async () => {
    for (const title of ["y".repeat(500), "🦀".repeat(500)]) {
      const before = await issueCount();
      const { createIssue } = await acme.board.ok(Ops.CreateIssueDocument, { input: { title } });
      expect(createIssue.title).toBe(title);
      const [row] = await h.sql<{ chars: number }>(`SELECT char_length(title) AS chars FROM issues WHERE id = $1`, [createIssue.id]);
      expect(row!.chars).toBe(500);
      expect(await issueCount()).toBe(before + 1);
    }
  });

  it("a title of the wrong type is a validation error, and nothing is created", async () => {
    await unchanged(async () => {
      expectRefused(await send(acme.board, Ops.CreateIssueDocument, { input: { title: 42 } }));
      expectRefused(await send(acme.board, Ops.CreateIssueDocument, { input: { title: null } }));
      expectRefused(await send(acme.board, Ops.CreateIssueDocument, { input: {} }));
      expectRefused(await send(acme.board, Ops.CreateIssueDocument, { input: { title: "t", bogus: 1 } }));
    });
  });
});

describe("maxAttempts", () => {
  it("outside 1..100 is BAD_USER_INPUT, and nothing changes", async () => {
    await unchanged(async () => {
      for (const maxAttempts of [0, 101, -1, 1000]) {
        expectBadInput(await send(acme.board, Ops.CreateIssueDocument, { input: { title: "t", maxAttempts } }), `maxAttempts ${maxAttempts}`);
        expectBadInput(
          await send(acme.board, Ops.CreateIssuesDocument, { inputs: [{ title: "ok" }, { title: "t", maxAttempts }] }),
          `maxAttempts ${maxAttempts}`,
        );
        expectBadInput(await send(acme.board, Ops.UpdateIssueDocument, { id: openIssue.id, input: { maxAttempts } }), `maxAttempts ${maxAttempts}`);
      }
    });
  });

  it("that is not an Int at all is a validation error, and nothing changes", async () => {
    await unchanged(async () => {
      for (const maxAttempts of [1.5, 2 ** 31, "3"]) {
        expectRefused(await send(acme.board, Ops.CreateIssueDocument, { input: { title: "t", maxAttempts } }), `maxAttempts ${maxAttempts}`);
      }
    });
  });

  it("1 and 100 are fine", async () => {
    for (const maxAttempts of [1, 100]) {
      const { createIssue } = await acme.board.ok(Ops.CreateIssueDocument, { input: { title: "bounds", maxAttempts } });
      expect(createIssue.maxAttempts).toBe(maxAttempts);
    }
  });
});

describe("createIssues batch size", () => {
  it("1001 inputs is BAD_USER_INPUT and creates none of them", async () => {
    const inputs = Array.from({ length: 1001 }, (_, n) => ({ title: `bulk ${n}` }));
    await unchanged(async () => {
      expectBadInput(await send(acme.board, Ops.CreateIssuesDocument, { inputs }));
    });
  });

  it("1000 inputs creates all 1000, in one go", async () => {
    const before = await issueCount();
    const inputs = Array.from({ length: 1000 }, (_, n) => ({ title: `bulk ${n}`, priority: "LOW" as const }));
    const { createIssues } = await acme.board.ok(Ops.CreateIssuesDocument, { inputs });
    expect(createIssues).toHaveLength(1000);
    const ids = createIssues.map((i) => i.id);
    expect(new Set(ids).size).toBe(1000);
    const [row] = await h.sql<{ n: number; titles: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT title)::int AS titles FROM issues WHERE id = ANY($1::uuid[]) AND company_id = $2`,
      [ids, acme.id],
    );
    expect(row).toEqual({ n: 1000, titles: 1000 });
    expect(await issueCount()).toBe(before + 1000);
  });
});

describe("statuses and enums", () => {
  it("createIssue with a status other than BACKLOG or OPEN is BAD_USER_INPUT", async () => {
    await unchanged(async () => {
      for (const status of ["CLAIMED", "IN_PROGRESS", "DONE", "BLOCKED", "CANCELLED", "ESCALATED"] as const) {
        expectBadInput(await send(acme.board, Ops.CreateIssueDocument, { input: { title: "t", status } }), status);
        expectBadInput(await send(acme.board, Ops.CreateIssuesDocument, { inputs: [{ title: "ok" }, { title: "t", status }] }), status);
      }
    });
    for (const status of ["BACKLOG", "OPEN"] as const) {
      const { createIssue } = await acme.board.ok(Ops.CreateIssueDocument, { input: { title: "t", status } });
      expect(createIssue).toMatchObject({ status, checkoutRunId: null });
    }
  });

  it("an unknown enum value is a validation error, and nothing changes", async () => {
    await unchanged(async () => {
      expectRefused(await send(acme.board, Ops.CreateIssueDocument, { input: { title: "t", status: "NOPE" } }));
      expectRefused(await send(acme.board, Ops.CreateIssueDocument, { input: { title: "t", priority: "URGENT" } }));
      expectRefused(await send(acme.board, Ops.UpdateIssueDocument, { id: openIssue.id, input: { status: "open" } }));
      const agent = acme.agents[0]!.client;
      expectRefused(await send(agent, Ops.ReleaseIssueDocument, { runId: run.id, issueId: claimedIssue.id, outcome: "CANCELLED" }));
      expectRefused(await send(agent, Ops.FinishRunDocument, { runId: run.id, status: "DONE" }));
      expectRefused(await send(agent, Ops.ClaimIssueDocument, { runId: run.id, issueId: openIssue.id, expectedStatuses: ["WHATEVER"] }));
    });
  });

  it("finishRun with status RUNNING is BAD_USER_INPUT, and the run and its locks stay", async () => {
    const agent = acme.agents[0]!.client;
    await unchanged(async () => {
      expectBadInput(await send(agent, Ops.FinishRunDocument, { runId: run.id, status: "RUNNING" }));
    });
    expect((await acme.board.ok(Ops.RunDocument, { id: run.id })).run).toMatchObject({ status: "RUNNING", finishedAt: null });
    expect((await acme.board.ok(Ops.IssueDocument, { id: claimedIssue.id })).issue).toMatchObject({ status: "CLAIMED", checkoutRunId: run.id });
  });

  it("an assignee from another company, or no agent at all, is BAD_USER_INPUT", async () => {
    const foreign = globex.agents[0]!.id;
    await unchanged(async () => {
      for (const assigneeAgentId of [foreign, randomUUID()]) {
        expectBadInput(await send(acme.board, Ops.CreateIssueDocument, { input: { title: "t", assigneeAgentId } }));
        expectBadInput(await send(acme.board, Ops.CreateIssuesDocument, { inputs: [{ title: "ok" }, { title: "t", assigneeAgentId }] }));
        expectBadInput(await send(acme.board, Ops.UpdateIssueDocument, { id: openIssue.id, input: { assigneeAgentId } }));
      }
    });
    expect((await acme.board.ok(Ops.IssueDocument, { id: openIssue.id })).issue?.assigneeAgentId).toBe(acme.agents[0]!.id);
  });
});

describe("paging arguments", () => {
  it("first outside the allowed range is BAD_USER_INPUT", async () => {
    for (const first of [0, -1, 100_000]) {
      expectBadInput(await send(acme.board, Ops.IssuesDocument, { companyId: acme.id, first }), `issues first ${first}`);
      expectBadInput(await send(acme.board, Ops.LockEventsDocument, { companyId: acme.id, first }), `lockEvents first ${first}`);
      expectBadInput(await send(acme.board, Ops.RunsDocument, { companyId: acme.id, first }), `runs first ${first}`);
    }
    expect((await acme.board.ok(Ops.IssuesDocument, { companyId: acme.id, first: 1 })).issues.edges).toHaveLength(1);
    await h.settled(acme.id);
    expect((await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, first: 1 })).lockEvents).toHaveLength(1);
  });

  it("first of the wrong type is a validation error", async () => {
    expectRefused(await send(acme.board, Ops.IssuesDocument, { companyId: acme.id, first: "ten" }));
    expectRefused(await send(acme.board, Ops.LockEventsDocument, { companyId: acme.id, first: 1.5 }));
    expectRefused(await send(acme.board, Ops.LockEventsDocument, { companyId: acme.id, first: 2 ** 40 }));
  });

  it("afterSeq that is not a decimal seq is BAD_USER_INPUT", async () => {
    for (const afterSeq of ["abc", "-1", "1.5", "1e3", " 1", "0x10", "", "99999999999999999999", "9223372036854775808"]) {
      expectBadInput(await send(acme.board, Ops.LockEventsDocument, { companyId: acme.id, afterSeq }), `afterSeq ${JSON.stringify(afterSeq)}`);
    }
    await h.settled(acme.id);
    const { lockEvents } = await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, afterSeq: "0" });
    expect(lockEvents.map((e) => e.kind)).toEqual(["CLAIMED"]);
    expect((await acme.board.ok(Ops.LockEventsDocument, { companyId: acme.id, afterSeq: lockEvents[0]!.seq })).lockEvents).toEqual([]);
  });

  it("an after cursor this API did not hand out is BAD_USER_INPUT", async () => {
    const b64 = (text: string) => Buffer.from(text).toString("base64url");
    for (const after of ["abc", "!!!", b64("issue:nope"), b64(`run:${randomUUID()}`), b64("issue:"), "a".repeat(5000)]) {
      expectBadInput(await send(acme.board, Ops.IssuesDocument, { companyId: acme.id, after }), `after ${JSON.stringify(after.slice(0, 40))}`);
    }
    const page = await acme.board.ok(Ops.IssuesDocument, { companyId: acme.id, first: 1 });
    expect(page.issues.pageInfo.hasNextPage).toBe(true);
    const next = await acme.board.ok(Ops.IssuesDocument, { companyId: acme.id, first: 1, after: page.issues.pageInfo.endCursor });
    expect(next.issues.edges[0]!.node.id).not.toBe(page.issues.edges[0]!.node.id);
  });
});

describe("query shape", () => {
  const aliased = (n: number) => Array.from({ length: n }, (_, i) => `a${i}: me { role }`).join("\n");

  it("more than 30 aliases is refused; 30 are fine", async () => {
    const ok = await send(acme.board, `{ ${aliased(30)} }`);
    expect(ok.errors).toBeUndefined();
    expect(Object.keys(ok.data!)).toHaveLength(30);
    const refused = await send(acme.board, `{ ${aliased(31)} }`);
    expectRefused(refused);
    expect(
      refused.errors!.some((e) => e.extensions?.code === "BAD_USER_INPUT"),
      JSON.stringify(refused.errors),
    ).toBe(true);
  });

  it("aliases hidden in fragments count too", async () => {
    const fragmentAliases = Array.from({ length: 16 }, (_, i) => `f${i}: id`).join("\n");
    const res = await send(
      acme.board,
      `query { ${aliased(15)} issues(companyId: "${acme.id}", first: 1) { edges { node { ...F } } } }
       fragment F on Issue { ${fragmentAliases} }`,
    );
    expectRefused(res);
  });

  it("a mutation with more than 30 aliases is refused before anything runs", async () => {
    const fields = Array.from({ length: 31 }, (_, i) => `m${i}: createIssue(input: { title: "flood ${i}" }) { id }`).join("\n");
    await unchanged(async () => {
      expectRefused(await send(acme.board, `mutation { ${fields} }`));
    });
  });

  it("a query nested deeper than the limit is refused", async () => {
    const deep = (depth: number) => "{ me ".concat("{ x ".repeat(depth - 2), "{ role }", " }".repeat(depth - 1));
    const res = await send(acme.board, deep(12));
    expectRefused(res);
    expect(
      res.errors!.some((e) => e.extensions?.code === "BAD_USER_INPUT" && /nest|deep/i.test(e.message)),
      JSON.stringify(res.errors),
    ).toBe(true);
  });

  it("introspection is no way around the depth limit", async () => {
    // type { fields { type { fields … } } } grows exponentially with depth;
    // the depth rule skips __ fields, so something else must refuse this.
    const level = (n: number): string => (n === 0 ? "name" : `name fields { type { ofType { ofType { ${level(n - 1)} } } } }`);
    const res = await send(acme.board, `{ __schema { types { ${level(6)} } } }`);
    expectRefused(res);
    // The introspection GraphiQL sends still works.
    const full = await send(acme.board, getIntrospectionQuery());
    expect(full.errors).toBeUndefined();
    expect(JSON.stringify(full.data)).toContain("claimIssue");
  });

  it("a syntactically broken document is refused and changes nothing", async () => {
    await unchanged(async () => {
      for (const query of [
        `{ issues(companyId: `,
        `mutation { createIssue(input: { title: "half" }) { id }`,
        `}{`,
        ``,
        `mutation { createIssue(input: { title: "x" }) { id } } mutation { startRun { id } }`,
        `query Q($id: ID!) { issue(id: $id) { id } }`,
        `\u0000`,
      ]) {
        expectRefused(await send(acme.board, query), JSON.stringify(query));
      }
    });
  });

  it("a body that is not JSON, or variables that are not an object, gets an error, not a crash", async () => {
    for (const body of ["{not json", JSON.stringify({ query: "{ me { role } }", variables: "nope" }), JSON.stringify([1, 2, 3]), "null"]) {
      const response = await fetch(h.url, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${acme.board.token}` },
        body,
      });
      const text = await response.text();
      expect(response.status, body).toBeGreaterThanOrEqual(400);
      expect(response.status, body).toBeLessThan(500);
      expect(text).not.toContain("    at ");
      expect(JSON.parse(text).errors?.length, text).toBeGreaterThan(0);
    }
    const health = await fetch(h.url.replace(/\/graphql$/, "/healthz"));
    expect(health.status).toBe(200);
  });
});

describe("unexpected errors", () => {
  it("are masked (no SQL, no stack), logged, and the server keeps serving", async () => {
    const agent = acme.agents[0]!.client;
    const errorsBefore = h.logged.filter((l) => l.level === "error").length;
    // Pull a function the claim statement needs out from under the server.
    await h.sql(`ALTER FUNCTION baton_run_is_live(run_status, timestamptz) RENAME TO baton_run_is_live_hidden`);
    let res: GraphQLResponse<unknown>;
    try {
      res = await send(agent, Ops.ClaimIssueDocument, { runId: run.id, issueId: openIssue.id });
    } finally {
      await h.sql(`ALTER FUNCTION baton_run_is_live_hidden(run_status, timestamptz) RENAME TO baton_run_is_live`);
    }
    expect(res.errors ?? [], JSON.stringify(res)).not.toHaveLength(0);
    expect(res.errors![0]!.extensions?.code).toBe("INTERNAL_SERVER_ERROR");
    const text = JSON.stringify(res);
    expect(text).not.toMatch(/baton_run_is_live|function|select|postgres|prisma|sql/i);
    expectNoStack(res);
    expect(h.logged.filter((l) => l.level === "error").length).toBeGreaterThan(errorsBefore);
    // Still alive, and the same call works again.
    const again = await agent.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: openIssue.id });
    expect(again.claimIssue.__typename).toBe("IssueClaimed");
  });
});
