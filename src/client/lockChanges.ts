// Baton.lockChanges(): the live ledger as an async iterator over graphql-ws,
// which subscribes again after the last seq it yielded whenever the
// connection is lost (the server replays what was missed), and ends only when
// its caller stops it or the server refuses it for good.
import { print } from "graphql";
import { createClient } from "graphql-ws";
import type { Client as WsClient } from "graphql-ws";
import WebSocket from "ws";
import { BatonError, UnauthenticatedError, batonErrorOf } from "./errors.js";
import { LockChangesDocument } from "./generated/graphql.js";
import type { LockChangesSubscription, LockChangesSubscriptionVariables } from "./generated/graphql.js";
import type { Endpoint } from "./request.js";

/** One committed lock change, as lockChanges() yields it. */
export type LockChange = LockChangesSubscription["lockChanged"];

export type LockChangesFilter = Omit<LockChangesSubscriptionVariables, "afterSeq"> & {
  /** Replay committed events after this seq first ("0": the whole ledger); default: from now on. */
  afterSeq?: string | null;
};

/** Codes that end a subscription for good when graphql-ws throws them (an `error` message): resubscribing would be refused again. */
const FINAL_CODES = new Set(["EVENTS_PRUNED", "SEQ_AHEAD", "UNAUTHENTICATED", "FORBIDDEN"]);

/** The close code the API ends a WebSocket with once its key is revoked (after its subscriptions' UNAUTHENTICATED). */
const KEY_REVOKED_CLOSE = 4403;

/** How long lockChanges().return() waits for the socket to close politely. */
const CLOSE_WAIT_MS = 1000;

/** ws with a handshake deadline: a server or proxy that never answers the upgrade is a failed connection, retried. */
class TimedWebSocket extends WebSocket {
  constructor(url: string | URL, protocols?: string | string[]) {
    super(url, protocols, { handshakeTimeout: 10_000 });
  }
}

/** Delays between reconnection attempts of lockChanges(), in ms (the last repeats). */
const RECONNECT_DELAYS = [100, 250, 500, 1000, 2000, 5000];

/** Baton.lockChanges() against `endpoint`: what it yields, resumes and throws is documented there (baton.ts). */
export function lockChanges(endpoint: Endpoint, filter: LockChangesFilter): AsyncIterableIterator<LockChange> {
  let last: bigint | null = filter.afterSeq != null ? BigInt(filter.afterSeq) : null;
  let client: WsClient | null = null;
  let stopped = false;
  let current: AsyncIterableIterator<{
    data?: LockChangesSubscription | null;
    errors?: readonly { message: string; extensions?: Record<string, unknown> }[];
  }> | null = null;
  const connect = () =>
    createClient({
      url: endpoint.url.replace(/^http/, "ws"),
      webSocketImpl: TimedWebSocket,
      connectionParams: endpoint.token ? { authorization: `Bearer ${endpoint.token}` } : {},
      retryAttempts: 0, // reconnection is this iterator's: each time with a new afterSeq
      lazy: true,
    });
  // Ending must not wait on the network: a handshake that never completes
  // (a proxy that drops WebSockets) would otherwise hold return() for ever.
  // next() calls waiting on the generator: stopping answers them at once. (Not a race against one
  // long-lived promise: each race would leave a handler on it, holding every event ever yielded.)
  const waiting = new Set<(result: IteratorResult<LockChange>) => void>();
  const stop = () => {
    for (const resolve of waiting) resolve({ done: true, value: undefined });
    waiting.clear();
  };
  const close = async () => {
    stopped = true;
    stop();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([Promise.allSettled([current?.return?.(), client?.dispose()]), new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
  };
  async function* events(): AsyncGenerator<LockChange> {
    for (let attempt = 0; !stopped; attempt++) {
      client = connect();
      const variables: LockChangesSubscriptionVariables = { ...filter, afterSeq: last === null ? null : String(last) };
      current = client.iterate({ query: print(LockChangesDocument), variables });
      try {
        for await (const result of current) {
          if (result.errors?.length) {
            const first = result.errors[0]!;
            const code = String(first.extensions?.code ?? "GRAPHQL_ERROR");
            // Failed for the moment (the database away, a conflict, a fault): the ledger keeps every event, so resubscribe after `last`.
            if (code === "SUBSCRIPTION_OVERFLOW" || code === "INTERNAL_SERVER_ERROR" || code === "UNAVAILABLE" || code === "CONFLICT_RETRY") break;
            throw batonErrorOf(result.errors); // EVENTS_PRUNED among them: resubscribing after `last` would be refused again
          }
          attempt = 0;
          const event = result.data!.lockChanged;
          const seq = BigInt(event.seq);
          if (last !== null && seq <= last) continue;
          last = seq;
          yield event;
        }
      } catch (err) {
        if (err instanceof BatonError) throw err;
        // graphql-ws ends an operation with an `error` message by throwing its errors (an array):
        // the key revoked mid-stream (UNAUTHENTICATED), or the history pruned, is final.
        if (Array.isArray(err) && FINAL_CODES.has(String((err[0] as { extensions?: { code?: unknown } } | undefined)?.extensions?.code))) {
          throw batonErrorOf(err);
        }
        // A socket closed because its key was revoked: reconnecting with the same key would be refused.
        if ((err as { code?: unknown } | null)?.code === KEY_REVOKED_CLOSE) {
          throw new UnauthenticatedError(`the API closed the connection: ${(err as { reason?: unknown }).reason || "the key was revoked"}`);
        }
        // The connection was lost: subscribe again below, after `last`.
      } finally {
        await client.dispose();
      }
      if (stopped) return;
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_DELAYS[Math.min(attempt, RECONNECT_DELAYS.length - 1)]));
    }
  }
  const inner = events();
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    next: () => {
      if (stopped) return Promise.resolve({ done: true, value: undefined });
      return new Promise<IteratorResult<LockChange>>((resolve, reject) => {
        waiting.add(resolve);
        inner.next().then(
          (result) => {
            waiting.delete(resolve);
            resolve(result);
          },
          (err: unknown) => {
            waiting.delete(resolve);
            reject(err);
          },
        );
      });
    },
    async return() {
      await close();
      inner.return(undefined).catch(() => {}); // settles once the generator is at rest; nobody needs to wait
      return { done: true, value: undefined };
    },
    async throw(err?: unknown) {
      await close();
      inner.return(undefined).catch(() => {});
      throw err;
    },
  };
}
