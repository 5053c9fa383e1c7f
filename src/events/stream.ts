// lockChanged as an async stream: every committed event of a company, in seq
// order, exactly once, from any instance.
//
// The stream reads the ledger; it never delivers a pub/sub message itself.
// Seqs are increasing but not gapless (docs/events.md), so a message cannot
// tell a stream whether it missed one; the ledger can: a read returns only
// final events (below the reader's horizon), in seq order, so "everything
// after the last seq passed" is exact. A message (or a reconnect, or the
// watcher's poll) only says "there may be more": the stream then reads.
//
// The stream has two states: reading (pages until one is short) and waiting
// (for a message, or for a short back-off while an announced event is not
// final yet because an older transaction is still open). Reads are shared by
// the streams of one instance that stand at the same seq (history.ts), so a
// thousand subscribers of one company cost one read per burst, not a
// thousand. A consumer that stops reading stops the stream's reads with it:
// nothing piles up on the server, and it catches up from the ledger later.
import type { LockEvent } from "../domain/types.js";
import type { EventBus } from "./bus.js";
import { refuseAhead, refusePruned } from "./history.js";
import type { LedgerPage, LedgerReader } from "./history.js";
import type { LedgerWatcher } from "./watcher.js";

export interface StreamFilter {
  companyId: string;
  issueId?: string | null;
  agentId?: string | null;
  /** Replay committed events after this seq first; null: start from now. */
  afterSeq?: string | null;
}

export interface StreamOptions {
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

/**
 * Back-off while an announced event is not readable yet (an older
 * transaction is still open): doubling from 2 ms to 50 ms, and once the
 * event has been held back for 2 s (a long-open transaction, see
 * docs/events.md), once a second, for as long as it takes. An announcement is
 * dropped only once a read shows it will never come (Announcements.settle):
 * whatever can publish to Redis can publish nonsense.
 */
const FIRST_RETRY_MS = 2;
const BRISK_RETRY_MS = 50;
const BRISK_FOR_MS = 2000;
const SLOW_RETRY_MS = 1000;
/** Announcements remembered per stream; past this, a new one only marks the stream for a read. */
const MAX_ANNOUNCED = 1024;

/** Seqs announced by messages or the watcher and not read yet, with when each arrived. */
export class Announcements {
  private readonly list: { seq: bigint; at: number }[] = [];
  add(seq: bigint): boolean {
    if (this.list.length >= MAX_ANNOUNCED) return false;
    this.list.push({ seq, at: performance.now() });
    return true;
  }
  /**
   * Forgets what has been read (at or below `last`), what a complete read
   * (a short page) did not return though it lay below its horizon (so it does
   * not exist), and what a read that began later proved impossible (at or
   * above its ceiling).
   */
  settle(last: bigint, page: Pick<LedgerPage, "horizon" | "ceiling" | "startedAt">, complete: boolean): void {
    for (let i = this.list.length - 1; i >= 0; i--) {
      const a = this.list[i]!;
      if (a.seq <= last || (complete && a.seq < page.horizon) || (a.seq >= page.ceiling && page.startedAt > a.at)) this.list.splice(i, 1);
    }
  }
  get waiting(): boolean {
    return this.list.length > 0;
  }
}

/** One wake-up at a time: wait() resolves on wake() or after `ms`. */
export class Doorbell {
  private ring: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  wake(): void {
    const ring = this.ring;
    this.ring = null;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    ring?.();
  }
  wait(ms?: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.ring = resolve;
      if (ms !== undefined) this.timer = setTimeout(() => this.wake(), ms);
    });
  }
}

async function* streamEvents(
  ledger: LedgerReader,
  bus: EventBus,
  watcher: LedgerWatcher | null,
  filter: StreamFilter,
  options: StreamOptions,
  control: Control,
): AsyncGenerator<LockEvent> {
  const pageSize = options.pageSize ?? 500;
  const openedAt = performance.now();
  const matches = (e: LockEvent) => (!filter.issueId || e.issueId === filter.issueId) && (!filter.agentId || e.agentId === filter.agentId);
  const bell = new Doorbell();
  const announced = new Announcements();
  /** A read is due: a replay, a reconnect (messages may have been lost), a full page, or too many announcements to remember. */
  let dirty = false;
  let last = 0n; // the last seq this stream has passed (set below)
  const announce = (seq: bigint) => {
    if (seq <= last) return;
    if (!announced.add(seq)) dirty = true;
    bell.wake();
  };
  // While Redis is away a SUBSCRIBE waits for it, for as long as it takes: a
  // client that gives up meanwhile must not leave this stream (and its
  // listener) waiting too, so ending the stream also ends that wait.
  let abandon = () => {};
  const abandoned = new Promise<null>((resolve) => (abandon = () => resolve(null)));
  control.wake = () => {
    abandon();
    bell.wake();
  };
  if (control.closed) return;
  const subscribing = bus.subscribe(filter.companyId, (event) => announce(BigInt(event.seq)));
  const unsubscribe = await Promise.race([subscribing, abandoned]);
  if (!unsubscribe) {
    subscribing.then(
      (later) => later(),
      () => {},
    ); // let go of the channel once the SUBSCRIBE completes
    return;
  }
  const stopReconnect = bus.onReconnect(() => {
    dirty = true;
    bell.wake();
  });
  const stopWatching = watcher?.watch(filter.companyId, announce) ?? (() => {});
  try {
    // Subscribed first, then the starting point: nothing committed in between is missed.
    last = filter.afterSeq != null ? BigInt(filter.afterSeq) : await ledger.lastSeq(filter.companyId);
    dirty ||= filter.afterSeq != null; // (a reconnect while starting has set it already)
    // The client's afterSeq, until a read begun after it came shows it below the ceiling (SEQ_AHEAD).
    let unchecked = filter.afterSeq != null ? last : null;
    // The newest dropped seq this stream resumed past at a point EVENTS_PRUNED offered (refusePruned).
    let acknowledged: bigint | null = null;
    let retryMs = 0;
    let heldSince = 0;
    for (;;) {
      if (control.closed) return;
      if (!dirty && !announced.waiting) {
        // Waiting: nothing announced beyond what was read.
        retryMs = 0;
        await bell.wait();
        continue;
      }
      // Reading: pages of final events after `last`, until a short one.
      dirty = false;
      const before = last;
      const page = await ledger.page(filter.companyId, last, pageSize);
      if (unchecked !== null) {
        // A shared read begun before this stream has an older ceiling: only a later one decides.
        if (unchecked >= page.ceiling && page.startedAt < openedAt) {
          dirty = true;
          continue;
        }
        refuseAhead(unchecked, page.ceiling);
        unchecked = null;
      }
      acknowledged = refusePruned(before, page.pruned, acknowledged);
      for (const e of page.events) {
        if (control.closed) return;
        last = BigInt(e.seq);
        if (matches(e)) {
          yield e;
          await breathe();
        }
      }
      announced.settle(last, page, page.events.length < pageSize);
      if (page.events.length === pageSize)
        dirty = true; // more to read at once
      else if (announced.waiting) {
        // An announced event is not final yet (an older transaction is still
        // open) or committed after a shared read began: read again shortly.
        if (last > before || retryMs === 0) {
          retryMs = FIRST_RETRY_MS;
          heldSince = performance.now();
        } else {
          retryMs = performance.now() - heldSince < BRISK_FOR_MS ? Math.min(retryMs * 2, BRISK_RETRY_MS) : SLOW_RETRY_MS;
        }
        await bell.wait(retryMs);
      }
    }
  } finally {
    stopWatching();
    stopReconnect();
    unsubscribe();
  }
}
