// baton.work(): the agent's life cycle in process, against a real server.
import { Baton, Blocked, Requeue, UnauthenticatedError } from "baton/client";
import type { Job, WorkIssue } from "baton/client";
import { createServer, request } from "node:http";
import { connect } from "node:net";
import type { Duplex } from "node:stream";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const statuses = async (ids: string[]) =>
  Object.fromEntries((await h.sql<{ id: string; status: string }>("SELECT id, status FROM issues WHERE id = ANY($1)", [ids])).map((r) => [r.id, r.status]));

/**
 * A proxy in front of the API that passes plain HTTP and leaves every WebSocket upgrade hanging, as
 * some proxies do: a worker behind it has no live events, only its requests (`operations`: their names,
 * in order).
 */
async function hangingWebSocketProxy(apiUrl: string): Promise<{ url: string; operations: string[]; close(): Promise<void> }> {
  const target = new URL(apiUrl);
  const operations: string[] = [];
  const proxy = createServer((req, res) => {
    const forward = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.on("data", (chunk: Buffer) => {
      const name = /"(?:query|mutation) (\w+)/.exec(chunk.toString())?.[1];
      if (name) operations.push(name);
    });
    req.pipe(forward);
  });
  const hanging: Duplex[] = [];
  proxy.on("upgrade", (_req, socket: Duplex) => void hanging.push(socket));
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`,
    operations,
    async close() {
      for (const socket of hanging) socket.destroy();
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

/** How a promise settles, or a failure if it has not within `ms`. */
async function settles(promise: Promise<unknown>, ms: number, what: string): Promise<{ value?: unknown; error?: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    promise.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ),
    new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), ms))),
  ]);
  clearTimeout(timer);
  if (outcome === "timeout") throw new Error(`${what}: not settled after ${ms} ms`);
  return outcome;
}

async function issuesFor(co: Company, n: number, input: Record<string, unknown> = {}) {
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: Array.from({ length: n }, (_, i) => ({ title: `job ${i}`, assigneeAgentId: co.agents[0]!.id, ...input })),
  });
  return createIssues.map((i) => i.id);
}

it("with once, drains the queue: each issue handled once, every one DONE, the run finished", async () => {
  const co = await createCompany(h, 1);
  const ids = await issuesFor(co, 20);
  const handled: string[] = [];
  const jobs: Job[] = [];
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async (issue, job) => {
      handled.push(issue.id);
      jobs.push(job);
      await new Promise((r) => setTimeout(r, 5));
    },
    { concurrency: 4, once: true },
  );
  await worker.done;
  expect(handled.sort()).toEqual([...ids].sort());
  expect(Object.values(await statuses(ids))).toEqual(Array(20).fill("DONE"));
  expect(jobs.every((j) => j.attempt === 1 && j.lockEpoch >= 1 && !j.signal.aborted)).toBe(true);
  const run = await h.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [jobs[0]!.runId]);
  expect(run.status).toBe("SUCCEEDED");
});

it("a concurrency whose batch claim the API refuses as too large an answer (maxResponseChars) claims in smaller batches, and drains the queue", async () => {
  const co = await createCompany(h, 1);
  const ids = await issuesFor(co, 150);
  const log: { message: string; fields?: Record<string, unknown> }[] = [];
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(() => new Promise((r) => setTimeout(r, 20)), {
    concurrency: 200, // 200 issues of up to 100,000 characters of description each: over the 6,000,000 an answer may be
    once: true,
    onLog: (message, fields) => log.push({ message, ...(fields ? { fields } : {}) }),
  });
  const { error } = await settles(worker.done, 30_000, "the worker to drain 150 issues");
  expect(error).toBeUndefined();
  expect(Object.values(await statuses(ids))).toEqual(Array(150).fill("DONE"));
  expect(log.filter((l) => l.message === "claim failed")).toEqual([]);
  // Halved each time it was refused (how often depends on how large the API reckons an issue may be), then kept.
  const limits = log.filter((l) => l.message.startsWith("claiming fewer")).map((l) => l.fields?.limit as number);
  expect(limits).toEqual(limits.map((_, i) => Math.floor(200 / 2 ** (i + 1))));
  expect(limits.length).toBeGreaterThan(0);
});

it("a handler that throws Requeue leaves the issue OPEN with the attempt counted once", async () => {
  const co = await createCompany(h, 1);
  const [id] = await issuesFor(co, 1);
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    () => {
      void worker.stop(); // so that it is not taken again
      throw new Requeue("not now");
    },
    { concurrency: 1, idleWaitMs: 200 },
  );
  await worker.done;
  expect(await h.one("SELECT status, attempt_count FROM issues WHERE id = $1", [id])).toEqual({ status: "OPEN", attempt_count: 1 });
  const released = await h.one<{ reason: string }>("SELECT reason FROM lock_events WHERE issue_id = $1 AND kind = 'RELEASED'", [id]);
  expect(released.reason).toMatch(/REQUEUE.*not now/);
});

it("Blocked ends in BLOCKED and any other throw in FAILED, each with its message as the reason", async () => {
  const co = await createCompany(h, 1);
  const [blocked] = await issuesFor(co, 1);
  const [failed] = await issuesFor(co, 1, { maxAttempts: 1 }); // FAILED with no attempt left: ESCALATED, not claimed again
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    (issue: WorkIssue) => {
      if (issue.id === blocked) throw new Blocked("waiting on a review");
      throw new Error("the build broke");
    },
    { concurrency: 2, once: true },
  );
  await worker.done;
  expect(await statuses([blocked!, failed!])).toEqual({ [blocked!]: "BLOCKED", [failed!]: "ESCALATED" });
  const reasons = await h.sql<{ issue_id: string; reason: string }>("SELECT issue_id, reason FROM lock_events WHERE kind = 'RELEASED' AND issue_id = ANY($1)", [
    [blocked, failed],
  ]);
  expect(reasons.find((r) => r.issue_id === blocked)?.reason).toMatch(/BLOCKED.*waiting on a review/);
  expect(reasons.find((r) => r.issue_id === failed)?.reason).toMatch(/FAILED.*the build broke/);
});

it("aborts job.signal with a reason the moment the hold is lost, and does not release the issue again", async () => {
  const co = await createCompany(h, 1);
  const [id] = await issuesFor(co, 1);
  let aborted: unknown = null;
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async (_issue, job) => {
      started();
      await new Promise<void>((resolve) =>
        job.signal.addEventListener("abort", () => {
          void worker.stop(); // the issue is OPEN again: this test's worker must not take it back
          resolve();
        }),
      );
      aborted = job.signal.reason;
    },
    { concurrency: 1, idleWaitMs: 200 },
  );
  await running;
  const { forceReleaseIssue } = await co.board.ok(Ops.ForceReleaseDocument, { issueId: id!, reason: "taken back by the board" });
  expect(forceReleaseIssue.__typename).toBe("IssueReleased");
  await eventually(() => (aborted ? true : undefined), "the handler to see its hold lost");
  expect(String((aborted as Error).message)).toMatch(/FORCE_RELEASED/);
  await worker.stop();
  const events = await h.sql<{ kind: string }>("SELECT kind FROM lock_events WHERE issue_id = $1 AND kind IN ('RELEASED', 'FORCE_RELEASED') ORDER BY seq", [
    id,
  ]);
  expect(events.map((e) => e.kind)).toEqual(["FORCE_RELEASED"]);
});

it("stop() lets a running handler finish, releases it, and finishes the run", async () => {
  const co = await createCompany(h, 1);
  const [id] = await issuesFor(co, 1);
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  let finish!: () => void;
  const gate = new Promise<void>((resolve) => (finish = resolve));
  let runId = "";
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async (_issue, job) => {
      runId = job.runId;
      started();
      await gate;
    },
    { concurrency: 1, idleWaitMs: 200 },
  );
  await running;
  const stopping = worker.stop();
  finish();
  await stopping;
  expect((await statuses([id!]))[id!]).toBe("DONE");
  expect((await h.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [runId])).status).toBe("SUCCEEDED");
});

it("beforeClaim throwing stops the worker before that claim: nothing more is taken, the running handler finishes, done rejects with it", async () => {
  const co = await createCompany(h, 1);
  const ids = await issuesFor(co, 3);
  const gone = new Error("the command is gone");
  let checks = 0;
  const handled: string[] = [];
  const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(
    async (issue) => {
      handled.push(issue.id);
      await new Promise((r) => setTimeout(r, 50));
    },
    {
      concurrency: 1,
      idleWaitMs: 200,
      beforeClaim: () => {
        if (++checks > 1) throw gone;
      },
    },
  );
  await expect(worker.done).rejects.toBe(gone);
  expect(checks).toBe(2);
  const rows = await h.sql<{ id: string; status: string; attempt_count: number }>("SELECT id, status, attempt_count FROM issues WHERE id = ANY($1)", [ids]);
  expect(rows.filter((r) => r.status === "DONE").map((r) => r.id)).toEqual(handled);
  expect(rows.filter((r) => r.id !== handled[0]).map((r) => [r.status, r.attempt_count])).toEqual([
    ["OPEN", 0],
    ["OPEN", 0],
  ]);
  const runs = await h.sql<{ status: string }>("SELECT status FROM heartbeat_runs WHERE agent_id = $1", [co.agents[0]!.id]);
  expect(runs.map((r) => r.status)).toEqual(["SUCCEEDED"]);
});

it("refuses a key that is not an agent's", async () => {
  const co = await createCompany(h, 0);
  const worker = new Baton({ url: h.url, token: co.board.token! }).work(() => {});
  await expect(worker.done).rejects.toMatchObject({ name: "BatonError", code: "FORBIDDEN" });
});

it("a claim whose answer is lost leaves no issue stranded: the worker finishes that run (releasing it) and goes on with a new one", async () => {
  const co = await createCompany(h, 1);
  const ids = await issuesFor(co, 3);
  // An HTTP proxy in front of the API that forwards the first claim and then drops the connection instead of answering.
  const target = new URL(h.url);
  let dropped = 0;
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const forward = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        if (dropped === 0 && /claimIssue\(/.test(body.toString())) {
          dropped++;
          answer.resume();
          answer.on("end", () => res.socket?.destroy()); // the claim committed; its answer never arrives
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      forward.end(body);
    });
  });
  // lockChanges' WebSocket goes straight through.
  proxy.on("upgrade", (req, socket, head) => {
    const upstream = connect(Number(target.port), target.hostname, () => {
      upstream.write(
        `${req.method} ${req.url} HTTP/1.1\r\n${Object.entries(req.headers)
          .map(([k, v]) => `${k}: ${v}`)
          .join("\r\n")}\r\n\r\n`,
      );
      upstream.write(head);
      upstream.pipe(socket).pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`;
  try {
    const handled: string[] = [];
    const runs = new Set<string>();
    const worker = new Baton({ url, token: co.agents[0]!.client.token! }).work(
      async (issue, job) => {
        handled.push(issue.id);
        runs.add(job.runId);
      },
      { concurrency: 1, once: true, idleWaitMs: 50 },
    );
    await worker.done;
    expect(dropped).toBe(1);
    // The issue claimed by the lost request was released by finishRun and worked by the next run: all three done, each once.
    expect(handled.sort()).toEqual([...ids].sort());
    expect(Object.values(await statuses(ids))).toEqual(["DONE", "DONE", "DONE"]);
    expect(runs.size).toBeGreaterThanOrEqual(1);
    const released = await h.sql<{ reason: string }>(
      "SELECT reason FROM lock_events WHERE issue_id = ANY($1) AND kind = 'RELEASED' AND reason = 'RUN_FINISHED'",
      [ids],
    );
    expect(released).toHaveLength(1);
  } finally {
    proxy.closeAllConnections();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
  }
});

it("finishes promptly when its live events cannot connect (a proxy that never answers the WebSocket upgrade)", async () => {
  const co = await createCompany(h, 1);
  const [id] = await issuesFor(co, 1);
  // Plain HTTP goes through; an upgrade request is left hanging, as some proxies do.
  const proxy = await hangingWebSocketProxy(h.url);
  try {
    const worker = new Baton({ url: proxy.url, token: co.agents[0]!.client.token! }).work(async () => {}, { once: true, idleWaitMs: 50 });
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      worker.done.then(() => "done"),
      new Promise((resolve) => (timer = setTimeout(() => resolve("still running"), 15_000))),
    ]);
    clearTimeout(timer);
    expect(outcome).toBe("done");
    expect(await statuses([id!])).toEqual({ [id!]: "DONE" });
  } finally {
    await proxy.close();
  }
});

describe("the key revoked while the worker works (docs/client.md, When the key is revoked)", () => {
  const disable = (co: Company, reason: string) =>
    co.board.raw<{ disableAgent: { disabledAt: string | null } }>(`mutation($a: ID!, $r: String!) { disableAgent(agentId: $a, reason: $r) { disabledAt } }`, {
      a: co.agents[0]!.id,
      r: reason,
    });
  const rotate = (co: Company) =>
    co.board.raw<{ rotateAgentKey: { apiKey: string } }>(`mutation($a: ID!) { rotateAgentKey(agentId: $a) { apiKey } }`, { a: co.agents[0]!.id });
  const ledger = async (db: Pick<Harness, "sql">, id: string) =>
    (await db.sql<{ kind: string; reason: string | null }>("SELECT kind, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq", [id])).map(
      (e) => `${e.kind}${e.reason ? ` ${e.reason}` : ""}`,
    );

  /** A handler that holds its issue until its signal is aborted, then returns (which, released, would be DONE). */
  function holding() {
    let job: Job | null = null;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const handler = async (_issue: WorkIssue, j: Job) => {
      job = j;
      started();
      await new Promise<void>((resolve) => (j.signal.aborted ? resolve() : j.signal.addEventListener("abort", () => resolve(), { once: true })));
    };
    return { handler, running, job: () => job! };
  }

  it("the agent disabled: the live events end UNAUTHENTICATED, job.signal is aborted, nothing is released, done rejects with UnauthenticatedError", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issuesFor(co, 1);
    const held = holding();
    const logged: string[] = [];
    // Concurrency 1 and a 60 s lease: while its one job runs, the worker's only requests are a heartbeat every 20 s;
    // within the deadline below, only the ledger watch can tell it.
    const worker = new Baton({ url: h.url, token: co.agents[0]!.client.token! }).work(held.handler, {
      concurrency: 1,
      idleWaitMs: 200,
      onLog: (m) => logged.push(m),
    });
    await held.running;
    expect(await statuses([id!])).toEqual({ [id!]: "IN_PROGRESS" });
    const disabled = await disable(co, "rotated out");
    expect(disabled.errors).toBeUndefined();
    const { error } = await settles(worker.done, 10_000, "worker.done after the agent was disabled");
    expect(error).toBeInstanceOf(UnauthenticatedError);
    expect(error).toMatchObject({ name: "UnauthenticatedError", code: "UNAUTHENTICATED" });
    expect(held.job().signal.aborted).toBe(true);
    // The disable took the issue back; the worker released nothing and finished nothing.
    expect(await ledger(h, id!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "RECOVERED AGENT_DISABLED"]);
    expect((await h.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [held.job().runId])).status).toBe("CANCELLED");
    expect(logged).not.toContain("run finished");
  });

  it("the key rotated, live events cut off: the heartbeat's UNAUTHENTICATED aborts the job with the UnauthenticatedError done rejects with", async () => {
    // A 3 s lease: a heartbeat every second, the one request the worker makes while its one job runs.
    const short = await startHarness({ leaseSeconds: 3 });
    const proxy = await hangingWebSocketProxy(short.url);
    try {
      const co = await createCompany(short, 1);
      const [id] = await issuesFor(co, 1);
      const held = holding();
      const worker = new Baton({ url: proxy.url, token: co.agents[0]!.client.token! }).work(held.handler, { concurrency: 1, idleWaitMs: 200 });
      await held.running;
      const rotated = await rotate(co);
      expect(rotated.errors).toBeUndefined();
      const { error } = await settles(worker.done, 10_000, "worker.done after the key was rotated");
      expect(error).toBeInstanceOf(UnauthenticatedError);
      expect(held.job().signal.reason).toBe(error);
      // Not released, and the run not finished: the old key could do neither. The issue comes back with the lease.
      expect(await ledger(short, id!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED"]);
      expect(await short.one("SELECT status, checkout_run_id FROM issues WHERE id = $1", [id])).toEqual({
        status: "IN_PROGRESS",
        checkout_run_id: held.job().runId,
      });
      expect((await short.one<{ status: string }>("SELECT status FROM heartbeat_runs WHERE id = $1", [held.job().runId])).status).toBe("RUNNING");
    } finally {
      await proxy.close();
      await short.close();
    }
  });

  it("the key rotated, live events cut off: a release answered UNAUTHENTICATED ends the worker, which sends nothing more", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issuesFor(co, 1);
    const proxy = await hangingWebSocketProxy(h.url);
    try {
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      let finish!: () => void;
      const gate = new Promise<void>((resolve) => (finish = resolve));
      const handled: string[] = [];
      let runId = "";
      const worker = new Baton({ url: proxy.url, token: co.agents[0]!.client.token! }).work(
        async (issue, job) => {
          handled.push(issue.id);
          runId = job.runId;
          started();
          await gate;
        },
        { concurrency: 1, idleWaitMs: 100 },
      );
      await running;
      expect((await rotate(co)).errors).toBeUndefined();
      const before = proxy.operations.length;
      finish(); // the handler returns: its release goes out with the rotated key
      const { error } = await settles(worker.done, 10_000, "worker.done after a refused release");
      expect(error).toBeInstanceOf(UnauthenticatedError);
      // The release, and not a claim, a new run or a finishRun after it (a heartbeat is 20 s away).
      expect(proxy.operations.slice(before)).toEqual(["WorkRelease"]);
      expect(handled).toEqual([id]);
      expect(await ledger(h, id!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED"]);
      expect(await h.one("SELECT status, checkout_run_id FROM issues WHERE id = $1", [id])).toEqual({ status: "IN_PROGRESS", checkout_run_id: runId });
    } finally {
      await proxy.close();
    }
  });
});
