// An open subscription holds nothing per event it has delivered: a board key's
// issuesChanged, watched for revocation (src/graphql/subscriptions.ts,
// endWhenRevoked), keeps the heap flat over 10,000 events, as the bare stream
// does. (Racing each next() against one promise that lives as long as the
// subscription kept every event's result until the subscription ended: about
// 500 bytes an event, found in review.) Heap measured after a forced GC.
import { parse, subscribe } from "graphql";
import { randomUUID } from "node:crypto";
import v8 from "node:v8";
import vm from "node:vm";
import { afterAll, beforeAll, expect, it } from "vitest";
import { schema } from "../../src/graphql/schema.js";
import { createContext } from "../../src/graphql/context.js";
import type { Principal } from "../../src/domain/types.js";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;
const EVENTS = 10_000;

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

it(`a board key's open subscription retains nothing per event (${EVENTS} events)`, async () => {
  const co = await createCompany(h, 0);
  const principal: Principal = { role: "BOARD", companyId: co.id, agentId: null, keyId: randomUUID() };
  const stream = (await subscribe({
    schema,
    document: parse("subscription($c: ID!) { issuesChanged(companyId: $c) { id } }"),
    variableValues: { c: co.id },
    contextValue: createContext(h.app.services, principal),
  })) as AsyncIterableIterator<unknown>;
  const step = async () => {
    h.bus.announceIssues(co.id, [randomUUID()]);
    await stream.next();
  };
  for (let i = 0; i < 500; i++) await step(); // warm up
  // The growth of a second window of EVENTS over the first: what the process
  // allocates once (lazily built caches, a timer's first run) falls in the first.
  const heapAfter = async (n: number) => {
    for (let i = 0; i < n; i++) await step();
    gc();
    return process.memoryUsage().heapUsed;
  };
  const first = await heapAfter(EVENTS);
  const perEvent = ((await heapAfter(EVENTS)) - first) / EVENTS;
  await stream.return?.();
  expect(perEvent).toBeLessThan(100);
}, 120_000);
