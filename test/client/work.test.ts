// baton.work(): the agent's life cycle in process, against a real server.
import { Baton, Blocked, Requeue } from "baton/client";
import type { Job, WorkIssue } from "baton/client";
import { createServer, request } from "node:http";
import { connect } from "node:net";
import type { Duplex } from "node:stream";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
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
  const reasons = await h.sql<{ issue_id: string; reason: string }>("SELECT issue_id, reason FROM lock_events WHERE kind = 'RELEASED' AND issue_id = ANY($1)", [[blocked, failed]]);
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
  const events = await h.sql<{ kind: string }>("SELECT kind FROM lock_events WHERE issue_id = $1 AND kind IN ('RELEASED', 'FORCE_RELEASED') ORDER BY seq", [id]);
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
      const forward = request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (answer) => {
          if (dropped === 0 && /claimIssue\(/.test(body.toString())) {
            dropped++;
            answer.resume();
            answer.on("end", () => res.socket?.destroy()); // the claim committed; its answer never arrives
            return;
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.end(body);
    });
  });
  // lockChanges' WebSocket goes straight through.
  proxy.on("upgrade", (req, socket, head) => {
    const upstream = connect(Number(target.port), target.hostname, () => {
      upstream.write(`${req.method} ${req.url} HTTP/1.1\r\n${Object.entries(req.headers).map(([k, v]) => `${k}: ${v}`).join("\r\n")}\r\n\r\n`);
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
    const released = await h.sql<{ reason: string }>("SELECT reason FROM lock_events WHERE issue_id = ANY($1) AND kind = 'RELEASED' AND reason = 'RUN_FINISHED'", [ids]);
    expect(released).toHaveLength(1);
  } finally {
    proxy.closeAllConnections();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
  }
});

it("finishes promptly when its live events cannot connect (a proxy that never answers the WebSocket upgrade)", async () => {
  const co = await createCompany(h, 1);
  const [id] = await issuesFor(co, 1);
  const target = new URL(h.url);
  // Plain HTTP goes through; an upgrade request is left hanging, as some proxies do.
  const proxy = createServer((req, res) => {
    const forward = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(forward);
  });
  const hanging: Duplex[] = [];
  proxy.on("upgrade", (_req, socket: Duplex) => void hanging.push(socket));
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`;
    const worker = new Baton({ url, token: co.agents[0]!.client.token! }).work(async () => {}, { once: true, idleWaitMs: 50 });
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([worker.done.then(() => "done"), new Promise((resolve) => (timer = setTimeout(() => resolve("still running"), 15_000)))]);
    clearTimeout(timer);
    expect(outcome).toBe("done");
    expect(await statuses([id!])).toEqual({ [id!]: "DONE" });
  } finally {
    for (const socket of hanging) socket.destroy();
    proxy.closeAllConnections();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
  }
});
