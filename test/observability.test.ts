// What operators look at: health, readiness and Prometheus metrics.
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "./helpers/harness.js";
import type { Harness } from "./helpers/harness.js";

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
