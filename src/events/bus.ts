// Fan-out of committed lock events to every API instance: Redis pub/sub (one
// channel per company) or, with no REDIS_URL, in-process. Publishing happens
// after commit and never throws: the ledger is the source of truth, and a
// subscriber that missed a message recovers it from there (see stream.ts).
import { Redis } from "ioredis";
import type { EventSink } from "../locks/deps.js";
import type { LockEvent } from "../locks/types.js";
import { ISSUE_STATUSES, LOCK_EVENT_KINDS } from "../locks/types.js";
import { isUuid } from "../locks/validate.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

export type Listener = (event: LockEvent) => void;

const SEQ = /^[1-9]\d{0,18}$/;

/** A message from Redis, if it has the shape of a lock event (as eventJson writes it). */
export function parseLockEvent(message: string): LockEvent | null {
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null) return null;
  const e = value as Record<string, unknown>;
  const id = (v: unknown) => typeof v === "string" && isUuid(v);
  const ok =
    typeof e.seq === "string" && SEQ.test(e.seq) &&
    id(e.companyId) && id(e.issueId) &&
    (LOCK_EVENT_KINDS as readonly unknown[]).includes(e.kind) &&
    (ISSUE_STATUSES as readonly unknown[]).includes(e.status) &&
    (e.runId === null || id(e.runId)) && (e.agentId === null || id(e.agentId));
  return ok ? (value as LockEvent) : null;
}

export interface EventBus extends EventSink {
  /** Resolves once the subscription is live (for Redis: SUBSCRIBE confirmed). Returns the unsubscribe function. */
  subscribe(companyId: string, listener: Listener): Promise<() => void>;
  /** Called when the transport reconnects after an outage, so streams can fill what they missed. */
  onReconnect(listener: () => void): () => void;
  /** False while Redis is unreachable. */
  healthy(): boolean;
  readonly stats: { published: number; publishFailures: number };
  close(): Promise<void>;
}

const channelOf = (companyId: string) => `baton:lock-events:${companyId}`;

class Listeners {
  private readonly byCompany = new Map<string, Set<Listener>>();
  add(companyId: string, listener: Listener): boolean {
    let set = this.byCompany.get(companyId);
    const first = set === undefined;
    if (!set) this.byCompany.set(companyId, (set = new Set()));
    set.add(listener);
    return first;
  }
  remove(companyId: string, listener: Listener): boolean {
    const set = this.byCompany.get(companyId);
    if (!set) return false;
    set.delete(listener);
    if (set.size > 0) return false;
    this.byCompany.delete(companyId);
    return true;
  }
  deliver(event: LockEvent): void {
    for (const listener of this.byCompany.get(event.companyId) ?? []) listener(event);
  }
}

/** One process, no Redis: fine for one API instance (a warning says so at start). */
export function createInProcessBus(): EventBus {
  const listeners = new Listeners();
  const stats = { published: 0, publishFailures: 0 };
  return {
    stats,
    publish(events) {
      for (const event of events) {
        stats.published++;
        // Deliver on a later tick: the publisher's request must not run subscriber code.
        queueMicrotask(() => listeners.deliver(event));
      }
    },
    async subscribe(companyId, listener) {
      listeners.add(companyId, listener);
      return () => void listeners.remove(companyId, listener);
    },
    onReconnect: () => () => {},
    healthy: () => true,
    async close() {},
  };
}

export function createRedisBus(redisUrl: string, log: Logger): EventBus {
  const options = {
    lazyConnect: false,
    // Never queue publishes while Redis is down: fail fast, log, count. The
    // ledger keeps every event; subscribers refill from it.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
  };
  const publisher = new Redis(redisUrl, { ...options, connectionName: "baton-publish" });
  // The subscribe connection queues its commands while Redis is away, so a
  // subscription opened during an outage starts when Redis is back.
  const subscriber = new Redis(redisUrl, { ...options, enableOfflineQueue: true, maxRetriesPerRequest: null, connectionName: "baton-subscribe" });
  const listeners = new Listeners();
  const channels = new Map<string, Promise<void>>();
  const reconnectListeners = new Set<() => void>();
  const stats = { published: 0, publishFailures: 0 };
  let lastError = 0;
  const onError = (which: string) => (err: Error) => {
    // ioredis retries by itself; log at most once a second.
    if (Date.now() - lastError > 1000) log("warn", `redis ${which} connection error`, errorFields(err));
    lastError = Date.now();
  };
  publisher.on("error", onError("publish"));
  subscriber.on("error", onError("subscribe"));
  let wasReady = false;
  subscriber.on("ready", () => {
    // ioredis re-subscribes its channels on reconnect by itself; streams must
    // still refill what was published while the connection was down.
    if (wasReady) for (const l of reconnectListeners) l();
    wasReady = true;
  });
  subscriber.on("message", (channel: string, message: string) => {
    // Anything with access to this Redis can publish on our channels: a
    // message that is not a lock event of this channel's company is dropped
    // (and a listener's failure must not escape into ioredis, which would
    // take the process down).
    const event = parseLockEvent(message);
    if (!event || channelOf(event.companyId) !== channel) {
      log("warn", "ignored a malformed lock event message", { channel });
      return;
    }
    try {
      listeners.deliver(event);
    } catch (err) {
      log("error", "a lock event listener failed", errorFields(err));
    }
  });
  return {
    stats,
    publish(events) {
      if (events.length === 0) return;
      const pipeline = publisher.pipeline();
      for (const event of events) pipeline.publish(channelOf(event.companyId), JSON.stringify(event));
      pipeline.exec().then(
        (results) => {
          const failed = results?.filter(([err]) => err).length ?? events.length;
          stats.published += events.length - failed;
          stats.publishFailures += failed;
        },
        (err: unknown) => {
          stats.publishFailures += events.length;
          if (Date.now() - lastError > 1000) log("warn", "lock event publish failed (subscribers will refill from the ledger)", errorFields(err));
          lastError = Date.now();
        },
      );
    },
    async subscribe(companyId, listener) {
      if (listeners.add(companyId, listener)) {
        // The first listener of a company subscribes its channel; listeners
        // that arrive meanwhile wait for the same confirmation (or failure).
        channels.set(companyId, subscriber.subscribe(channelOf(companyId)).then(() => {}));
      }
      try {
        await channels.get(companyId);
      } catch (err) {
        if (listeners.remove(companyId, listener)) channels.delete(companyId);
        throw err;
      }
      return () => {
        if (listeners.remove(companyId, listener)) {
          channels.delete(companyId);
          subscriber.unsubscribe(channelOf(companyId)).catch(() => {});
        }
      };
    },
    onReconnect(listener) {
      reconnectListeners.add(listener);
      return () => void reconnectListeners.delete(listener);
    },
    healthy: () => publisher.status === "ready" && subscriber.status === "ready",
    async close() {
      subscriber.disconnect();
      // quit() waits for publishes already sent; it fails at once when offline.
      await publisher.quit().catch(() => publisher.disconnect());
    },
  };
}
