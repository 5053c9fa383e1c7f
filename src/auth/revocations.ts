// Revoked keys, on every API instance within a second (docs/access.md,
// "Rotating and revoking keys"). Principals stay cached (principal.ts): the
// claim path keeps its one round trip. A revocation does not disable the
// cache, it removes the revoked keys from it, and whatever still holds one of
// their principals (an open WebSocket, a subscription) is told.
//
// How an instance hears of a revocation, fastest first:
//   - it made it (rotateKeys.ts, disableAgent.ts): at once, after commit;
//   - pub/sub (src/events/bus.ts, channel baton:key-revocations): the key ids
//     only, never key material. Anyone who can reach Redis can publish there,
//     so a message only evicts (the next request looks the key up again, and
//     the database decides); open subscriptions are ended only for keys the
//     database confirms revoked;
//   - the revocation poll, every BATON_LEDGER_POLL_MS: the keys revoked by
//     transactions the previous poll's snapshot could not see (running then,
//     or not yet begun), so each committed revocation is read once, whatever
//     happened to pub/sub and however long other transactions stay open. A
//     Redis outage keeps a revoked key alive one interval at most.
import type { Db } from "../db/client.js";
import type { EventBus } from "../events/bus.js";
import { queryOne, sql, statement } from "../db/sql.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

/** Revoked key ids remembered (a revoked key never works again, so this only spares lookups). */
const MAX_REMEMBERED = 100_000;

/** How an instance first heard of a revoked key. */
export type Heard = "here" | "pubsub" | "poll";

export class KeyRevocations {
  private readonly revoked = new Set<string>();
  private readonly watchers = new Map<string, Set<() => void>>();
  /** Caches to evict from: the given keys, or (null) all. */
  private readonly forgetters = new Set<(keyIds: ReadonlySet<string> | null) => void>();
  /** Bumped whenever keys may have been revoked: a key lookup that began before a bump must not be cached. */
  generation = 0;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly bus: Pick<EventBus, "announceRevokedKeys" | "watchRevokedKeys">,
    /** Counts revoked keys by how this instance first heard of them (metrics). */
    private readonly onRevoked: (heard: Heard, keys: number) => void = () => {},
  ) {}

  /** Keys this instance has revoked, once committed: refused here at once, and every instance told. */
  committed(keyIds: readonly string[]): void {
    if (keyIds.length === 0) return;
    this.revokedKeys(keyIds, "here");
    this.bus.announceRevokedKeys(keyIds);
  }

  /** Listens on pub/sub for other instances' revocations; returns the stop function. Never waits for Redis. */
  listen(): () => void {
    let stop: (() => void) | null = null;
    let stopped = false;
    this.bus
      .watchRevokedKeys((ids) => void this.heard(ids))
      .then(
        (unwatch) => {
          if (stopped) unwatch();
          else stop = unwatch;
        },
        (err: unknown) => this.log("warn", "not listening for key revocations on pub/sub; the revocation poll still finds them", errorFields(err)),
      );
    return () => {
      stopped = true;
      stop?.();
    };
  }

  /** A principal cache to evict from (principal.ts). */
  onForget(forget: (keyIds: ReadonlySet<string> | null) => void): void {
    this.forgetters.add(forget);
  }

  isRevoked(keyId: string | null | undefined): boolean {
    return keyId != null && this.revoked.has(keyId);
  }

  /**
   * Calls `onRevoked` once, when the key is revoked (at once, on a later tick,
   * if it already is). Returns the unwatch function.
   */
  watch(keyId: string, onRevoked: () => void): () => void {
    if (this.revoked.has(keyId)) {
      queueMicrotask(onRevoked);
      return () => {};
    }
    let set = this.watchers.get(keyId);
    if (!set) {
      set = new Set();
      this.watchers.set(keyId, set);
    }
    set.add(onRevoked);
    return () => {
      set.delete(onRevoked);
      if (set.size === 0 && this.watchers.get(keyId) === set) this.watchers.delete(keyId);
    };
  }

  /**
   * Empties every key cache and asks the database about every key something
   * is watching (the revocation poll, when it could not read its snapshot at
   * start: a key revoked before that snapshot would never be reported by a poll).
   */
  async forgetAll(): Promise<void> {
    this.generation++;
    for (const forget of this.forgetters) forget(null);
    await this.heard([...this.watchers.keys()], "poll");
  }

  /** Keys the database says are revoked (a committed revocation, or read back from it). */
  revokedKeys(keyIds: readonly string[], heard: Heard): void {
    const fresh = keyIds.filter((id) => !this.revoked.has(id));
    if (fresh.length === 0) return;
    this.onRevoked(heard, fresh.length);
    this.generation++;
    for (const id of fresh) {
      if (this.revoked.size >= MAX_REMEMBERED) this.revoked.delete(this.revoked.values().next().value!);
      this.revoked.add(id);
    }
    const set = new Set(fresh);
    for (const forget of this.forgetters) forget(set);
    for (const id of fresh) {
      const watchers = this.watchers.get(id);
      this.watchers.delete(id);
      for (const w of watchers ?? []) {
        try {
          w();
        } catch (err) {
          this.log("error", "a key revocation watcher failed", errorFields(err));
        }
      }
    }
  }

  /**
   * Keys a pub/sub message says were revoked: evicted at once; revoked for
   * everything watching them once the database confirms it.
   */
  async heard(keyIds: readonly string[], how: Heard = "pubsub"): Promise<void> {
    const unknown = keyIds.filter((id) => !this.revoked.has(id));
    if (unknown.length === 0) return;
    this.generation++;
    const set = new Set(unknown);
    for (const forget of this.forgetters) forget(set);
    try {
      // Which of these keys the database has revoked.
      const row = await queryOne<{ ids: string[] }>(
        this.db,
        statement(
          "CONFIRM_REVOKED_KEYS",
          sql`
          SELECT coalesce(array_agg(k.id::text), '{}') AS ids FROM api_keys k
           WHERE k.id = ANY(${unknown}::uuid[]) AND k.revoked_at IS NOT NULL`,
        ),
      );
      this.revokedKeys(row.ids, how);
    } catch (err) {
      // the poll finds them within an interval
      this.log("warn", "could not confirm revoked keys; the revocation poll will", errorFields(err));
    }
  }
}

/**
 * The revocation poll (REVOKED_SINCE). start() reads a snapshot before the
 * instance serves: a key revoked by a transaction it sees is refused by every
 * lookup, one revoked by a transaction it does not see is found by a poll. If
 * the database cannot be reached then, the instance serves all the same (it
 * answers UNAVAILABLE), and the first poll that reads a snapshot empties the
 * key cache: whatever it held may have been revoked before that snapshot.
 */
export class RevocationPoll {
  /** The previous poll's snapshot (pg_snapshot text): what it could see has been read. */
  private seen: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private lastWarning = 0;

  constructor(
    private readonly db: Db,
    private readonly revocations: KeyRevocations,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    if (this.timer) return;
    this.timer = setInterval(() => void this.poll(), this.intervalMs);
    this.timer.unref();
    await this.poll();
  }

  /** One poll (the first reads the horizon only). */
  async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      if (this.seen === null) {
        // Invariant: every revocation this snapshot sees is
        // in the database before the instance serves; REVOKED_SINCE reads the rest.
        const row = await queryOne<{ snapshot: string }>(this.db, statement("REVOCATION_SNAPSHOT", sql`SELECT pg_current_snapshot()::text AS snapshot`));
        this.seen = row.snapshot;
        await this.revocations.forgetAll();
        return;
      }
      // Invariant: reads each committed revocation once, in the
      // first poll whose snapshot sees it: the keys revoked by a transaction
      // the previous snapshot did not see, i.e. one that had not begun (xid at
      // or above its xmax) or was running (in its xip list). Transactions it
      // saw end are not read again, so one left open anywhere in the cluster
      // (another database's, a prepared one) costs an index probe, not a
      // re-read of every key revoked since it began.
      const row = await queryOne<{ snapshot: string; ids: string[] }>(
        this.db,
        statement(
          "REVOKED_SINCE",
          sql`
          SELECT pg_current_snapshot()::text AS snapshot,
                 coalesce((SELECT array_agg(k.id::text) FROM api_keys k
                            WHERE k.revoked_xid >= pg_snapshot_xmax(${this.seen}::pg_snapshot)
                               OR k.revoked_xid = ANY(ARRAY(SELECT pg_snapshot_xip(${this.seen}::pg_snapshot)))), '{}') AS ids`,
        ),
      );
      this.revocations.revokedKeys(row.ids, "poll");
      this.seen = row.snapshot;
    } catch (err) {
      if (Date.now() - this.lastWarning > 60_000) {
        this.lastWarning = Date.now();
        this.log("warn", "the revocation poll could not read the database; retrying every interval", errorFields(err));
      }
    } finally {
      this.polling = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
