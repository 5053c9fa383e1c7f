// What operators look at: health, readiness and Prometheus metrics.
import { afterAll, beforeAll, expect, it } from "vitest";
import { TIME_IN_STATUS_BUCKETS } from "../../src/metrics.js";
import { StatusTimes } from "../../src/reads/statusTimes.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";

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
  await h.sql("UPDATE heartbeat_runs SET last_heartbeat_at = now() - interval '40 seconds', lease_expires_at = now() + interval '20 seconds' WHERE id = $1", [
    run.id,
  ]);
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
  // Partitions run a week past today (up to 8 days from now, depending on the hour).
  expect(metric(text, "baton_ledger_partitions_ahead_days")).toBeGreaterThan(7);
  expect(metric(text, "baton_ledger_partitions_ahead_days")).toBeLessThanOrEqual(8);
});

it("times each status issues leave, from the ledger: per issue, on /metrics, and skipping what retention dropped", async () => {
  const metric = (text: string, pattern: string) => Number(new RegExp(`^${pattern} (\\S+)`, "m").exec(text)?.[1] ?? 0);
  const series = (text: string, status: string) => ({
    buckets: TIME_IN_STATUS_BUCKETS.map((le) => metric(text, `baton_time_in_status_seconds_bucket\\{le="${le}",status="${status}"\\}`)),
    count: metric(text, `baton_time_in_status_seconds_count\\{status="${status}"\\}`),
    sum: metric(text, `baton_time_in_status_seconds_sum\\{status="${status}"\\}`),
  });
  // /metrics reads the ledger with its fleet snapshot, at most every few seconds: a read that began
  // after every event so far was final is one whose ledger age differs from what was served then.
  const freshRead = async () => {
    await eventually(
      async () =>
        (await h.one<{ held: boolean }>("SELECT EXISTS (SELECT 1 FROM lock_events WHERE seq >= baton_event_horizon()) AS held")).held ? undefined : true,
      "every event final",
    );
    const stale = metric(await (await get("/metrics")).text(), "baton_ledger_oldest_event_seconds");
    return eventually(async () => {
      const t = await (await get("/metrics")).text();
      return metric(t, "baton_ledger_oldest_event_seconds") !== stale ? t : undefined;
    }, "a fresh ledger read");
  };
  /** The histogram's change between two /metrics texts is exactly these times, per status. */
  const expectHistogramDelta = (beforeText: string, afterText: string, expected: Record<string, number[]>) => {
    for (const status of ["BACKLOG", "OPEN", "CLAIMED", "IN_PROGRESS", "BLOCKED", "DONE", "CANCELLED", "ESCALATED"]) {
      const seconds = expected[status] ?? [];
      const [before, after] = [series(beforeText, status), series(afterText, status)];
      expect({ status, buckets: after.buckets.map((n, i) => n - before.buckets[i]!), count: after.count - before.count }).toEqual({
        status,
        buckets: TIME_IN_STATUS_BUCKETS.map((le) => seconds.filter((s) => s <= le).length),
        count: seconds.length,
      });
      expect(after.sum - before.sum).toBeCloseTo(
        seconds.reduce((t, s) => t + s, 0),
        3,
      );
    }
  };
  const beforeText = await freshRead();

  // This reader starts at the ledger's end: the events of the tests above are not replayed.
  const reader = new StatusTimes(h.db.prisma);
  await reader.start();
  // and one that may read only one event per company at a time: it catches up over several reads
  const bounded = new StatusTimes(h.db.prisma, 1, 1);
  await bounded.start();
  const co = await createCompany(h, 2);
  const [a, b] = [co.agents[0]!, co.agents[1]!];
  const runA = (await a.client.ok(Ops.StartRunDocument)).startRun;
  const runB = (await b.client.ok(Ops.StartRunDocument)).startRun;
  const create = async (title: string, status?: "BACKLOG") => (await co.board.ok(Ops.CreateIssueDocument, { input: { title, status } })).createIssue.id;
  const [x, y, w, z] = [await create("x"), await create("y", "BACKLOG"), await create("w"), await create("z")];

  // x: OPEN → CLAIMED → IN_PROGRESS → DONE
  await a.client.ok(Ops.ClaimIssueDocument, { runId: runA.id, issueId: x });
  await a.client.ok(Ops.AcquireExecutionDocument, { runId: runA.id, issueId: x });
  await a.client.ok(Ops.ReleaseIssueDocument, { runId: runA.id, issueId: x, outcome: "DONE" });
  // y: BACKLOG → OPEN → CLAIMED → OPEN (requeued) → CLAIMED → CLAIMED (adopted from a dead run) → IN_PROGRESS → BLOCKED → OPEN
  await co.board.ok(Ops.UpdateIssueDocument, { id: y, input: { status: "OPEN" } });
  await a.client.ok(Ops.ClaimIssueDocument, { runId: runA.id, issueId: y });
  await a.client.ok(Ops.ReleaseIssueDocument, { runId: runA.id, issueId: y, outcome: "REQUEUE" });
  await a.client.ok(Ops.ClaimIssueDocument, { runId: runA.id, issueId: y });
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [runA.id]);
  const { claimIssue } = await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: y, expectedStatuses: ["CLAIMED"] });
  expect(claimIssue).toMatchObject({ __typename: "IssueClaimed", adopted: true });
  await b.client.ok(Ops.AcquireExecutionDocument, { runId: runB.id, issueId: y });
  await b.client.ok(Ops.ReleaseIssueDocument, { runId: runB.id, issueId: y, outcome: "BLOCKED" });
  await co.board.ok(Ops.UpdateIssueDocument, { id: y, input: { status: "OPEN" } });
  // w: OPEN → CLAIMED; z: OPEN → CLAIMED → IN_PROGRESS
  await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: w });
  await b.client.ok(Ops.ClaimIssueDocument, { runId: runB.id, issueId: z });
  await b.client.ok(Ops.AcquireExecutionDocument, { runId: runB.id, issueId: z });

  // The times, on the database clock: created `created` s before a base instant, the issue's events (in seq order) `at` s after it.
  const { base } = await h.one<{ base: string }>("SELECT now()::text AS base");
  const timeline = async (issueId: string, created: number | null, at: number[]) => {
    if (created !== null) await h.sql("UPDATE issues SET created_at = $2::timestamptz - make_interval(secs => $3) WHERE id = $1", [issueId, base, created]);
    const seqs = (await h.sql<{ seq: string }>("SELECT seq::text FROM lock_events WHERE company_id = $1 AND issue_id = $2 ORDER BY seq", [co.id, issueId])).map(
      (r) => r.seq,
    );
    expect(seqs).toHaveLength(at.length);
    for (const [i, seq] of seqs.entries()) {
      await h.sql("UPDATE lock_events SET at = $3::timestamptz + make_interval(secs => $4) WHERE company_id = $1 AND seq = $2", [co.id, seq, base, at[i]]);
    }
  };
  await timeline(x, 3600, [0, 10, 1010]);
  await timeline(y, 7200, [0, 100, 105, 155, 175, 205, 207, 1107]);
  await timeline(w, 30, [0]);
  await timeline(z, 600, [0, 20]);
  await h.settled(co.id);
  await reader.advance();
  const taken = reader.take();
  const of = (issueId: string) => taken.filter((t) => t.issueId === issueId).map((t) => [t.status, t.seconds]);
  expect(taken.every((t) => [x, y, w, z].includes(t.issueId))).toBe(true); // nothing from before the start
  expect(of(x)).toEqual([
    ["OPEN", 3600],
    ["CLAIMED", 10],
    ["IN_PROGRESS", 1000],
  ]);
  // the adoption continues the CLAIMED run: 155 → 205
  expect(of(y)).toEqual([
    ["BACKLOG", 7200],
    ["OPEN", 100],
    ["CLAIMED", 5],
    ["OPEN", 50],
    ["CLAIMED", 50],
    ["IN_PROGRESS", 2],
    ["BLOCKED", 900],
  ]);
  expect(of(w)).toEqual([["OPEN", 30]]);
  expect(of(z)).toEqual([
    ["OPEN", 600],
    ["CLAIMED", 20],
  ]);
  expect(taken).toHaveLength(13);
  expect(reader.take()).toEqual([]); // given out once
  let reads = 0;
  do {
    await bounded.advance();
    reads++;
  } while (bounded.behind > 0 && reads < 100);
  expect(reads).toBeGreaterThanOrEqual(14); // x's, y's, w's and z's events, one a read (the last read finds the end)
  expect(bounded.take()).toEqual(taken);
  expect([bounded.behind, bounded.lagSeconds]).toEqual([0, 0]);

  // Retention drops w's and z's claims. z's IN_PROGRESS began at an event still kept: it is timed.
  // w's first event kept is its acquire: its CLAIMED run began at an event that is gone (and its
  // lockEpoch says a claim is missing), so that change is skipped rather than timed from creation.
  await h.sql("DELETE FROM lock_events WHERE company_id = $1 AND issue_id = ANY($2::uuid[]) AND kind = 'CLAIMED'", [co.id, [w, z]]);
  await b.client.ok(Ops.AcquireExecutionDocument, { runId: runB.id, issueId: w });
  await b.client.ok(Ops.ReleaseIssueDocument, { runId: runB.id, issueId: w, outcome: "DONE" });
  await b.client.ok(Ops.ReleaseIssueDocument, { runId: runB.id, issueId: z, outcome: "REQUEUE" });
  await timeline(w, null, [100, 160]);
  await timeline(z, null, [20, 320]);
  await h.settled(co.id);
  await reader.advance();
  expect(reader.take().map((t) => [t.issueId, t.status, t.seconds])).toEqual([
    [w, "IN_PROGRESS", 60],
    [z, "IN_PROGRESS", 300],
  ]);

  // /metrics: after the same changes, with w's and z's claims gone, its own reader (read after both
  // phases) finds what this one found in the second phase, and in the first only x's and y's.
  const afterText = await freshRead();
  expect(afterText).toMatch(/^baton_time_in_status_lag_seconds 0$/m);
  expectHistogramDelta(beforeText, afterText, {
    BACKLOG: [7200],
    OPEN: [3600, 100, 50],
    CLAIMED: [10, 5, 50],
    IN_PROGRESS: [1000, 2, 60, 300],
    BLOCKED: [900],
  });
});
