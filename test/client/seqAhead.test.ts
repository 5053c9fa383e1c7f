// A seq the server's database has not made yet, as the SDK shows it
// (baton/client, against a real server): request() and lockChanges() end with
// a typed SeqAheadError carrying the ceiling, and lockChanges() does not
// reconnect for ever (docs/events.md, "A seq this database has not made").
import { Baton, BatonError, SeqAheadError } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

/** What a promise settles to (its rejection as a value), or `what` if it has not settled within ms. */
const within = (promise: Promise<unknown>, ms: number, what: string): Promise<unknown> =>
  Promise.race([promise.catch((err: unknown) => err), new Promise((resolve) => setTimeout(() => resolve(what), ms))]);

it("request() and lockChanges() after a seq above the server's ceiling end with SeqAheadError, and lockChanges() does not try again", async () => {
  const co = await createCompany(h, 1);
  const ceiling = BigInt((await h.one<{ c: string }>("SELECT baton_event_ceiling()::text AS c")).c);
  const afterSeq = (ceiling + (1000n << 20n)).toString();
  const baton = new Baton({ url: h.url, token: co.board.token! });

  const asked = await baton
    .request(`query($c: ID!, $after: ID) { lockEvents(companyId: $c, afterSeq: $after) { seq } }`, { c: co.id, after: afterSeq })
    .catch((e: unknown) => e);
  expect(asked).toBeInstanceOf(SeqAheadError);
  expect(asked).toBeInstanceOf(BatonError);
  expect(asked).toMatchObject({ code: "SEQ_AHEAD", afterSeq, ceilingSeq: expect.stringMatching(/^\d+$/) });

  const stream = baton.lockChanges({ companyId: co.id, afterSeq });
  const streamed = await within(stream.next(), 20_000, "still reconnecting after 20 s");
  expect(streamed).toBeInstanceOf(SeqAheadError);
  expect(streamed).toMatchObject({ code: "SEQ_AHEAD", afterSeq });
  expect(BigInt((streamed as SeqAheadError).ceilingSeq) <= BigInt(afterSeq)).toBe(true);
  expect(await stream.next()).toEqual({ done: true, value: undefined });
});
