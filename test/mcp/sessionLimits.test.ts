// The session limits hold under racing `initialize` requests: a key's count is
// taken after its row is locked (every instance), an instance's one at a time.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { mcpUrl } from "../helpers/mcp.js";
import { race } from "../helpers/race.js";

let h: Harness;
let small: string;
let other: string;
beforeAll(async () => {
  h = await startHarness();
  const limits = { mcpSessionsPerKey: 2, mcpSessionsPerInstance: 3 };
  small = (await h.startInstance({ limits })).url;
  other = (await h.startInstance({ limits })).url;
});
afterAll(() => h?.close());

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};
const initialize = (url: string, key: string) =>
  fetch(mcpUrl(url), {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify(INITIALIZE),
  }).then((r) => r.status);

const sessionsOf = async (companyId: string) => (await h.sql("SELECT 1 FROM mcp_sessions WHERE company_id = $1", [companyId])).length;

it("eight racing initializes of one key, on two instances, open exactly mcpSessionsPerKey sessions", async () => {
  for (let round = 0; round < 3; round++) {
    const co = await createCompany(h, 1);
    const key = co.agents[0]!.client.token!;
    const statuses = await race(8, (i) => initialize(i % 2 ? other : small, key));
    expect(statuses.filter((s) => s === 200)).toHaveLength(2);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
    expect(await sessionsOf(co.id)).toBe(2);
    await h.sql("DELETE FROM mcp_sessions");
  }
});

it("eight racing initializes of eight keys on one instance open exactly mcpSessionsPerInstance sessions", async () => {
  for (let round = 0; round < 3; round++) {
    const co = await createCompany(h, 8);
    const statuses = await race(8, (i) => initialize(small, co.agents[i]!.client.token!));
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(await sessionsOf(co.id)).toBe(3);
    await h.sql("DELETE FROM mcp_sessions");
  }
});
