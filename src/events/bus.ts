// Fan-out of committed lock events to every API instance: Redis pub/sub (one
// channel per company) or, with no REDIS_URL, in-process. Publishing happens
// after commit and never throws: the ledger is the source of truth, and a
// subscriber that missed a message recovers it from there (see stream.ts).
//
// The same transport carries revoked key ids (src/auth/revocations.ts: a
// message only evicts a cached key; the database decides) and issue notices: the ids of issues created or
// edited without a lock change, which write no ledger event. They are best
// effort (a notice lost in a Redis outage is not replayed): boards use them to
// show new issues and edits live, and re-read the issues after a reconnect.
import { Redis } from "ioredis";
import type { EventSink } from "../domain/types.js";
import type { LockEvent } from "../domain/types.js";
import { ISSUE_STATUSES, LOCK_EVENT_KINDS } from "../domain/types.js";
import { isSeq, isUuid } from "../domain/validate.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

export type Listener = (event: LockEvent) => void;
export type NoticeListener = (issueIds: readonly string[]) => void;

/** The most issue ids one notice carries: createIssues' batch limit. */
export const MAX_NOTICE_IDS = 1000;

/** A Redis message as a JSON object, or null: anyone who can reach Redis can publish on our channels. */
function jsonObject(message: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(message);
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const id = (v: unknown) => typeof v === "string" && isUuid(v);

/** A message from Redis, if it has the shape of a lock event (as eventJson writes it). */
function parseLockEvent(message: string): LockEvent | null {
  const e = jsonObject(message);
  if (!e) return null;
  const ok =
    typeof e.seq === "string" &&
    isSeq(e.seq) &&
    e.seq !== "0" &&
    id(e.companyId) &&
    id(e.issueId) &&
    (LOCK_EVENT_KINDS as readonly unknown[]).includes(e.kind) &&
    (ISSUE_STATUSES as readonly unknown[]).includes(e.status) &&
    (e.runId === null || id(e.runId)) &&
    (e.agentId === null || id(e.agentId));
  return ok ? (e as unknown as LockEvent) : null;
}

/** A notice from Redis, if it is a list of issue ids of the channel's company. */
function parseNotice(message: string): { companyId: string; issueIds: string[] } | null {
  const n = jsonObject(message);
  if (!n) return null;
  const ok = id(n.companyId) && Array.isArray(n.issueIds) && n.issueIds.length <= MAX_NOTICE_IDS && n.issueIds.every(id);
  return ok ? (n as { companyId: string; issueIds: string[] }) : null;
}

/** Revoked key ids, if the message is a list of them (at most MAX_NOTICE_IDS). */
function parseRevokedKeys(message: string): string[] | null {
  const m = jsonObject(message);
  const ok = m !== null && Array.isArray(m.keyIds) && m.keyIds.length <= MAX_NOTICE_IDS && m.keyIds.every(id);
  return ok ? (m.keyIds as string[]) : null;
}

export type RevokedKeysListener = (keyIds: readonly string[]) => void;

export interface EventBus extends EventSink {
  /** Resolves once the subscription is live (for Redis: SUBSCRIBE confirmed). Returns the unsubscribe function. */
  subscribe(companyId: string, listener: Listener): Promise<() => void>;
  /** Tells every instance that these issues changed without a lock change (created, or edited). Never throws. */
  announceIssues(companyId: string, issueIds: readonly string[]): void;
  /** Listens for those notices; resolves once live, like subscribe. Returns the unsubscribe function. */
  watchIssues(companyId: string, listener: NoticeListener): Promise<() => void>;
  /** Tells every instance these keys were revoked: their ids, never key material. Never throws. */
  announceRevokedKeys(keyIds: readonly string[]): void;
  /** Listens for revoked key ids; resolves once live, like subscribe. Returns the unsubscribe function. */
  watchRevokedKeys(listener: RevokedKeysListener): Promise<() => void>;
  /** Called when the transport reconnects after an outage, so streams can fill what they missed. */
  onReconnect(listener: () => void): () => void;
  /** False while Redis is unreachable. */
  healthy(): boolean;
  readonly stats: { published: number; publishFailures: number };
  close(): Promise<void>;
}

const channelOf = (companyId: string) => `baton:lock-events:${companyId}`;
const noticeChannelOf = (companyId: string) => `baton:issue-notices:${companyId}`;
const REVOKED_KEYS_CHANNEL = "baton:key-revocations";
/** The revocation listeners are kept as one company's, under this name. */
const ALL = "*";

class Listeners<T> {
  private readonly byCompany = new Map<string, Set<(value: T) => void>>();
  add(companyId: string, listener: (value: T) => void): boolean {
    let set = this.byCompany.get(companyId);
    const first = set === undefined;
    if (!set) {
      set = new Set();
      this.byCompany.set(companyId, set);
    }
    set.add(listener);
    return first;
  }
  remove(companyId: string, listener: (value: T) => void): boolean {
    const set = this.byCompany.get(companyId);
    if (!set) return false;
    set.delete(listener);
    if (set.size > 0) return false;
    this.byCompany.delete(companyId);
    return true;
  }
  deliver(companyId: string, value: T): void {
    for (const listener of this.byCompany.get(companyId) ?? []) listener(value);
  }
}

/** One process, no Redis: fine for one API instance (a warning says so at start). */
export function createInProcessBus(): EventBus {
  const listeners = new Listeners<LockEvent>();
  const notices = new Listeners<readonly string[]>();
  const revoked = new Listeners<readonly string[]>();
  const stats = { published: 0, publishFailures: 0 };
  return {
    stats,
    publish(events) {
      for (const event of events) {
        stats.published++;
        // Deliver on a later tick: the publisher's request must not run subscriber code.
        queueMicrotask(() => listeners.deliver(event.companyId, event));
      }
    },
    async subscribe(companyId, listener) {
      listeners.add(companyId, listener);
      return () => void listeners.remove(companyId, listener);
    },
    announceIssues(companyId, issueIds) {
      if (issueIds.length > 0) queueMicrotask(() => notices.deliver(companyId, issueIds));
    },
    async watchIssues(companyId, listener) {
      notices.add(companyId, listener);
      return () => void notices.remove(companyId, listener);
    },
    announceRevokedKeys(keyIds) {
      if (keyIds.length > 0) queueMicrotask(() => revoked.deliver(ALL, keyIds));
    },
    async watchRevokedKeys(listener) {
      revoked.add(ALL, listener);
      return () => void revoked.remove(ALL, listener);
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
  //
  // ioredis can re-subscribe by itself after a reconnect, but it drops that
  // SUBSCRIBE's promise: if the connection closes before Redis answers (Redis
  // dies again, or this process shuts down), the rejection is unhandled, and
  // Node ends the process on one. So the bus re-subscribes itself.
  const subscriber = new Redis(redisUrl, {
    ...options,
    enableOfflineQueue: true,
    maxRetriesPerRequest: null,
    autoResubscribe: false,
    connectionName: "baton-subscribe",
  });
  const listeners = new Listeners<LockEvent>();
  const notices = new Listeners<readonly string[]>();
  const revoked = new Listeners<readonly string[]>();
  const channels = new Map<string, Promise<void>>();
  const reconnectListeners = new Set<() => void>();
  const stats = { published: 0, publishFailures: 0 };
  let lastError = 0;
  let lastPublishWarning = 0;
  const onError = (which: string) => (err: Error) => {
    // ioredis retries by itself; log at most once a second.
    if (Date.now() - lastError > 1000) log("warn", `redis ${which} connection error`, errorFields(err));
    lastError = Date.now();
  };
  publisher.on("error", onError("publish"));
  subscriber.on("error", onError("subscribe"));
  let wasReady = false;
  subscriber.on("ready", () => {
    if (wasReady) {
      // Back after an outage: listen again on every channel that has listeners,
      // then let streams refill what was published while the connection was down.
      // Refilling waits for the SUBSCRIBE, so that nothing published after the refill's read can slip between the two.
      const names = [...channels.keys()];
      const refill = () => {
        for (const l of reconnectListeners) l();
      };
      if (names.length === 0) refill();
      else
        subscriber.subscribe(...names).then(refill, (err: unknown) => {
          onError("subscribe")(err as Error);
          refill();
        });
    }
    wasReady = true;
  });
  subscriber.on("message", (channel: string, message: string) => {
    // Anything with access to this Redis can publish on our channels: a
    // message that is not a lock event (or a notice) of this channel's
    // company is dropped (and a listener's failure must not escape into
    // ioredis, which would take the process down).
    try {
      if (channel === REVOKED_KEYS_CHANNEL) {
        const keyIds = parseRevokedKeys(message);
        if (!keyIds) return log("warn", "ignored a malformed key revocation message", { channel });
        revoked.deliver(ALL, keyIds);
        return;
      }
      if (channel.startsWith("baton:issue-notices:")) {
        const notice = parseNotice(message);
        if (!notice || noticeChannelOf(notice.companyId) !== channel) return log("warn", "ignored a malformed issue notice", { channel });
        notices.deliver(notice.companyId, notice.issueIds);
        return;
      }
      const event = parseLockEvent(message);
      if (!event || channelOf(event.companyId) !== channel) return log("warn", "ignored a malformed lock event message", { channel });
      listeners.deliver(event.companyId, event);
    } catch (err) {
      log("error", "a lock event listener failed", errorFields(err));
    }
  });
  /** Subscribes a channel for its first listener; later ones wait for the same confirmation. Returns the unsubscribe. */
  async function listen<T>(set: Listeners<T>, channel: string, companyId: string, listener: (value: T) => void): Promise<() => void> {
    if (set.add(companyId, listener))
      channels.set(
        channel,
        subscriber.subscribe(channel).then(() => {}),
      );
    try {
      await channels.get(channel);
    } catch (err) {
      if (set.remove(companyId, listener)) channels.delete(channel);
      throw err;
    }
    return () => {
      if (set.remove(companyId, listener)) {
        channels.delete(channel);
        subscriber.unsubscribe(channel).catch(() => {});
      }
    };
  }
  return {
    stats,
    publish(events) {
      if (events.length === 0) return;
      const failed = (n: number, err?: unknown) => {
        stats.publishFailures += n;
        if (Date.now() - lastPublishWarning < 1000) return;
        lastPublishWarning = Date.now();
        log("warn", "lock event publish failed (subscribers will refill from the ledger)", {
          events: n,
          ...(err ? errorFields(err) : { error: "Redis is unreachable" }),
        });
      };
      // Redis away: fail now, and say so, rather than after the caller (recovery --once) has gone.
      if (publisher.status !== "ready") return failed(events.length);
      const pipeline = publisher.pipeline();
      for (const event of events) pipeline.publish(channelOf(event.companyId), JSON.stringify(event));
      pipeline.exec().then(
        (results) => {
          const n = results?.filter(([err]) => err).length ?? events.length;
          stats.published += events.length - n;
          if (n > 0) failed(n);
        },
        (err: unknown) => failed(events.length, err),
      );
    },
    subscribe: (companyId, listener) => listen(listeners, channelOf(companyId), companyId, listener),
    announceIssues(companyId, issueIds) {
      if (issueIds.length === 0) return;
      publisher.publish(noticeChannelOf(companyId), JSON.stringify({ companyId, issueIds })).catch(() => {
        stats.publishFailures++;
      });
    },
    watchIssues: (companyId, listener) => listen(notices, noticeChannelOf(companyId), companyId, listener),
    announceRevokedKeys(keyIds) {
      for (let i = 0; i < keyIds.length; i += MAX_NOTICE_IDS) {
        publisher.publish(REVOKED_KEYS_CHANNEL, JSON.stringify({ keyIds: keyIds.slice(i, i + MAX_NOTICE_IDS) })).catch(() => {
          stats.publishFailures++;
        });
      }
    },
    watchRevokedKeys: (listener) => listen(revoked, REVOKED_KEYS_CHANNEL, ALL, listener),
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
