// issuesChanged: issues created or edited without a lock change reach
// subscribers on every API instance (through Redis), as they are now; other
// companies' never do; a forged Redis message is ignored; and a subscriber
// that goes away lets go of its listener at once.
import { print } from "graphql";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ADMIN_TOKEN, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
type Changed = { id: string; title: string; priority: string; status: string };

let h: Harness;
let co: Company;

beforeAll(async () => {
  h = await startHarness({ redisUrl: REDIS_URL });
  co = await createCompany(h, 1);
});
afterAll(() => h?.close());

/** issuesChanged over SSE; resolves once the server has answered, i.e. once it is listening. */
async function subscribe(url: string, token: string, companyId: string) {
  const controller = new AbortController();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: print(Ops.IssuesChangedDocument), variables: { companyId } }),
    signal: controller.signal,
  });
  const received: { data?: { issuesChanged: Changed[] }; errors?: { extensions?: { code?: string } }[] }[] = [];
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body!) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = /^data: (.+)$/m.exec(message)?.[1];
          if (/^event: next$/m.test(message) && data) received.push(JSON.parse(data));
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    status: res.status,
    received,
    issues: () => received.flatMap((r) => r.data?.issuesChanged ?? []),
    async close() {
      controller.abort();
      await reading;
    },
  };
}

it("delivers created and edited issues, as they are now, to subscribers on another instance", async () => {
  const other = await h.startInstance({ redisUrl: REDIS_URL });
  const s = await subscribe(other.url, co.board.token!, co.id);
  try {
    expect(s.status).toBe(200);
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "first" } });
    await eventually(() => (s.issues().some((i) => i.id === createIssue.id) ? true : undefined), "the created issue");
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: [{ title: "a" }, { title: "b" }] });
    await co.board.ok(Ops.UpdateIssueDocument, { id: createIssue.id, input: { title: "renamed", priority: "CRITICAL" } });
    await eventually(() => (s.issues().some((i) => i.title === "renamed") ? true : undefined), "the edit");
    const seen = new Set(s.issues().map((i) => i.id));
    for (const issue of createIssues) expect(seen.has(issue.id)).toBe(true);
    expect(s.issues().find((i) => i.title === "renamed")).toMatchObject({ id: createIssue.id, priority: "CRITICAL", status: "OPEN" });
  } finally {
    await s.close();
  }
});

it("never delivers another company's issues, and refuses to subscribe to another company", async () => {
  const stranger = await createCompany(h, 0);
  const s = await subscribe(h.url, co.board.token!, co.id);
  try {
    await stranger.board.ok(Ops.CreateIssueDocument, { input: { title: "theirs" } });
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "ours" } });
    await eventually(() => (s.issues().some((i) => i.id === createIssue.id) ? true : undefined), "our issue");
    expect(s.issues().map((i) => i.title)).not.toContain("theirs");
  } finally {
    await s.close();
  }
  const refused = await subscribe(h.url, stranger.board.token!, co.id);
  await eventually(() => (refused.received.length > 0 ? true : undefined), "the refusal");
  expect(refused.received[0]!.errors?.[0]?.extensions?.code).toBe("FORBIDDEN");
  await refused.close();
});

it("ignores a forged notice on Redis: a malformed one, or one naming another company's channel", async () => {
  const s = await subscribe(h.url, ADMIN_TOKEN, co.id);
  const redis = new Redis(REDIS_URL);
  try {
    await redis.publish(`baton:issue-notices:${co.id}`, "null");
    await redis.publish(`baton:issue-notices:${co.id}`, JSON.stringify({ companyId: co.id, issueIds: ["not-a-uuid"] }));
    const stranger = await createCompany(h, 0);
    const { createIssue: theirs } = await stranger.board.ok(Ops.CreateIssueDocument, { input: { title: "not yours" } });
    await redis.publish(`baton:issue-notices:${co.id}`, JSON.stringify({ companyId: stranger.id, issueIds: [theirs.id] }));
    await redis.publish(`baton:issue-notices:${co.id}`, JSON.stringify({ companyId: co.id, issueIds: [theirs.id] }));
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "real" } });
    await eventually(() => (s.issues().some((i) => i.id === createIssue.id) ? true : undefined), "the real notice");
    expect(s.issues().map((i) => i.title)).toEqual(["real"]);
    expect(h.logged.some((l) => l.msg === "ignored a malformed issue notice")).toBe(true);
  } finally {
    redis.disconnect();
    await s.close();
  }
});

it("lets go of the listener and the subscription's count as soon as the subscriber goes away", async () => {
  const metric = async () => {
    const text = await (await fetch(new URL("/metrics", h.url))).text();
    return Number(/^baton_subscriptions_active(?:\{[^}]*\})? (\d+)/m.exec(text)?.[1] ?? NaN);
  };
  // The earlier tests' subscribers have all gone: none is still counted.
  await eventually(async () => ((await metric()) === 0 ? true : undefined), "earlier subscriptions released");
  const s = await subscribe(h.url, co.board.token!, co.id);
  expect(await metric()).toBe(1);
  await s.close();
  await eventually(async () => ((await metric()) === 0 ? true : undefined), "this subscription released");
});

it("announces the issues the work graph makes ready without an event of their own: dependents of a DONE, woken delays, edited edges", async () => {
  const graph = await createCompany(h, 1);
  const s = await subscribe(h.url, graph.board.token!, graph.id);
  const agent = graph.agents[0]!;
  try {
    const make = async (input: Partial<Ops.CreateIssueInput>) =>
      (await graph.board.ok(Ops.CreateIssueDocument, { input: { title: "x", assigneeAgentId: agent.id, ...input } })).createIssue;
    const blocker = await make({ title: "blocker" });
    const dependent = await make({ title: "dependent", blockedBy: [blocker.id] });
    const later = await make({ title: "later", notBefore: new Date(Date.now() + 3_600_000).toISOString() });
    const heardOf = (id: string) => s.issues().filter((i) => i.id === id).length;
    // each creation is heard once first (through Redis: it may come late)
    await eventually(() => (heardOf(dependent.id) > 0 && heardOf(later.id) > 0 ? true : undefined), "the creations");
    const before = { dependent: heardOf(dependent.id), later: heardOf(later.id) };

    const { startRun } = await agent.client.ok(Ops.StartRunDocument);
    await agent.client.ok(Ops.ClaimIssueDocument, { runId: startRun.id, issueId: blocker.id });
    await agent.client.ok(Ops.AcquireExecutionDocument, { runId: startRun.id, issueId: blocker.id });
    await agent.client.ok(Ops.ReleaseIssueDocument, { runId: startRun.id, issueId: blocker.id, outcome: "DONE" });
    await eventually(() => (heardOf(dependent.id) > before.dependent ? true : undefined), "the dependent freed by its blocker's DONE");

    // the instance's own wake-up (every 250 ms) makes it claimable, and says so
    await h.sql("UPDATE issues SET not_before = now() - interval '1 second' WHERE id = $1", [later.id]);
    await eventually(() => (heardOf(later.id) > before.later ? true : undefined), "the delayed issue, woken");

    const edited = heardOf(later.id);
    await graph.board.ok(Ops.AddDependencyDocument, { issueId: later.id, blockedById: dependent.id });
    await eventually(() => (heardOf(later.id) > edited ? true : undefined), "the issue a dependency was added to");
  } finally {
    await s.close();
  }
});
