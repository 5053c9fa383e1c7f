// Counts of what stays open (WebSockets, SSE streams, subscriptions), per key
// and per company, on this instance. Each open() either returns the function
// that gives the place back or throws LimitExceededError; a place is given
// back exactly once, however the thing it held ends.
import { LimitExceededError } from "./settings.js";
import type { Limits } from "./settings.js";

class Counter {
  private readonly counts = new Map<string, number>();

  /** Takes a place under `key` if fewer than `max` are taken. */
  take(key: string, max: number): boolean {
    const n = this.counts.get(key) ?? 0;
    if (n >= max) return false;
    this.counts.set(key, n + 1);
    return true;
  }

  give(key: string): void {
    const n = (this.counts.get(key) ?? 1) - 1;
    if (n <= 0) this.counts.delete(key);
    else this.counts.set(key, n);
  }
}

/** Gives back at most once. */
function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (!done) {
      done = true;
      fn();
    }
  };
}

export class Admission {
  private readonly connections = new Counter();
  private readonly subscriptions = new Counter();

  constructor(private readonly limits: Limits) {}

  /**
   * A WebSocket or an SSE stream for `key` (principalKey(): a key, or
   * `anonymous:<address>` for a caller without a valid one).
   */
  openConnection(key: string): () => void {
    const anonymous = key.startsWith("anonymous:");
    const [limit, max] = anonymous
      ? (["anonymousConnectionsPerAddress", this.limits.anonymousConnectionsPerAddress] as const)
      : (["connectionsPerKey", this.limits.connectionsPerKey] as const);
    if (!this.connections.take(key, max)) {
      throw new LimitExceededError(
        limit,
        max,
        anonymous ? "too many connections without a valid key from this address" : "too many WebSockets and event streams open for this key",
      );
    }
    return once(() => this.connections.give(key));
  }

  /** A lockChanged subscription of `key` to `companyId`. */
  openSubscription(key: string, companyId: string): () => void {
    const company = `company:${companyId}`;
    if (!this.subscriptions.take(key, this.limits.subscriptionsPerKey)) {
      throw new LimitExceededError("subscriptionsPerKey", this.limits.subscriptionsPerKey, "too many subscriptions open for this key");
    }
    if (!this.subscriptions.take(company, this.limits.subscriptionsPerCompany)) {
      this.subscriptions.give(key);
      throw new LimitExceededError("subscriptionsPerCompany", this.limits.subscriptionsPerCompany, "too many subscriptions open for this company");
    }
    return once(() => {
      this.subscriptions.give(key);
      this.subscriptions.give(company);
    });
  }
}
