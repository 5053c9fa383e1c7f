// lockChanges() through a Redis restart: a dashboard on instance B follows
// claims made through instance A while the Redis between them dies and comes
// back; it sees every seq once, in order.
import { Baton } from "baton/client";
import type { LockChange } from "baton/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { claimingAgent, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";
import { PrivateRedis } from "../helpers/redis.js";

let h: Harness;
let redis: PrivateRedis;
let urlB: string;

beforeAll(async () => {
  redis = await PrivateRedis.start();
  h = await startHarness({ redisUrl: redis.url });
  urlB = (await h.startInstance()).url;
});
afterAll(async () => {
  await h?.close();
  await redis?.kill();
});

it("lockChanges() yields every seq exactly once, in order, across a Redis restart", async () => {
  const { co, claim } = await claimingAgent(h, 15);
  const seen: LockChange[] = [];
  const reading = (async () => {
    for await (const event of new Baton({ url: urlB, token: co.board.token! }).lockChanges({ companyId: co.id, afterSeq: "0" })) {
      seen.push(event);
      if (seen.length === 15) break;
    }
  })();
  await claim(5);
  await eventually(() => (seen.length === 5 ? true : undefined), "the first five");
  await redis.kill();
  await claim(5); // committed while no message can cross between the instances
  await redis.restart();
  await claim(5);
  await reading;
  expect(seen.map((e) => e.seq)).toEqual(await h.ledgerSeqs(co.id));
});
