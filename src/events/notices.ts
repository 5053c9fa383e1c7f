// issuesChanged: the ids of a company's issues created or edited without a
// lock change, as the bus announces them, coalesced while the client is busy.
// Best effort by design: nothing is replayed, so a client reads the issues
// once it is subscribed (and again after a reconnect). Bounded: a client that
// lets more than `maxPending` distinct ids pile up is ended with
// SUBSCRIPTION_OVERFLOW, and reads the issues again.
import type { EventBus } from "./bus.js";
import { SubscriptionOverflowError } from "./stream.js";

/**
 * Resolves once the bus is listening (for Redis: SUBSCRIBE confirmed), so the
 * subscription's answer starts only when no later notice can be missed.
 */
export async function issueNotices(
  bus: EventBus,
  companyId: string,
  options: { maxPending: number; onOpen?: () => void; onClose?: () => void },
): Promise<AsyncGenerator<string[]>> {
  const pending = new Set<string>();
  let wake: (() => void) | null = null;
  let overflowed = false;
  const unwatch = await bus.watchIssues(companyId, (ids) => {
    for (const id of ids) pending.add(id);
    if (pending.size > options.maxPending) overflowed = true;
    wake?.();
  });
  options.onOpen?.();
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    unwatch();
    options.onClose?.();
    wake?.();
  };
  async function* notices(): AsyncGenerator<string[]> {
    try {
      for (;;) {
        if (closed) return;
        if (overflowed) throw new SubscriptionOverflowError(`more than ${options.maxPending} changed issues waited for this subscriber: read the issues again and resubscribe`);
        if (pending.size === 0) {
          await new Promise<void>((resolve) => (wake = resolve));
          wake = null;
          continue;
        }
        const ids = [...pending].slice(0, 1000);
        for (const id of ids) pending.delete(id);
        yield ids;
      }
    } finally {
      close();
    }
  }
  const generator = notices();
  // return() reaches a generator only at a yield: one waiting for a notice (or
  // never started) would hold its listener until the next one. Let go at once.
  const returnFirst = generator.return.bind(generator);
  generator.return = (value) => {
    close();
    return returnFirst(value);
  };
  return generator;
}
