// What operators look at: health, readiness and Prometheus metrics.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "./helpers/harness.js";
import type { Harness } from "./helpers/harness.js";
import { eventually } from "./helpers/race.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const get = (path: string) => fetch(h.url.replace("/graphql", path));

it("answers /healthz and /readyz", async () => {
  expect(await (await get("/healthz")).json()).toEqual({ status: "ok" });
  const ready = await get("/readyz");
  expect(ready.status).toBe(200);
  expect(await ready.json()).toEqual({ status: "ready", database: "up", pubsub: "up" });
});

it("counts claims, conflicts, releases, adoptions, publishes and request latency on /metrics", async () => {
  const co = await createCompany(h, 2);
  const [a, b] = [co.agents[0]!, co.agents[1]!];
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "m" } });
  const runA = (await a.client.ok(Ops.StartRunDocument)).startRun;
  const runB = (await b.client.ok(Ops.StartRunDocument)).startRun;
  await a.client.ok(Ops.ClaimIssueDocument, { runId: runA.id, issueId: createIssue.id });
  await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: createIssue.id, expectedStatuses: ["CLAIMED"] });
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [runA.id]);
  await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: createIssue.id, expectedStatuses: ["CLAIMED"] });
  await b.client.ok(Ops.ReleaseIssueDocument, { runId: runB.id, issueId: createIssue.id, outcome: "REQUEUE" });
  const text = await (await get("/metrics")).text();
  const value = (pattern: string) => Number(new RegExp(`^${pattern} (\\d+)`, "m").exec(text)?.[1]);
  expect(value(`baton_mutation_outcomes_total\\{mutation="claimIssue",outcome="IssueClaimed"\\}`)).toBe(2);
  expect(value(`baton_mutation_outcomes_total\\{mutation="claimIssue",outcome="CheckoutConflict"\\}`)).toBe(1);
  expect(value(`baton_mutation_outcomes_total\\{mutation="releaseIssue",outcome="IssueReleased"\\}`)).toBe(1);
  expect(value("baton_adoptions_total")).toBe(1);
  expect(value("baton_events_published_total")).toBe(3);
  expect(value("baton_event_publish_failures_total")).toBe(0);
  expect(value(`baton_http_request_duration_seconds_count\\{path="/graphql",status="200"\\}`)).toBeGreaterThanOrEqual(8);
});

it("times first claims, and reports each company's oldest claimable issue, late heartbeats and the ledger's size and age", async () => {
  const co = await createCompany(h, 1);
  const agent = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, { inputs: [{ title: "waited an hour" }, { title: "waits a day" }] });
  const [hour, day] = createIssues.map((i) => i.id) as [string, string];
  await h.sql("UPDATE issues SET created_at = now() - interval '1 hour' WHERE id = $1", [hour]);
  await h.sql("UPDATE issues SET created_at = now() - interval '1 day', priority = 'LOW' WHERE id = $1", [day]);
  const metric = (text: string, pattern: string) => Number(new RegExp(`^${pattern} (\\S+)`, "m").exec(text)?.[1]);
  const beforeText = await (await get("/metrics")).text();
  const waited = (t: string, le: string) => metric(t, `baton_time_to_first_claim_seconds_bucket\\{le="${le}"\\}`);

  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, includeUnassigned: true });
  expect(claimIssue).toMatchObject({ __typename: "IssueClaimed", issue: { id: hour, lockEpoch: 1 } });
  // the same issue again is no first claim, nor is a re-claim after a requeue
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: hour, expectedStatuses: ["CLAIMED"] });
  await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: hour, outcome: "REQUEUE" });
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: hour });
  // the run's heartbeat is late: more than half its lease ago
  await h.sql("UPDATE heartbeat_runs SET last_heartbeat_at = now() - interval '40 seconds', lease_expires_at = now() + interval '20 seconds' WHERE id = $1", [run.id]);
  await h.sql("ANALYZE lock_events");

  const label = `\\{company="${co.id}"\\}`;
  // /metrics reads the database at most every few seconds: wait for a read made after the changes above.
  const text = await eventually(async () => {
    const t = await (await get("/metrics")).text();
    return metric(t, `baton_oldest_claimable_issue_seconds${label}`) >= 86_400 && metric(t, "baton_runs_heartbeat_late") >= 1 ? t : undefined;
  }, "a fresh fleet snapshot");
  // one first claim, which waited an hour on the database clock (claimedAt − createdAt): above 900 s, within 4 h
  expect(metric(text, "baton_time_to_first_claim_seconds_count") - metric(beforeText, "baton_time_to_first_claim_seconds_count")).toBe(1);
  expect(waited(text, "900") - waited(beforeText, "900")).toBe(0);
  expect(waited(text, "14400") - waited(beforeText, "14400")).toBe(1);
  expect(metric(text, `baton_oldest_claimable_issue_seconds${label}`)).toBeLessThan(86_400 + 60);
  expect(metric(text, "baton_ledger_rows")).toBeGreaterThanOrEqual(4);
  expect(metric(text, "baton_ledger_oldest_event_seconds")).toBeGreaterThan(0);
});
