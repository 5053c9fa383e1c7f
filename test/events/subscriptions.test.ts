// lockChanged across two API instances sharing one database and one Redis:
// delivery, order, filters, auth at subscribe time, and replay.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { Subscriber } from "../helpers/subscriber.js";
import { race } from "../helpers/race.js";

const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

let h: Harness;
let urlB: string;
const open: Subscriber<unknown>[] = [];

beforeAll(async () => {
  h = await startHarness({ redisUrl: REDIS_URL });
  urlB = (await h.startInstance()).url;
});
afterAll(async () => {
  for (const s of open) await s.close();
  await h?.close();
});

function subscribe(url: string, token: string | null, vars: Ops.LockChangedSubscriptionVariables) {
  const s = new Subscriber<Ops.LockChangedSubscription>(url, token).start(Ops.LockChangedDocument, vars);
  open.push(s as Subscriber<unknown>);
  return s;
}

async function lastSeq(co: Company): Promise<string> {
  const row = await h.one<{ seq: string }>("SELECT coalesce(max(seq), 0)::text AS seq FROM lock_events WHERE company_id = $1", [co.id]);
  return row.seq;
}

const seqs = (s: Subscriber<Ops.LockChangedSubscription>) => s.messages.map((m) => m.data?.lockChanged.seq);

describe("lockChanged", () => {
  it("a dashboard on instance B sees, in order and once, every change made through instance A", async () => {
    const co = await createCompany(h, 2);
    const dashboard = subscribe(urlB, co.board.token, { companyId: co.id, afterSeq: await lastSeq(co) });
    const agent = co.agents[0]!;
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "t", assigneeAgentId: agent.id } });
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
    await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
    await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: createIssue.id });
    await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: createIssue.id, outcome: "DONE" });
    await dashboard.count(3);
    expect(dashboard.messages.map((m) => m.data?.lockChanged.kind)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "RELEASED"]);
    expect(seqs(dashboard)).toEqual(await h.ledgerSeqs(co.id));
    expect(dashboard.messages[2]!.data?.lockChanged).toMatchObject({ issueId: createIssue.id, status: "DONE", runId: run.id, agentId: agent.id });
  });

  // docs/invariants.md #12: no reader is given a seq below which an event can still appear
  it("many concurrent changes from both instances reach subscribers on both, each exactly once and in seq order", async () => {
    const co = await createCompany(h, 8);
    const from = await lastSeq(co);
    const onA = subscribe(h.url, co.board.token, { companyId: co.id, afterSeq: from });
    const onB = subscribe(urlB, co.agents[0]!.client.token, { companyId: co.id, afterSeq: from });
    await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 80 }, (_, i) => ({ title: `job ${i}` })) });
    const runs = await Promise.all(co.agents.map(async (a) => (await a.client.ok(Ops.StartRunDocument)).startRun));
    await race(co.agents.length, async (i) => {
      const client = new Client(i % 2 ? urlB : h.url, co.agents[i]!.client.token);
      for (;;) {
        const { claimIssue } = await client.ok(Ops.ClaimIssueDocument, { runId: runs[i]!.id, includeUnassigned: true });
        if (claimIssue.__typename !== "IssueClaimed") return;
        await client.ok(Ops.ReleaseIssueDocument, { runId: runs[i]!.id, issueId: claimIssue.issue.id, outcome: "BLOCKED" });
      }
    });
    const all = (await h.ledgerSeqs(co.id)).filter((seq) => BigInt(seq) > BigInt(from));
    expect(all).toHaveLength(160);
    for (const s of [onA, onB]) {
      await s.count(all.length);
      expect(seqs(s)).toEqual(all);
    }
  });

  it("filters by issue and by agent, and keeps per-issue order", async () => {
    const co = await createCompany(h, 2);
    const [a, b] = co.agents as [Company["agents"][0], Company["agents"][0]];
    const from = await lastSeq(co);
    const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
      inputs: [
        { title: "x", assigneeAgentId: a.id },
        { title: "y", assigneeAgentId: b.id },
      ],
    });
    const x = createIssues[0]!;
    const byIssue = subscribe(urlB, co.board.token, { companyId: co.id, issueId: x.id, afterSeq: from });
    const byAgent = subscribe(h.url, co.board.token, { companyId: co.id, agentId: b.id, afterSeq: from });
    for (const agent of [a, b]) {
      const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
      const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id });
      if (claimIssue.__typename !== "IssueClaimed") throw new Error(claimIssue.__typename);
      await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: claimIssue.issue.id });
      await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: claimIssue.issue.id, outcome: "DONE" });
    }
    await byIssue.count(3);
    await byAgent.count(3);
    expect(byIssue.messages.map((m) => [m.data?.lockChanged.issueId, m.data?.lockChanged.kind])).toEqual([
      [x.id, "CLAIMED"],
      [x.id, "EXECUTION_ACQUIRED"],
      [x.id, "RELEASED"],
    ]);
    expect(byAgent.messages.map((m) => m.data?.lockChanged.agentId)).toEqual([b.id, b.id, b.id]);
    // An unfiltered subscriber that has seen all six events shows nothing more is coming.
    const marker = subscribe(h.url, co.board.token, { companyId: co.id, afterSeq: from });
    await marker.count(6);
    expect(byAgent.messages).toHaveLength(3);
  });

  it("replays committed events after afterSeq, then continues live, while events are being committed", async () => {
    const co = await createCompany(h, 4);
    await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 60 }, (_, i) => ({ title: `job ${i}` })) });
    const runs = await Promise.all(co.agents.map(async (a) => (await a.client.ok(Ops.StartRunDocument)).startRun));
    const claimAll = (i: number) => async () => {
      for (;;) {
        const { claimIssue } = await co.agents[i]!.client.ok(Ops.ClaimIssueDocument, { runId: runs[i]!.id, includeUnassigned: true });
        if (claimIssue.__typename !== "IssueClaimed") return;
      }
    };
    // Subscribers join at different points of the history while claims are committing:
    // from the start, and after the 3rd and the 10th event.
    const { eventually } = await import("../helpers/race.js");
    const joining = async () => {
      const early = subscribe(urlB, co.board.token, { companyId: co.id, afterSeq: "0" });
      const sofar = await eventually(async () => {
        const seen = await h.ledgerSeqs(co.id);
        return seen.length >= 10 ? seen : undefined;
      }, "ten events");
      return [early, ...[2, 9].map((i) => subscribe(urlB, co.board.token, { companyId: co.id, afterSeq: sofar[i]! }))];
    };
    const [late] = await Promise.all([joining(), claimAll(0)(), claimAll(1)(), claimAll(2)(), claimAll(3)()]);
    const all = await h.ledgerSeqs(co.id);
    expect(all).toHaveLength(60);
    for (const [i, s] of late.entries()) {
      const skip = [0, 3, 10][i]!;
      await s.count(60 - skip);
      expect(seqs(s)).toEqual(all.slice(skip));
    }
  });

  it("checks scope at subscribe time: another company's events are FORBIDDEN, a missing or unknown token UNAUTHENTICATED", async () => {
    const mine = await createCompany(h, 1);
    const other = await createCompany(h, 1);
    const board = subscribe(h.url, mine.board.token, { companyId: other.id });
    const agent = subscribe(urlB, mine.agents[0]!.client.token, { companyId: other.id });
    for (const s of [board, agent]) {
      await s.count(1);
      expect(s.messages[0]!.errors?.[0]?.extensions?.code).toBe("FORBIDDEN");
    }
    const stranger = subscribe(h.url, "baton_board_not-a-real-key", { companyId: mine.id });
    const anonymous = subscribe(urlB, null, { companyId: mine.id });
    const odd = [12345, { token: "x" }, ["Bearer", mine.board.token]].map((authorization) => {
      const s = new Subscriber<Ops.LockChangedSubscription>(h.url, null, { authorization }).start(Ops.LockChangedDocument, { companyId: mine.id });
      open.push(s as Subscriber<unknown>);
      return s;
    });
    for (const s of [stranger, anonymous, ...odd]) {
      await s.count(1);
      expect(s.messages[0]!.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
      expect(s.messages[0]!.data ?? null).toBeNull();
    }
    const malformed = subscribe(h.url, mine.board.token, { companyId: mine.id, afterSeq: "-1" });
    await malformed.count(1);
    expect(malformed.messages[0]!.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
  });

  it("also streams over GraphQL-over-SSE with the header for auth", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    const controller = new AbortController();
    const response = await fetch(h.url, {
      method: "POST",
      signal: controller.signal,
      headers: { "content-type": "application/json", accept: "text/event-stream", authorization: `Bearer ${co.board.token}` },
      body: JSON.stringify({
        query: "subscription($c: ID!, $a: ID) { lockChanged(companyId: $c, afterSeq: $a) { seq kind } }",
        variables: { c: co.id, a: "0" },
      }),
    });
    expect(response.headers.get("content-type")).toMatch(/text\/event-stream/);
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "sse", assigneeAgentId: agent.id } });
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
    await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id });
    const reader = response.body!.getReader();
    let text = "";
    const deadline = Date.now() + 10_000;
    while (!text.includes('"kind":"CLAIMED"')) {
      if (Date.now() > deadline) throw new Error(`no event over SSE: ${text}`);
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toContain(`"seq":"${(await h.ledgerSeqs(co.id))[0]}"`);
    controller.abort();
  });
});

describe("subscription lifetimes", () => {
  it("a closed subscription that never received a matching event lets go of everything", async () => {
    const co = await createCompany(h, 1);
    const gauge = async () => (await h.app.services.metrics.subscriptions.get()).values[0]?.value ?? 0;
    const before = await gauge();
    // A filter nothing will match: the stream waits for ever unless return() reaches it.
    const idle = new Subscriber<Ops.LockChangedSubscription>(h.url, co.board.token).start(Ops.LockChangedDocument, {
      companyId: co.id,
      issueId: "00000000-0000-4000-8000-000000000042",
    });
    const { eventually } = await import("../helpers/race.js");
    await eventually(async () => ((await gauge()) === before + 1 ? true : undefined), "the subscription to open");
    await idle.close();
    await eventually(async () => ((await gauge()) === before ? true : undefined), "the closed subscription to be released");
  });

  it("a malformed operation ends that subscription only, not the socket", async () => {
    const co = await createCompany(h, 1);
    const { createClient } = await import("graphql-ws");
    const WebSocket = (await import("ws")).default;
    const client = createClient({
      url: h.url.replace(/^http/, "ws"),
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${co.board.token}` },
      retryAttempts: 0,
    });
    try {
      const broken = await new Promise<unknown>((resolve) => {
        client.subscribe({ query: "subscription {" }, { next: () => {}, error: resolve, complete: () => resolve(null) });
      });
      expect(JSON.stringify(broken)).toMatch(/Syntax Error|parse/);
      const ok = await new Promise<unknown>((resolve, reject) => {
        const dispose = client.subscribe(
          { query: 'subscription($c: ID!) { lockChanged(companyId: $c, afterSeq: "0") { seq } }', variables: { c: co.id } },
          {
            next: (v) => {
              dispose();
              resolve(v);
            },
            error: reject,
            complete: () => {},
          },
        );
        // The issue exists before the claim (run concurrently, the claim could find nothing, and no event would come).
        const agent = co.agents[0]!;
        void co.board
          .ok(Ops.CreateIssueDocument, { input: { title: "t", assigneeAgentId: null } })
          .then(() => agent.client.ok(Ops.StartRunDocument))
          .then(({ startRun }) => agent.client.ok(Ops.ClaimIssueDocument, { runId: startRun.id, includeUnassigned: true }))
          .catch(reject);
      });
      expect(ok).toMatchObject({ data: { lockChanged: { seq: (await h.ledgerSeqs(co.id))[0] } } });
    } finally {
      await client.dispose();
    }
  });
});
