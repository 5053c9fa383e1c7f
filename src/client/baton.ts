// The baton/client SDK's façade: a Baton holds the API's URL and a token, and
// its methods delegate to request.ts (typed requests), lockChanges.ts (the
// live ledger) and work.ts (the worker).
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import type { DocumentNode } from "graphql";
import { lockChanges } from "./lockChanges.js";
import type { LockChange, LockChangesFilter } from "./lockChanges.js";
import { request } from "./request.js";
import type { RequestOptions } from "./request.js";
import { work } from "./work.js";
import type { Handler, WorkOptions, Worker } from "./work.js";

export const DEFAULT_URL = "http://127.0.0.1:4000/graphql";

export interface BatonOptions {
  /** The GraphQL URL over HTTP (the WebSocket URL is derived from it). Default: BATON_URL, or http://127.0.0.1:4000/graphql. */
  url?: string;
  /** A bearer token: the admin token, a board key or an agent key. Default: BATON_TOKEN. */
  token?: string;
}

export class Baton {
  readonly url: string;
  private readonly token: string | undefined;

  constructor(options: BatonOptions = {}) {
    this.url = options.url ?? process.env.BATON_URL ?? DEFAULT_URL;
    this.token = options.token ?? process.env.BATON_TOKEN;
  }

  /**
   * Runs any operation of the schema; typed end to end from a codegen'd document. Throws BatonError on GraphQL errors.
   * An answer CONFLICT_RETRY (nothing was applied) is retried: up to CONFLICT_TRIES (request.ts) in all, after jittered waits.
   */
  request<R, V extends Record<string, unknown> = Record<string, unknown>>(
    document: TypedDocumentNode<R, V> | DocumentNode | string,
    variables?: V,
    options: RequestOptions = {},
  ): Promise<R> {
    return request<R, V>({ url: this.url, token: this.token }, document, variables, options);
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
    return lockChanges({ url: this.url, token: this.token }, filter);
  }
}
