// The instances keep the runs of recent MCP sessions alive between requests
// (EXTEND_SESSION_LEASES_IF_LIVE, src/mcp/http/sessions.ts): that is
// heartbeatRun for each of them, so it extends only a live run's lease. A run
// whose lease ran out is dead, whatever its session: the keeper never revives
// it, and the sweep takes its holds back as for any dead run.
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { assignedIssues } from "../helpers/cli.js";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

let h: Harness;
const clients: McpClient[] = [];

beforeAll(async () => {
  // A 3 s lease: the keeper runs every second.
  h = await startHarness({ leaseSeconds: 3 });
});
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => {});
  await h?.close();
});

async function session(token: string): Promise<McpClient> {
  const client = new McpClient({ name: "keeper-test", version: "1" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(h.url.replace(/\/graphql$/, "/mcp")), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
  );
  clients.push(client);
  return client;
}

const claimed = async (client: McpClient) => {
  const answer = await client.callTool({ name: "claim_next_issue", arguments: {} });
  return (answer.structuredContent as { issue: { id: string } }).issue.id;
};

const runOf = async (issueId: string) =>
  h.one<{ id: string; status: string; lease_ms: number; beat: Date }>(
    `SELECT r.id, r.status, (extract(epoch FROM r.lease_expires_at - now()) * 1000)::int AS lease_ms, r.last_heartbeat_at AS beat
       FROM issues i JOIN heartbeat_runs r ON r.id = i.checkout_run_id WHERE i.id = $1`,
    [issueId],
  );

it("keeps a quiet session's run alive past its lease, and never revives a run whose lease ran out", async () => {
  const co = await createCompany(h, 2);
  await assignedIssues(co, 1);
  const other = (await h.one<{ id: string }>("SELECT id FROM agents WHERE company_id = $1 AND id <> $2", [co.id, co.agents[0]!.id])).id;
  await h.sql("INSERT INTO issues (company_id, title, assignee_agent_id) VALUES ($1, 'for the other agent', $2)", [co.id, other]);
  const quiet = await claimed(await session(co.agents[0]!.client.token!));
  const stalled = await claimed(await session(co.agents[1]!.client.token!));
  const stalledRun = await runOf(stalled);

  // The stalled session's run loses its lease (as if its every instance had stopped for longer than it).
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [stalledRun.id]);
  const backdated = Date.now();

  // The quiet session makes no request for longer than a lease, and its run is kept alive all along.
  const first = await runOf(quiet);
  await eventually(async () => {
    const run = await runOf(quiet);
    expect(run.status).toBe("RUNNING");
    expect(run.lease_ms).toBeGreaterThan(0);
    return run.beat.getTime() - first.beat.getTime() > 3_000 && run.beat.getTime() > backdated + 1_000 ? true : undefined;
  }, "the quiet session's run to be kept alive for more than one lease");

  // Ticks of the keeper have passed since the backdating: the dead run was not revived.
  const dead = await h.one<{ status: string; lease_ms: number }>(
    "SELECT status, (extract(epoch FROM lease_expires_at - now()) * 1000)::int AS lease_ms FROM heartbeat_runs WHERE id = $1",
    [stalledRun.id],
  );
  expect(dead.status).toBe("RUNNING");
  expect(dead.lease_ms).toBeLessThan(0);

  // The sweep takes the dead run's hold back; the quiet session's is untouched.
  await sweep(h.db.prisma, h.bus);
  const issues = await h.sql<{ id: string; status: string }>("SELECT id, status FROM issues WHERE id = ANY($1) ORDER BY id", [[quiet, stalled]]);
  expect(Object.fromEntries(issues.map((i) => [i.id, i.status]))).toEqual({ [quiet]: "IN_PROGRESS", [stalled]: "OPEN" });
});
