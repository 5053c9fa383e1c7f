// Keys are rotated and revoked on every instance at once (docs/access.md,
// "Rotating and revoking keys"): two API instances on one database and a
// private Redis (so that it can be stopped); the revocation reaches the other
// instance through pub/sub, and through the revocation poll when Redis is
// away; open subscriptions end; disabling an agent ends its runs and frees
// their locks in the same transaction; another company's board cannot touch
// an agent; and keys stay cached (no lookup per request) throughout.
import { print } from "graphql";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ADMIN_TOKEN, Client, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually, race } from "../helpers/race.js";
import { PrivateRedis } from "../helpers/redis.js";
import { Subscriber } from "../helpers/subscriber.js";
import { startRun } from "../../src/locks/runs/runs.js";
// the SDK's own documents (src/client/operations): the CLI and board use the same
import { DisableAgentDocument, EnableAgentDocument, RotateAgentKeyDocument, RotateBoardKeyDocument } from "../../src/client/generated/graphql.js";

/** The revocation poll's interval on both instances. */
const POLL_MS = 200;
/** Every instance refuses a revoked key this soon (the issue's promise). */
const WITHIN_MS = 1000;

let h: Harness;
let redis: PrivateRedis;
let b: { url: string; app: Harness["app"]; bus: Harness["bus"] };
const subscribers: Subscriber<unknown>[] = [];

beforeAll(async () => {
  redis = await PrivateRedis.start();
  h = await startHarness({ redisUrl: redis.url, ledgerPollMs: POLL_MS });
  b = await h.startInstance();
});
afterAll(async () => {
  for (const s of subscribers) await s.close();
  await h?.close();
  await redis?.kill();
});

const onB = (token: string | null) => new Client(b.url, token);

async function whoami(client: Client): Promise<string> {
  const res = await client.request(Ops.MeDocument);
  return res.errors?.[0]?.extensions?.code ?? res.data!.me.role;
}

/** How long until `client` is refused (UNAUTHENTICATED), at most `deadlineMs`; fails past it. */
async function refusedWithin(client: Client, deadlineMs: number): Promise<number> {
  const started = Date.now();
  await eventually(async () => ((await whoami(client)) === "UNAUTHENTICATED" ? true : undefined), "the revoked key to be refused", deadlineMs);
  return Date.now() - started;
}

/** baton_key_revocations_total{heard} of an instance. */
async function heard(app: Harness["app"], how: "here" | "pubsub" | "poll"): Promise<number> {
  const m = await app.services.metrics.keyRevocations.get();
  return m.values.find((v) => v.labels.heard === how)?.value ?? 0;
}

function lookups(app: Harness["app"]): Promise<number> {
  return app.services.metrics.keyLookups.get().then((m) => m.values.reduce((sum, v) => sum + v.value, 0));
}

it("rotating an agent key on one instance: the old key is refused on the other within 1 s, the new one works", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const oldOnB = onB(agent.client.token);
  expect(await whoami(oldOnB)).toBe("AGENT"); // cached on B now

  const bHeard = async () => (await heard(b.app, "pubsub")) + (await heard(b.app, "poll"));
  const [hereBefore, bBefore] = [await heard(h.app, "here"), await bHeard()];
  const { rotateAgentKey } = await co.board.ok(RotateAgentKeyDocument, { agentId: agent.id });
  await refusedWithin(oldOnB, WITHIN_MS);
  expect(await whoami(agent.client)).toBe("UNAUTHENTICATED");
  // A made it; B heard (first, most likely, from pub/sub; the poll may win the race, both count as one key)
  expect((await heard(h.app, "here")) - hereBefore).toBe(1);
  await eventually(async () => ((await bHeard()) - bBefore === 1 ? true : undefined), "B to count the key");
  expect(rotateAgentKey.apiKey).toMatch(/^baton_agent_/);
  expect(await whoami(onB(rotateAgentKey.apiKey))).toBe("AGENT");
  expect(await whoami(new Client(h.url, rotateAgentKey.apiKey))).toBe("AGENT");
  // the new key acts as the same agent
  const { me } = await onB(rotateAgentKey.apiKey).ok(Ops.MeDocument);
  expect(me).toMatchObject({ role: "AGENT", agentId: agent.id, companyId: co.id });
});

it("rotating the board key: the old one is refused everywhere, the new one is the same company's board", async () => {
  const co = await createCompany(h, 0);
  const oldOnB = onB(co.board.token);
  expect(await whoami(oldOnB)).toBe("BOARD");
  const { rotateBoardKey } = await co.board.ok(RotateBoardKeyDocument, {});
  await refusedWithin(oldOnB, WITHIN_MS);
  const { me } = await onB(rotateBoardKey.apiKey).ok(Ops.MeDocument);
  expect(me).toMatchObject({ role: "BOARD", companyId: co.id });
  // the admin token rotates any company's, named; without a name it is told to give one
  expect(await h.admin.errorCode(RotateBoardKeyDocument, {})).toBe("BAD_USER_INPUT");
  const byAdmin = await h.admin.ok(RotateBoardKeyDocument, { companyId: co.id });
  await refusedWithin(onB(rotateBoardKey.apiKey), WITHIN_MS);
  expect(await whoami(onB(byAdmin.rotateBoardKey.apiKey))).toBe("BOARD");
});

it("with Redis stopped, the other instance still refuses the old key within one poll interval", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const oldOnB = onB(agent.client.token);
  expect(await whoami(oldOnB)).toBe("AGENT");
  await redis.kill();
  try {
    await eventually(() => (!h.bus.healthy() && !b.bus.healthy() ? true : undefined), "both instances to see Redis down");
    const polledBefore = await heard(b.app, "poll");
    await co.board.ok(RotateAgentKeyDocument, { agentId: agent.id });
    // one poll interval, and the request's own time
    const took = await refusedWithin(oldOnB, POLL_MS + 500);
    expect(took).toBeLessThanOrEqual(POLL_MS + 500);
    // the poll stopped it, and says so
    expect((await heard(b.app, "poll")) - polledBefore).toBe(1);
  } finally {
    await redis.restart();
    await eventually(() => (h.bus.healthy() && b.bus.healthy() ? true : undefined), "both instances to reconnect to Redis");
  }
});

it("a subscription opened with the old key ends with UNAUTHENTICATED on the other instance, over WebSocket and SSE", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const ws = new Subscriber<Ops.LockChangedSubscription>(b.url, agent.client.token).start(Ops.LockChangedDocument, { companyId: co.id, afterSeq: "0" });
  subscribers.push(ws as Subscriber<unknown>);
  // SSE, on B too
  const controller = new AbortController();
  const sse = await fetch(b.url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream", authorization: `Bearer ${agent.client.token}` },
    body: JSON.stringify({ query: print(Ops.LockChangedDocument), variables: { companyId: co.id } }),
    signal: controller.signal,
  });
  expect(sse.status).toBe(200);
  const sseText = (async () => {
    let text = "";
    const decoder = new TextDecoder();
    try {
      for await (const chunk of sse.body!) text += decoder.decode(chunk as Uint8Array, { stream: true });
    } catch {
      // aborted
    }
    return text;
  })();
  // both are live: a change reaches them
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "x", assigneeAgentId: agent.id } });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id });
  await ws.until((m) => m.some((x) => x.data), "the claim on the WebSocket");

  await co.board.ok(RotateAgentKeyDocument, { agentId: agent.id });
  const ended = await ws.until(
    (m) => m.some((x) => x.errors?.some((e) => e.extensions?.code === "UNAUTHENTICATED")),
    "the WebSocket subscription to end",
    WITHIN_MS * 5,
  );
  expect(ended.at(-1)!.errors![0]!.message).toMatch(/revoked/);
  await eventually(() => (ws.closed ? true : undefined), "the socket to close");
  expect(ws.closed!.code).toBe(4403);
  // the SSE stream ends by itself, with the error as its last message
  const text = await Promise.race([
    sseText,
    new Promise<string>((_, reject) => setTimeout(() => reject(new Error("the SSE stream did not end")), WITHIN_MS * 5)),
  ]);
  controller.abort();
  expect(text).toMatch(/"code":"UNAUTHENTICATED"/);
  expect(text).toMatch(/event: complete/);
});

it("disabling an agent finishes its runs and frees their locks before it returns, with the usual events; its next call is refused", async () => {
  const co = await createCompany(h, 2);
  const [agent, other] = co.agents as [Company["agents"][0], Company["agents"][0]];
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "in progress", assigneeAgentId: agent.id },
      { title: "claimed, last attempt", assigneeAgentId: agent.id, maxAttempts: 1 },
      { title: "the other agent's", assigneeAgentId: other.id },
    ],
  });
  const [working, lastTry, others] = createIssues as unknown as [{ id: string }, { id: string }, { id: string }];
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: working.id });
  await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: working.id });
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: lastTry.id });
  const otherRun = (await other.client.ok(Ops.StartRunDocument)).startRun;
  await other.client.ok(Ops.ClaimIssueDocument, { runId: otherRun.id, issueId: others.id });
  expect(await whoami(onB(agent.client.token))).toBe("AGENT");

  const { disableAgent } = await co.board.ok(DisableAgentDocument, { agentId: agent.id, reason: "leaked key" });
  expect(disableAgent.disabledAt).not.toBeNull();
  expect(disableAgent.disabledReason).toBe("leaked key");

  // one transaction: the run, the issues and the events, all there when the mutation returned
  expect(await h.one("SELECT status FROM heartbeat_runs WHERE id = $1", [run.id])).toEqual({ status: "CANCELLED" });
  expect(await h.one("SELECT status, checkout_run_id, execution_run_id, attempt_count FROM issues WHERE id = $1", [working.id])).toEqual({
    status: "OPEN",
    checkout_run_id: null,
    execution_run_id: null,
    attempt_count: 1,
  });
  // CLAIMED, its one attempt charged as for any dead run: ESCALATED
  expect(await h.one("SELECT status, checkout_run_id, attempt_count FROM issues WHERE id = $1", [lastTry.id])).toEqual({
    status: "ESCALATED",
    checkout_run_id: null,
    attempt_count: 1,
  });
  const events = await h.sql<{ issue_id: string; kind: string; reason: string; run_id: string; agent_id: string }>(
    "SELECT issue_id, kind, reason, run_id, agent_id FROM lock_events WHERE company_id = $1 AND reason = 'AGENT_DISABLED' ORDER BY seq",
    [co.id],
  );
  expect(events.map((e) => [e.issue_id, e.kind])).toEqual(
    [
      [working.id, "RECOVERED"],
      [lastTry.id, "ESCALATED"],
    ].sort((x, y) => (x[0]! < y[0]! ? -1 : 1)),
  );
  expect(events.every((e) => e.run_id === run.id && e.agent_id === agent.id)).toBe(true);
  // the other agent keeps its hold
  expect(await h.one("SELECT checkout_run_id FROM issues WHERE id = $1", [others.id])).toEqual({ checkout_run_id: otherRun.id });

  // refused at once here, within a second there, however it comes
  expect(await agent.client.errorCode(Ops.HeartbeatRunDocument, { runId: run.id })).toBe("UNAUTHENTICATED");
  await refusedWithin(onB(agent.client.token), WITHIN_MS);
  // a run cannot start for it even past the key check (a request authenticated just before): START_RUN refuses
  const actor = {
    companyId: co.id,
    agentId: agent.id,
    agentNameKey: (await h.one<{ k: string }>("SELECT name_key AS k FROM agents WHERE id = $1", [agent.id])).k,
  };
  await expect(startRun(h.app.services.locks, actor)).rejects.toThrow(/disabled/);
  // the scheduler gives it no run, though it has work assigned
  const { runHeartbeat } = await co.board.ok(Ops.RunHeartbeatDocument, {});
  expect(runHeartbeat.runs.map((r) => r.agentId)).not.toContain(agent.id);
  // a disabled agent gets no key until enabled; then a rotation gives it one that works, and the old stays revoked
  expect(await co.board.errorCode(RotateAgentKeyDocument, { agentId: agent.id })).toBe("BAD_USER_INPUT");
  const { enableAgent } = await co.board.ok(EnableAgentDocument, { agentId: agent.id });
  expect(enableAgent).toMatchObject({ disabledAt: null, disabledReason: null });
  expect(await whoami(agent.client)).toBe("UNAUTHENTICATED");
  const { rotateAgentKey } = await co.board.ok(RotateAgentKeyDocument, { agentId: agent.id });
  const fresh = new Client(h.url, rotateAgentKey.apiKey);
  expect((await fresh.ok(Ops.StartRunDocument)).startRun.status).toBe("RUNNING");
});

it("another company's board key cannot rotate, disable or enable this company's agents: not found, nothing changed", async () => {
  const co = await createCompany(h, 1);
  const stranger = await createCompany(h, 0);
  const agent = co.agents[0]!;
  const before = await h.snapshot();
  const missing = "00000000-0000-4000-8000-000000000000";
  for (const id of [agent.id, missing]) {
    const answers = [
      await stranger.board.request(RotateAgentKeyDocument, { agentId: id }),
      await stranger.board.request(DisableAgentDocument, { agentId: id, reason: "x" }),
      await stranger.board.request(EnableAgentDocument, { agentId: id }),
    ];
    for (const a of answers) {
      expect(a.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
      // the same answer for another company's agent as for none: nothing leaks
      expect(a.errors?.[0]?.message).toBe(`agent ${id} not found`);
    }
  }
  expect(await stranger.board.errorCode(RotateBoardKeyDocument, { companyId: co.id })).toBe("NOT_FOUND");
  // an agent key manages nothing
  expect(await agent.client.errorCode(RotateAgentKeyDocument, { agentId: agent.id })).toBe("FORBIDDEN");
  expect(await agent.client.errorCode(RotateBoardKeyDocument, {})).toBe("FORBIDDEN");
  // bad input changes nothing either
  expect(await co.board.errorCode(DisableAgentDocument, { agentId: agent.id, reason: "   " })).toBe("BAD_USER_INPUT");
  expect(await co.board.errorCode(RotateAgentKeyDocument, { agentId: "not-a-uuid" })).toBe("BAD_USER_INPUT");
  expect(await h.snapshot()).toEqual(before);
  expect(await whoami(agent.client)).toBe("AGENT");
});

it("concurrent rotations of one agent leave exactly one working key", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const keys = await race(6, async (i) => {
    const board = new Client(i % 2 ? b.url : h.url, co.board.token);
    return (await board.ok(RotateAgentKeyDocument, { agentId: agent.id })).rotateAgentKey.apiKey;
  });
  const working = [];
  for (const key of keys) if ((await whoami(new Client(h.url, key))) === "AGENT") working.push(key);
  expect(working).toHaveLength(1);
  expect(await h.one("SELECT count(*)::int AS n FROM api_keys WHERE agent_id = $1 AND revoked_at IS NULL", [agent.id])).toEqual({ n: 1 });
});

it("keys stay cached: repeated requests look nothing up, and a rotation evicts only the keys it revoked", async () => {
  const co = await createCompany(h, 2);
  const [a1, a2] = co.agents as [Company["agents"][0], Company["agents"][0]];
  const client = onB(a1.client.token);
  expect(await whoami(client)).toBe("AGENT");
  const before = await lookups(b.app);
  for (let i = 0; i < 20; i++) expect(await whoami(client)).toBe("AGENT");
  await co.board.ok(RotateAgentKeyDocument, { agentId: a2.id });
  await refusedWithin(onB(a2.client.token), WITHIN_MS);
  for (let i = 0; i < 5; i++) expect(await whoami(client)).toBe("AGENT");
  // the only lookups: a2's revoked key, once it was evicted
  expect((await lookups(b.app)) - before).toBeLessThanOrEqual(1);
});

it("never logs key material", async () => {
  const co = await createCompany(h, 1);
  const { rotateAgentKey } = await co.board.ok(RotateAgentKeyDocument, { agentId: co.agents[0]!.id });
  const { rotateBoardKey } = await h.admin.ok(RotateBoardKeyDocument, { companyId: co.id });
  const logged = JSON.stringify(h.logged);
  for (const key of [rotateAgentKey.apiKey, rotateBoardKey.apiKey, co.board.token!, co.agents[0]!.client.token!, ADMIN_TOKEN]) {
    expect(logged).not.toContain(key);
  }
});

it("disabling an agent while it claims and starts runs on both instances leaves it holding nothing", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  await co.board.ok(Ops.CreateIssuesDocument, { inputs: Array.from({ length: 200 }, (_, i) => ({ title: `job ${i}`, assigneeAgentId: agent.id })) });
  const outcomes = new Map<string, number>();
  const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
  let stop = false;
  const claimers = Array.from({ length: 4 }, async (_, i) => {
    const client = new Client(i % 2 ? b.url : h.url, agent.client.token);
    let runId: string | null = null;
    while (!stop) {
      if (!runId) {
        const started = await client.request(Ops.StartRunDocument);
        if (started.errors) {
          count(started.errors[0]!.extensions!.code!);
          if (started.errors[0]!.extensions!.code === "UNAUTHENTICATED") return;
          continue;
        }
        runId = started.data!.startRun.id;
      }
      const res = await client.request(Ops.ClaimIssueDocument, { runId });
      if (res.errors) {
        count(res.errors[0]!.extensions!.code!);
        if (res.errors[0]!.extensions!.code === "UNAUTHENTICATED") return;
        continue;
      }
      count(res.data!.claimIssue.__typename);
      if (res.data!.claimIssue.__typename === "RunNotActive") runId = null;
      if (res.data!.claimIssue.__typename === "IssueClaimed" && Math.random() < 0.3) runId = null; // leave it held, start another run
    }
  });
  await eventually(() => ((outcomes.get("IssueClaimed") ?? 0) >= 10 ? true : undefined), "the claimers to be claiming");
  await co.board.ok(DisableAgentDocument, { agentId: agent.id, reason: "racing" });
  // every claimer is refused within a second, on either instance, and stops by itself
  await Promise.race([
    Promise.all(claimers),
    new Promise((_, reject) => setTimeout(() => reject(new Error("claimers still accepted")), WITHIN_MS * 5)),
  ]).finally(() => (stop = true));
  expect(outcomes.get("UNAUTHENTICATED")).toBe(4);
  expect(await h.one("SELECT count(*)::int AS n FROM heartbeat_runs WHERE agent_id = $1 AND status = 'RUNNING'", [agent.id])).toEqual({ n: 0 });
  expect(await h.one("SELECT count(*)::int AS n FROM issues i JOIN heartbeat_runs r ON r.id = i.checkout_run_id WHERE r.agent_id = $1", [agent.id])).toEqual({
    n: 0,
  });
  // every claim was taken back with one event, and charged one attempt (each died CLAIMED)
  const { n: recovered } = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM lock_events WHERE company_id = $1 AND reason = 'AGENT_DISABLED'", [
    co.id,
  ]);
  const { n: claimed } = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM lock_events WHERE company_id = $1 AND kind = 'CLAIMED'", [co.id]);
  expect(recovered).toBe(claimed);
  expect(await h.one("SELECT coalesce(sum(attempt_count), 0)::int AS n FROM issues WHERE company_id = $1", [co.id])).toEqual({ n: claimed });
});

it("a scheduler tick that reads an agent just before it is disabled skips it and serves the others", async () => {
  const co = await createCompany(h, 2);
  const [a, b] = co.agents as [Company["agents"][0], Company["agents"][0]];
  await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "a's", assigneeAgentId: a.id },
      { title: "b's", assigneeAgentId: b.id },
    ],
  });
  // disableAgent's first transaction, held open: the tick lists A (its snapshot), then START_RUN waits for A's row
  const held = new pg.Client({ connectionString: h.database.url });
  await held.connect();
  try {
    await held.query("BEGIN");
    await held.query("UPDATE agents SET disabled_at = now(), disabled_reason = 'racing the tick' WHERE id = $1", [a.id]);
    const tick = co.board.request(Ops.RunHeartbeatDocument, {});
    await eventually(async () => {
      const { rows } = await held.query(
        "SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid WHERE NOT l.granted AND s.datname = current_database()",
      );
      return rows[0].n > 0 ? true : undefined;
    }, "START_RUN to wait for the agent row");
    await held.query("COMMIT");
    const res = await tick;
    expect(res.errors).toBeUndefined();
    expect(res.data!.runHeartbeat.runs.map((r) => r.agentId)).toEqual([b.id]);
    expect(res.data!.runHeartbeat.claims).toHaveLength(1);
    expect(await h.one("SELECT count(*)::int AS n FROM heartbeat_runs WHERE agent_id = $1", [a.id])).toEqual({ n: 0 });
  } finally {
    await held.end();
  }
});
