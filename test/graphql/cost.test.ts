// The answer-size estimate (src/bounds/cost.ts) is an upper bound that knows
// every field of the schema that returns many rows.
import { isListType, isNonNullType, isObjectType, Kind, parse } from "graphql";
import type { OperationDefinitionNode } from "graphql";
import { expect, it } from "vitest";
import { ResponseEstimate, ROWS, SIZED_BY_PARENT } from "../../src/bounds/cost.js";
import { schema } from "../../src/graphql/schema.js";

function estimate(query: string, variables: Record<string, unknown> = {}): number {
  const document = parse(query);
  const operation = document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
  return new ResponseEstimate(schema, document, variables).of(operation);
}

const C = "00000000-0000-0000-0000-000000000001";

it("knows how many rows every list field of the schema can return", () => {
  const lists: string[] = [];
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith("__")) continue;
    for (const field of Object.values(type.getFields())) {
      const t = isNonNullType(field.type) ? field.type.ofType : field.type;
      if (isListType(t)) lists.push(`${type.name}.${field.name}`);
    }
  }
  for (const list of lists) expect(list in ROWS || SIZED_BY_PARENT.has(list), `${list} must be in ROWS or SIZED_BY_PARENT`).toBe(true);
  // And nothing is listed that the schema does not have.
  for (const key of [...Object.keys(ROWS), ...SIZED_BY_PARENT]) {
    const [type, field] = key.split(".");
    const t = schema.getType(type!);
    expect(isObjectType(t) && t.getFields()[field!], `${key} is not in the schema`).toBeTruthy();
  }
});

it("grows with the rows an argument or a variable asks for, clamped to the argument's maximum", () => {
  const page = (first: string) => `query($n: Int) { issues(companyId: "${C}", first: ${first}) { edges { node { id description } } } }`;
  const one = estimate(page("1"));
  expect(estimate(page("500"))).toBeGreaterThan(499 * 100_000);
  expect(estimate(page("$n"), { n: 200 })).toBeGreaterThan(199 * one);
  expect(estimate(page("$n"))).toBe(estimate(page("50"))); // the argument's default
  expect(estimate(page(String(2 ** 40)))).toBe(estimate(page("500"))); // the resolver refuses it; the estimate does not overflow
  const claim = (limit: number) => `mutation { claimIssues(runId: "${C}", limit: ${limit}) { ... on IssuesClaimed { issues { id title } } } }`;
  expect(estimate(claim(1000))).toBeGreaterThan((900 * estimate(claim(1))) / 2);
});

it("counts a field once however many times fragments repeat it, as execution merges them", () => {
  const once = estimate(`{ me { role } }`);
  expect(estimate(`{ me { ...F ...F ...F } } fragment F on Principal { role }`)).toBe(estimate(`{ me { ...F } } fragment F on Principal { role }`));
  expect(estimate(`{ me { role role } me { role } }`)).toBe(once);
  expect(estimate(`{ a: me { role } b: me { role } }`)).toBeGreaterThan(once);
});

it("keeps an ordinary agent's operations under the default limit (6,000,000)", () => {
  const issueFields = `id companyId title description status priority assigneeAgentId checkoutRunId executionRunId lockEpoch attemptCount maxAttempts createdAt updatedAt`;
  expect(estimate(`mutation { claimIssue(runId: "${C}") { ... on IssueClaimed { issue { ${issueFields} } run { id status } } } }`)).toBeLessThan(110_000);
  expect(estimate(`mutation { claimIssues(runId: "${C}", limit: 50) { ... on IssuesClaimed { issues { ${issueFields} } } } }`)).toBeLessThan(6_000_000);
  expect(estimate(`{ lockEvents(companyId: "${C}", first: 1000) { seq kind status reason issue { id status } } }`)).toBeLessThan(6_000_000);
});

it("counts a payload and a result at their 64 KB each, so a batch that selects them is bounded by them", () => {
  const claim = (fields: string) => `mutation { claimIssues(runId: "${C}", limit: 1000) { ... on IssuesClaimed { issues { ${fields} } } } }`;
  const bare = estimate(claim("id"));
  expect(estimate(claim("id payload result")) - bare).toBeGreaterThanOrEqual(1000 * 2 * 65_536);
  // one claim with both fits easily under the default limit
  expect(estimate(`mutation { claimIssue(runId: "${C}") { ... on IssueClaimed { issue { id payload result } } } }`)).toBeLessThan(200_000);
});

it("counts a batch's rows in its list only: the problem it might answer instead is counted once", () => {
  const claim = (problem: string) => `mutation { claimIssues(runId: "${C}", limit: 1000) { ... on IssuesClaimed { issues { id } } ${problem} } }`;
  const withProblems = estimate(claim("... on RunNotActive { message runId } ... on Problem { message }"));
  expect(withProblems - estimate(claim(""))).toBeLessThan(2_000);
  // a connection's page info is one object, its edges the page's rows
  const page = (fields: string) => `{ issues(companyId: "${C}", first: 500) { edges { node { id } } ${fields} } }`;
  expect(estimate(page("pageInfo { hasNextPage endCursor }")) - estimate(page(""))).toBeLessThan(1_000);
});
