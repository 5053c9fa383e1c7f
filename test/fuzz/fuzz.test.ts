// The fuzzer (test/fuzz/run.ts, issue 12 item 6) with a fixed seed: a few
// thousand requests generated from schema.graphql, valid and malformed, over
// HTTP and WebSocket, as every role, against the real API as its own process.
// Zero violations: no crash, no 5xx, no INTERNAL_SERVER_ERROR, no error
// without a code, no answer that is not JSON, no stack or path shown, no
// Problem without a message, no data for a role or company that may not have
// it; afterwards /healthz answers and lockAudit finds no double claim and no
// half-released lock. A failure prints the summary and the violating cases,
// each with the command that sends it again (`npm run fuzz -- --seed … --only …`).
import { expect, it } from "vitest";
import { loadSchema, problemTypesOf, ROLES } from "./generate.js";
import { formatReport, runFuzz } from "./run.js";

const SEED = 20_261_206;
const COUNT = 2_500;

it(`${COUNT} generated requests (seed ${SEED}): no violation`, { timeout: 180_000 }, async () => {
  const report = await runFuzz({ count: COUNT, seed: SEED, concurrency: 6 });
  const summary = formatReport(report, 8);

  // What the run covered, so that a generator that stopped producing something does not pass quietly.
  expect(report.sent, summary).toBe(COUNT);
  const schema = loadSchema();
  const roots = [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()];
  const missing = roots.flatMap((root) =>
    Object.keys(root!.getFields())
      .map((f) => `${root!.name.toLowerCase()} ${f}`)
      .filter((key) => !report.fields[key]),
  );
  expect(missing, "root fields never asked").toEqual([]);
  expect(Object.keys(report.roles).sort(), "roles").toEqual([...ROLES].sort());
  for (const code of ["BAD_USER_INPUT", "FORBIDDEN", "UNAUTHENTICATED", "GRAPHQL_VALIDATION_FAILED", "GRAPHQL_PARSE_FAILED", "LIMIT_EXCEEDED"]) {
    expect(report.codes[code] ?? 0, `error code ${code}`).toBeGreaterThan(0);
  }
  const outcomes = Object.keys(report.outcomes);
  for (const kind of [/^http 200 data/, /^http 200 sse /, /^ws data/, /^ws open/, /^ws-raw closed 44/]) {
    expect(
      outcomes.some((o) => kind.test(o)),
      `an outcome ${kind}`,
    ).toBe(true);
  }
  const problems = problemTypesOf(schema);
  const problemsSeen = Object.keys(report.typenames).filter((t) => problems.has(t));
  expect(problemsSeen.length, `Problems seen: ${problemsSeen.join(", ")}`).toBeGreaterThanOrEqual(5);
  for (const success of ["IssueClaimed", "IssueReleased", "IssuesClaimed", "RunUpdated", "IssueUpdated"]) {
    expect(report.typenames[success] ?? 0, `${success} answered`).toBeGreaterThan(0);
  }

  // The point: nothing went wrong.
  expect(report.violations.length, summary).toBe(0);
});
