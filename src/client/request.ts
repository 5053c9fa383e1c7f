// One GraphQL request over HTTP: the bearer token and the caller's trace go
// with it; an answer's errors come back as BatonError (errors.ts); a
// CONFLICT_RETRY, which changed nothing, is sent again after a jittered wait.
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { setTimeout as delay } from "node:timers/promises";
import { print } from "graphql";
import type { DocumentNode } from "graphql";
import type { Context } from "@opentelemetry/api";
import { BatonError, batonErrorOf } from "./errors.js";
import { requestTrace } from "./tracing.js";

/** Where a Baton's requests and subscriptions go, and the bearer token they carry (none: anonymous). */
export interface Endpoint {
  readonly url: string;
  readonly token: string | undefined;
}

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

/**
 * CONFLICT_RETRY (docs/access.md, Retrying): the request changed nothing, so
 * it is sent again, up to this many tries in all, each after a random wait of
 * up to CONFLICT_WAIT_MS × 2^(tries so far − 1): 50, 100, 200, then 400 ms.
 */
const CONFLICT_TRIES = 5;
const CONFLICT_WAIT_MS = 50;

/**
 * Runs any operation of the schema at `endpoint` (Baton.request). Throws BatonError on GraphQL errors.
 * An answer CONFLICT_RETRY (nothing was applied) is retried: up to CONFLICT_TRIES in all, after jittered waits.
 */
export async function request<R, V extends Record<string, unknown> = Record<string, unknown>>(
  endpoint: Endpoint,
  document: TypedDocumentNode<R, V> | DocumentNode | string,
  variables?: V,
  options: RequestOptions = {},
): Promise<R> {
  return retryingConflicts(() => requestOnce<R, V>(endpoint, document, variables, options), options.signal);
}

/** Runs `attempt` again while it throws CONFLICT_RETRY (nothing was applied), up to CONFLICT_TRIES in all, after jittered waits. */
export async function retryingConflicts<R>(attempt: () => Promise<R>, signal?: AbortSignal): Promise<R> {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof BatonError) || err.code !== "CONFLICT_RETRY" || tries >= CONFLICT_TRIES) throw err;
      await delay(Math.random() * CONFLICT_WAIT_MS * 2 ** (tries - 1), undefined, { signal });
    }
  }
}

async function requestOnce<R, V extends Record<string, unknown>>(
  endpoint: Endpoint,
  document: TypedDocumentNode<R, V> | DocumentNode | string,
  variables: V | undefined,
  options: RequestOptions,
): Promise<R> {
  const query = typeof document === "string" ? document : print(document);
  // W3C traceparent (src/client/tracing.ts): the server's spans of this request join the caller's trace.
  const traced = requestTrace(operationName(document, query), options.traceContext);
  let response: Response;
  try {
    response = await fetch(endpoint.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        ...traced.headers,
        ...(endpoint.token ? { authorization: `Bearer ${endpoint.token}` } : {}),
      },
      body: JSON.stringify({ query, variables: variables ?? {} }),
      signal: options.signal ?? null,
    });
  } catch (err) {
    traced.end(true);
    if (options.signal?.aborted) throw err;
    throw new BatonError(`cannot reach ${endpoint.url}: ${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message}`, "UNREACHABLE");
  }
  let body: { data?: R | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };
  try {
    body = (await response.json()) as typeof body;
  } catch {
    traced.end(true);
    throw new BatonError(`${endpoint.url} answered ${response.status} without a GraphQL response`, "UNREACHABLE");
  }
  traced.end(Boolean(body.errors?.length));
  if (body.errors?.length) throw batonErrorOf(body.errors);
  return body.data as R;
}
