// issuesChanged: the ids of a company's issues created or edited without a
// lock change, as the bus announces them, coalesced while the client is busy.
// Best effort by design: nothing is replayed, so a client reads the issues
// once it is subscribed, and again whenever the subscription ends. It ends,
// so that the client reads again, when notices may have been lost: after a
// Redis outage, or when more than `maxPending` distinct ids piled up unread
// (both SUBSCRIPTION_OVERFLOW).
import type { EventBus } from "./bus.js";

/** How long the answer waits for the bus to confirm it listens (Redis may be away). */
const WATCH_WAIT_MS = 2000;

/**
 * Resolves once the bus is listening (for Redis: SUBSCRIBE confirmed), so that
 * no notice committed after the answer starts can be missed; if Redis is
 * away, after WATCH_WAIT_MS, and the subscription then ends when it returns.
 */
/** An issuesChanged subscription that may have lost notices it cannot replay: the client reads the issues again. */
export class SubscriptionOverflowError extends Error {
  override name = "SubscriptionOverflowError";
}

export async function issueNotices(
  bus: EventBus,
  companyId: string,
  options: { maxPending: number; onOpen?: () => void; onClose?: () => void },
): Promise<AsyncGenerator<string[]>> {
  const pending = new Set<string>();
  let wake: (() => void) | null = null;
  let lost: string | null = null;
  let closed = false;
  let unwatch = () => {};
  const notify = () => wake?.();
  const watching = bus
    .watchIssues(companyId, (ids) => {
      for (const id of ids) pending.add(id);
      if (pending.size > options.maxPending) lost = `more than ${options.maxPending} changed issues waited for this subscriber`;
      notify();
    })
    .then(
      (stop) => {
        if (closed) stop();
        else unwatch = stop;
      },
      () => {
        lost = "the pub/sub connection failed";
        notify();
      },
    );
  const stopReconnect = bus.onReconnect(() => {
    lost = "notices may have been lost while Redis was away";
    notify();
  });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([watching, new Promise<void>((resolve) => (timer = setTimeout(resolve, WATCH_WAIT_MS)))]);
  clearTimeout(timer);
  options.onOpen?.();
  const close = () => {
    if (closed) return;
    closed = true;
    unwatch();
    stopReconnect();
    options.onClose?.();
    notify();
  };
  async function* notices(): AsyncGenerator<string[]> {
    try {
      for (;;) {
        if (closed) return;
        if (lost) throw new SubscriptionOverflowError(`${lost}: read the issues again and resubscribe`);
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
