// The two small pieces of a lockChanged stream (src/events/stream.ts), on
// their own: what it remembers of announcements, and how it waits.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Announcements, Doorbell } from "../../src/events/stream.js";

const page = (ceiling: bigint, startedAt: number, horizon = 0n) => ({ events: [], horizon, ceiling, startedAt });

it("forgets an announcement once it is read, and keeps one not read yet (held back by an open transaction)", () => {
  const a = new Announcements();
  a.add(10n);
  a.add(20n);
  a.settle(10n, page(1000n, performance.now() + 1), false);
  expect(a.waiting).toBe(true); // 20 is still to come
  a.settle(20n, page(1000n, performance.now() + 1), false);
  expect(a.waiting).toBe(false);
});

it("forgets a seq no transaction can have written, but only on a read that began after it was announced", () => {
  const a = new Announcements();
  const before = performance.now() - 1;
  a.add(5000n);
  a.settle(0n, page(1000n, before), false); // a shared read that began earlier proves nothing
  expect(a.waiting).toBe(true);
  a.settle(0n, page(1000n, performance.now() + 1), false); // began later, and its ceiling is below: never a committed event
  expect(a.waiting).toBe(false);
});

it("forgets an announcement below a complete read's horizon that the read did not return: no such event exists", () => {
  const a = new Announcements();
  a.add(500n);
  a.settle(100n, page(10_000n, performance.now() - 1000, 400n), true); // horizon below it: it may still come
  expect(a.waiting).toBe(true);
  a.settle(100n, page(10_000n, performance.now() - 1000, 600n), false); // a full page proves nothing past itself
  expect(a.waiting).toBe(true);
  a.settle(100n, page(10_000n, performance.now() - 1000, 600n), true);
  expect(a.waiting).toBe(false);
});

it("remembers a bounded number of announcements, and says when it could not", () => {
  const a = new Announcements();
  let refused = 0;
  for (let i = 1; i <= 2000; i++) if (!a.add(BigInt(i))) refused++;
  expect(refused).toBe(2000 - 1024);
});

/** Whether `p` has settled, once the microtasks already queued have run. */
function watch(p: Promise<void>): () => Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  return async () => {
    await vi.advanceTimersByTimeAsync(0);
    return done;
  };
}

describe("a doorbell wait ends at a ring or at its timeout, whichever comes first", () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it("a wait with a timeout and no ring ends at the timeout, not before", async () => {
    const bell = new Doorbell();
    const ended = watch(bell.wait(1000));
    await vi.advanceTimersByTimeAsync(999);
    expect(await ended()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await ended()).toBe(true);
  });

  it("a ring ends a wait at once, and its timeout then wakes no later wait", async () => {
    const bell = new Doorbell();
    const first = watch(bell.wait(60_000));
    bell.wake();
    expect(await first()).toBe(true);
    expect(vi.getTimerCount()).toBe(0); // the rung wait's timer is gone
    // A later wait (the stream's next "nothing to read") ends only at its own ring.
    const next = watch(bell.wait());
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await next()).toBe(false);
    bell.wake();
    expect(await next()).toBe(true);
  });

  it("a wait without a timeout ends only at a ring", async () => {
    const bell = new Doorbell();
    const ended = watch(bell.wait());
    await vi.advanceTimersByTimeAsync(24 * 3600_000);
    expect(await ended()).toBe(false);
    bell.wake();
    expect(await ended()).toBe(true);
  });
});
