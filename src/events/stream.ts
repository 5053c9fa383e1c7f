// lockChanged as an async stream: every committed event of a company, in seq
// order, exactly once, from any instance.
//
// Seqs are gapless per company (see docs/events.md), which makes this simple
// and exact: the stream remembers the last company seq it has passed, and when
// a live message skips ahead (a message lost while Redis was down, two
// instances' publishes arriving out of order, or the instant between
// subscribing and SUBSCRIBE being confirmed) it reads the missing range from
// the ledger first. Anything at or below the last seq passed is a duplicate
// and is dropped. A replay (afterSeq) is the same mechanism started earlier.
import type { LockEvent } from "../locks/types.js";
import type { EventBus } from "./bus.js";
import type { LedgerReader } from "./ledger.js";
import type { LedgerWatcher } from "./watcher.js";

export interface StreamFilter {
  companyId: string;
  issueId?: string | null;
  agentId?: string | null;
  /** Replay committed events after this seq first; null: start from now. */
  afterSeq?: string | null;
}

export interface StreamOptions {
  /** Live events buffered for a slow consumer before the stream is closed. */
  maxBuffered?: number;
  pageSize?: number;
  /** Called once when the stream starts and once when it ends, however it ends. */
  onOpen?: () => void;
  onClose?: () => void;
}

/** Lets return() reach a stream that is waiting for events. */
interface Control {
  closed: boolean;
  wake: () => void;
}

/**
 * The stream as an async iterator whose return() takes effect at once. (An
 * async generator's return() waits for its next yield, and a stream waiting
 * for a matching event may never yield again: a closed subscription would keep
 * its listeners for ever.) Ending wakes the wait; the loop sees `closed`, and
 * its finally unsubscribes.
 */
export function lockEventStream(
  ledger: LedgerReader,
  bus: EventBus,
  watcher: LedgerWatcher | null,
  filter: StreamFilter,
  options: StreamOptions = {},
): AsyncIterableIterator<LockEvent> {
  const control: Control = { closed: false, wake: () => {} };
  const inner = streamEvents(ledger, bus, watcher, filter, options, control);
  let open = true;
  options.onOpen?.();
  const end = () => {
    if (open) options.onClose?.();
    open = false;
  };
  const stop = () => {
    control.closed = true;
    control.wake();
  };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      try {
        const result = await inner.next();
        if (result.done) end();
        return result;
      } catch (err) {
        end();
        throw err;
      }
    },
    async return() {
      stop();
      try {
        return await inner.return(undefined);
      } finally {
        end();
      }
    },
    async throw(err?: unknown) {
      stop();
      try {
        return await inner.throw(err);
      } finally {
        end();
      }
    },
  };
}

/**
 * Lets I/O in between two deliveries. A burst of events reaches every stream
 * at once, and graphql-ws's sends complete without a trip through the event
 * loop, so 50 events to 100 subscriptions (5,000 deliveries) would otherwise
 * hold it for about 300 ms, and /healthz and claims with it.
 */
const breathe = () => new Promise<void>((resolve) => setImmediate(resolve));

export class SubscriptionOverflowError extends Error {
  override name = "SubscriptionOverflowError";
}

async function* streamEvents(
  ledger: LedgerReader,
  bus: EventBus,
  watcher: LedgerWatcher | null,
  filter: StreamFilter,
  options: StreamOptions,
  control: Control,
): AsyncGenerator<LockEvent> {
  const maxBuffered = options.maxBuffered ?? 10_000;
  const pageSize = options.pageSize ?? 500;
  const matches = (e: LockEvent) =>
    (!filter.issueId || e.issueId === filter.issueId) && (!filter.agentId || e.agentId === filter.agentId);

  let buffered: LockEvent[] = [];
  let wake: (() => void) | null = null;
  let overflowed = false;
  let refill = false;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  // While Redis is away a SUBSCRIBE waits for it, for as long as it takes: a
  // client that gives up meanwhile must not leave this stream (and its
  // listener) waiting too, so ending the stream also ends that wait.
  let abandon = () => {};
  const abandoned = new Promise<null>((resolve) => (abandon = () => resolve(null)));
  control.wake = () => {
    abandon();
    notify();
  };
  if (control.closed) return;
  const subscribing = bus.subscribe(filter.companyId, (event) => {
    if (buffered.length >= maxBuffered) overflowed = true;
    else buffered.push(event);
    notify();
  });
  const unsubscribe = await Promise.race([subscribing, abandoned]);
  if (!unsubscribe) {
    subscribing.then((later) => later(), () => {}); // let go of the channel once the SUBSCRIBE completes
    return;
  }
  const stopReconnect = bus.onReconnect(() => {
    refill = true;
    notify();
  });
  let last = 0n; // the last company seq this stream has passed (set below)
  // The watcher's poll can land between a commit and its pub/sub message; a
  // stream behind at one poll refills only if it is still behind that seq at
  // the next, so live delivery is not doubled by a burst of ledger reads.
  let behindAt: bigint | null = null;
  const stopWatching =
    watcher?.watch(filter.companyId, (latest) => {
      if (behindAt !== null && last < behindAt) {
        refill = true;
        notify();
      }
      behindAt = latest > last ? latest : null;
    }) ?? (() => {});
  try {
    // The subscription is confirmed; where does the stream start?
    last = filter.afterSeq != null ? BigInt(filter.afterSeq) : await ledger.lastSeq(filter.companyId);
    /**
     * Ledger rows after `last`, up to `until` (inclusive) or to the end. Rows
     * up to `until` are known to be committed (a later seq has arrived, and
     * the ledger is visible in seq order), but a shared read may have started
     * a moment before they were: a short page that stops before `until` is
     * read again (a few times at most, so a broken ledger cannot spin here).
     */
    async function* fromLedger(until: bigint | null): AsyncGenerator<LockEvent> {
      for (let shortPages = 0; ; ) {
        const page = await ledger.page(filter.companyId, last, pageSize);
        for (const e of page) {
          if (control.closed) return;
          const seq = BigInt(e.seq);
          if (until !== null && seq > until) return;
          last = seq;
          if (matches(e)) {
            yield e;
            await breathe();
          }
        }
        if (page.length === pageSize) continue;
        if (until === null || last >= until || ++shortPages >= 3) return;
      }
    }
    if (filter.afterSeq != null) yield* fromLedger(null);
    for (;;) {
      if (control.closed) return;
      if (overflowed) {
        throw new SubscriptionOverflowError(
          `subscriber fell more than ${maxBuffered} events behind; resubscribe with afterSeq: "${last}" to resume`,
        );
      }
      if (refill) {
        refill = false;
        yield* fromLedger(null);
      }
      const batch = buffered;
      buffered = [];
      batch.sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
      for (const e of batch) {
        if (control.closed) return;
        const seq = BigInt(e.seq);
        if (seq <= last) continue;
        if (seq > last + 1n) {
          yield* fromLedger(seq - 1n);
          // The ledger is visible in seq order, so everything before a
          // committed seq can be read. If it cannot, the message was not a
          // committed event (whatever can publish to Redis can publish
          // nonsense): drop it rather than skip ahead of the ledger.
          if (last < seq - 1n) continue;
        }
        last = seq;
        if (matches(e)) {
          yield e;
          await breathe();
        }
      }
      if (buffered.length === 0 && !refill && !overflowed && !control.closed) await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    stopWatching();
    stopReconnect();
    unsubscribe();
  }
}
