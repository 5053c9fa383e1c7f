// CONFLICT_RETRY (docs/access.md, Errors) says nothing was applied, so the
// SDK sends the request again, a bounded number of times with jittered
// waits (docs/client.md, Retrying): request() answers with the retry's
// answer, and work() releases with it. A proxy in front of the API refuses
// the operations it is told to, as an API whose retries ran out would.
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { Baton, BatonError, Documents } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ADMIN_TOKEN, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const REFUSAL = JSON.stringify({
  errors: [
    {
      message: "concurrent changes to the same rows won every try; nothing was changed: retry",
      extensions: { code: "CONFLICT_RETRY", outcome: "NOT_APPLIED" },
    },
  ],
});

/** A proxy that answers the next `refuse[name]` requests of each named operation CONFLICT_RETRY, and passes the rest; `seen` counts each name's requests. */
async function refusingProxy(apiUrl: string, refuse: Record<string, number>) {
  const target = new URL(apiUrl);
  const seen: Record<string, number> = {};
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const name = /"(?:query|mutation) (\w+)/.exec(body.toString())?.[1] ?? "";
      seen[name] = (seen[name] ?? 0) + 1;
      if ((refuse[name] ?? 0) > 0) {
        refuse[name]!--;
        res.writeHead(200, { "content-type": "application/json" }).end(REFUSAL);
        return;
      }
      const forward = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`,
    seen,
    refuse,
    async close() {
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

it("request() sends a request answered CONFLICT_RETRY again and returns the retry's answer; after 5 tries it throws BatonError CONFLICT_RETRY", async () => {
  const proxy = await refusingProxy(h.url, { Me: 2 });
  try {
    const baton = new Baton({ url: proxy.url, token: ADMIN_TOKEN });
    expect((await baton.request(Documents.MeDocument, {})).me.role).toBe("ADMIN");
    expect(proxy.seen.Me).toBe(3);
    proxy.refuse.Me = 100;
    const error = await baton.request(Documents.MeDocument, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BatonError);
    expect(error).toMatchObject({ code: "CONFLICT_RETRY" });
    expect(proxy.seen.Me).toBe(3 + 5);
  } finally {
    await proxy.close();
  }
});

it("work(): a release answered CONFLICT_RETRY is sent again, and the issue ends DONE", async () => {
  const co = await createCompany(h, 1);
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "one", assigneeAgentId: co.agents[0]!.id } });
  const proxy = await refusingProxy(h.url, { WorkRelease: 2 });
  try {
    const worker = new Baton({ url: proxy.url, token: co.agents[0]!.client.token! }).work(() => {}, { once: true, idleWaitMs: 100 });
    await worker.done;
    expect(proxy.seen.WorkRelease).toBe(3);
    expect(await h.one("SELECT status, attempt_count FROM issues WHERE id = $1", [createIssue.id])).toEqual({ status: "DONE", attempt_count: 1 });
  } finally {
    await proxy.close();
  }
});
