// The baton/client SDK: Baton's GraphQL API from JavaScript or TypeScript,
// without hand-written GraphQL plumbing. This is its core: typed requests and
// the live ledger as an async iterator that resumes after its last seq.
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { setTimeout as delay } from "node:timers/promises";
import { print } from "graphql";
import type { DocumentNode } from "graphql";
import { createClient } from "graphql-ws";
import type { Client as WsClient } from "graphql-ws";
import WebSocket from "ws";
import type { Context } from "@opentelemetry/api";
import { LockChangesDocument } from "./generated/graphql.js";
import { requestTrace } from "./tracing.js";
import type { LockChangesSubscription, LockChangesSubscriptionVariables } from "./generated/graphql.js";
import { work } from "./work.js";
import type { Handler, WorkOptions, Worker } from "./work.js";

export const DEFAULT_URL = "http://127.0.0.1:4000/graphql";

export interface BatonOptions {
  /** The GraphQL URL over HTTP (the WebSocket URL is derived from it). Default: BATON_URL, or http://127.0.0.1:4000/graphql. */
  url?: string;
  /** A bearer token: the admin token, a board key or an agent key. Default: BATON_TOKEN. */
  token?: string;
}

/** One committed lock change, as lockChanges() yields it. */
export type LockChange = LockChangesSubscription["lockChanged"];

export type LockChangesFilter = Omit<LockChangesSubscriptionVariables, "afterSeq"> & {
  /** Replay committed events after this seq first ("0": the whole ledger); default: from now on. */
  afterSeq?: string | null;
};

/**
 * A request the server refused, or could not be made. `code` is the GraphQL
 * error's extensions.code (UNAUTHENTICATED, FORBIDDEN, BAD_USER_INPUT,
 * LIMIT_EXCEEDED, …), or UNREACHABLE when the server did not answer.
 */
export class BatonError extends Error {
  override name = "BatonError";
  constructor(
    message: string,
    readonly code: string,
    readonly errors: readonly { message: string; extensions?: Record<string, unknown> }[] = [],
  ) {
    super(message);
  }
}

/**
 * EVENTS_PRUNED: a read that resumes after a seq (lockEvents or lockChanges
 * with afterSeq) where retention may have dropped events since. Every event
 * after `resumeAfterSeq` is still kept (docs/events.md); `oldestAvailableSeq` is
 * the first event kept after it (null: none yet). Seqs are decimal strings.
 */
export class EventsPrunedError extends BatonError {
  override name = "EventsPrunedError";
  readonly resumeAfterSeq: string;
  readonly oldestAvailableSeq: string | null;
  constructor(message: string, errors: readonly { message: string; extensions?: Record<string, unknown> }[]) {
    super(message, "EVENTS_PRUNED", errors);
    const extensions = errors[0]?.extensions ?? {};
    this.resumeAfterSeq = String(extensions.resumeAfterSeq ?? "0");
    this.oldestAvailableSeq = extensions.oldestAvailableSeq == null ? null : String(extensions.oldestAvailableSeq);
  }
}

/**
 * SEQ_AHEAD: a read that resumes after a seq the server's database has not
 * made yet (lockEvents or lockChanges with afterSeq): it was restored or
 * failed over to an older copy, or the seq is from another ledger. Every seq
 * it has made is below `ceilingSeq`; start again from "0" or from now.
 */
export class SeqAheadError extends BatonError {
  override name = "SeqAheadError";
  readonly afterSeq: string;
  readonly ceilingSeq: string;
  constructor(message: string, errors: readonly { message: string; extensions?: Record<string, unknown> }[]) {
    super(message, "SEQ_AHEAD", errors);
    const extensions = errors[0]?.extensions ?? {};
    this.afterSeq = String(extensions.afterSeq ?? "");
    this.ceilingSeq = String(extensions.ceilingSeq ?? "");
  }
}

/**
 * UNAUTHENTICATED: the token is not a key the server accepts (any more). A key
 * that worked and then gets this was revoked: rotated (rotateAgentKey,
 * rotateBoardKey), or its agent disabled (disableAgent). A worker ends with
 * it (docs/client.md, "When the key is revoked").
 */
export class UnauthenticatedError extends BatonError {
  override name = "UnauthenticatedError";
  constructor(message: string, errors: readonly { message: string; extensions?: Record<string, unknown> }[] = []) {
    super(message, "UNAUTHENTICATED", errors);
  }
}

/** The error for a GraphQL answer's errors: EventsPrunedError for EVENTS_PRUNED, SeqAheadError for SEQ_AHEAD, UnauthenticatedError for UNAUTHENTICATED, else a BatonError with the first one's code. */
function batonErrorOf(errors: readonly { message: string; extensions?: Record<string, unknown> }[]): BatonError {
  const first = errors[0]!;
  const code = String(first.extensions?.code ?? "GRAPHQL_ERROR");
  if (code === "EVENTS_PRUNED") return new EventsPrunedError(first.message, errors);
  if (code === "SEQ_AHEAD") return new SeqAheadError(first.message, errors);
  if (code === "UNAUTHENTICATED") return new UnauthenticatedError(first.message, errors);
  return new BatonError(first.message, code, errors);
}

/** Codes that end a subscription for good when graphql-ws throws them (an `error` message): resubscribing would be refused again. */
const FINAL_CODES = new Set(["EVENTS_PRUNED", "SEQ_AHEAD", "UNAUTHENTICATED", "FORBIDDEN"]);

/** The close code the API ends a WebSocket with once its key is revoked (after its subscriptions' UNAUTHENTICATED). */
const KEY_REVOKED_CLOSE = 4403;

export interface RequestOptions {
  signal?: AbortSignal;
  /**
   * The OpenTelemetry context the request belongs to (default: the active
   * one): its trace goes to the server as `traceparent` (docs/client.md, Tracing).
   */
  traceContext?: Context;
}

/** An operation's name, for the client span's name: the document's first named operation. */
function operationName(document: DocumentNode | string, query: string): string | undefined {
  if (typeof document !== "string") {
    for (const d of document.definitions) if (d.kind === "OperationDefinition" && d.name) return d.name.value;
    return undefined;
  }
  return /^\s*(?:query|mutation|subscription)\s+([_A-Za-z][_0-9A-Za-z]{0,99})/.exec(query)?.[1];
}

/** How long lockChanges().return() waits for the socket to close politely. */
const CLOSE_WAIT_MS = 1000;

/** ws with a handshake deadline: a server or proxy that never answers the upgrade is a failed connection, retried. */
class TimedWebSocket extends WebSocket {
  constructor(url: string | URL, protocols?: string | string[]) {
    super(url, protocols, { handshakeTimeout: 10_000 });
  }
}

/**
 * CONFLICT_RETRY (docs/access.md, Retrying): the request changed nothing, so
 * it is sent again, up to this many tries in all, each after a random wait of
 * up to CONFLICT_WAIT_MS × 2^(tries so far − 1): 50, 100, 200, then 400 ms.
 */
const CONFLICT_TRIES = 5;
const CONFLICT_WAIT_MS = 50;

/** Delays between reconnection attempts of lockChanges(), in ms (the last repeats). */
const RECONNECT_DELAYS = [100, 250, 500, 1000, 2000, 5000];

export class Baton {
  readonly url: string;
  private readonly token: string | undefined;

  constructor(options: BatonOptions = {}) {
    this.url = options.url ?? process.env.BATON_URL ?? DEFAULT_URL;
    this.token = options.token ?? process.env.BATON_TOKEN;
  }

  /**
   * Runs any operation of the schema; typed end to end from a codegen'd document. Throws BatonError on GraphQL errors.
   * An answer CONFLICT_RETRY (nothing was applied) is retried: up to CONFLICT_TRIES in all, after jittered waits.
   */
  async request<R, V extends Record<string, unknown> = Record<string, unknown>>(
    document: TypedDocumentNode<R, V> | DocumentNode | string,
    variables?: V,
    options: RequestOptions = {},
  ): Promise<R> {
    for (let tries = 1; ; tries++) {
      try {
        return await this.requestOnce<R, V>(document, variables, options);
      } catch (err) {
        if (!(err instanceof BatonError) || err.code !== "CONFLICT_RETRY" || tries >= CONFLICT_TRIES) throw err;
        await delay(Math.random() * CONFLICT_WAIT_MS * 2 ** (tries - 1), undefined, { signal: options.signal });
      }
    }
  }

  private async requestOnce<R, V extends Record<string, unknown>>(
    document: TypedDocumentNode<R, V> | DocumentNode | string,
    variables: V | undefined,
    options: RequestOptions,
  ): Promise<R> {
    const query = typeof document === "string" ? document : print(document);
    // W3C traceparent (src/client/tracing.ts): the server's spans of this request join the caller's trace.
    const traced = requestTrace(operationName(document, query), options.traceContext);
    let response: Response;
    try {
      response = await fetch(this.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", ...traced.headers, ...(this.token ? { authorization: `Bearer ${this.token}` } : {}) },
        body: JSON.stringify({ query, variables: variables ?? {} }),
        signal: options.signal ?? null,
      });
    } catch (err) {
      traced.end(true);
      if (options.signal?.aborted) throw err;
      throw new BatonError(`cannot reach ${this.url}: ${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message}`, "UNREACHABLE");
    }
    let body: { data?: R | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };
    try {
      body = (await response.json()) as typeof body;
    } catch {
      traced.end(true);
      throw new BatonError(`${this.url} answered ${response.status} without a GraphQL response`, "UNREACHABLE");
    }
    traced.end(Boolean(body.errors?.length));
    if (body.errors?.length) throw batonErrorOf(body.errors);
    return body.data as R;
  }

  /**
   * A worker for the agent whose key this is: claims issues and runs `handler`
   * for each, keeping the run's lease, with the outcome the handler gives
   * (src/client/work.ts, docs/client.md). Needs an agent key.
   */
  work(handler: Handler, options?: WorkOptions): Worker {
    return work(this, handler, options);
  }

  /**
   * Every committed lock change of a company that matches the filter, in seq
   * order, each once: after a lost connection, or an answer UNAVAILABLE or
   * CONFLICT_RETRY, it subscribes again after the
   * last seq it yielded (the server replays what was missed) and drops
   * anything at or below it. Ends only when the loop breaks out of it (or
   * return() is called); a refusal (a bad token, a foreign company) is thrown,
   * and so is UnauthenticatedError when the key is revoked mid-stream,
   * and so is EventsPrunedError when retention dropped events after the seq it
   * would resume from (it does not retry: resuming there would skip them),
   * and so is SeqAheadError when the server has not made that seq yet.
   * Started without afterSeq, it resumes exactly from its first event on;
   * a connection lost before that one starts again from then: pass a saved
   * seq, or "0", to miss nothing.
   */
  lockChanges(filter: LockChangesFilter): AsyncIterableIterator<LockChange> {
    let last: bigint | null = filter.afterSeq != null ? BigInt(filter.afterSeq) : null;
    let client: WsClient | null = null;
    let stopped = false;
    let current: AsyncIterableIterator<{ data?: LockChangesSubscription | null; errors?: readonly { message: string; extensions?: Record<string, unknown> }[] }> | null = null;
    const connect = () =>
      createClient({
        url: this.url.replace(/^http/, "ws"),
        webSocketImpl: TimedWebSocket,
        connectionParams: this.token ? { authorization: `Bearer ${this.token}` } : {},
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
      await Promise.race([
        Promise.allSettled([current?.return?.(), client?.dispose()]),
        new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS))),
      ]);
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
          if (Array.isArray(err) && FINAL_CODES.has(String((err[0] as { extensions?: { code?: unknown } } | undefined)?.extensions?.code))) throw batonErrorOf(err);
          // A socket closed because its key was revoked: reconnecting with the same key would be refused.
          if ((err as { code?: unknown } | null)?.code === KEY_REVOKED_CLOSE) throw new UnauthenticatedError(`the API closed the connection: ${(err as { reason?: unknown }).reason || "the key was revoked"}`);
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
}
