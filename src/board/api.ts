// The board's only way to the server: GraphQL over HTTP on this page's own
// origin, with the key in the Authorization header (never in a URL), and the
// live ledger as GraphQL over SSE, read from a streamed POST so the key stays a
// header there too (parsed by eventsource-parser). Both are typed by the
// board's codegen'd documents. The key can be switched in place (replaceKey,
// after rotateBoardKey): what is open is reopened with the new key, and
// nothing the old key had open signs out.
import type { DocumentTypeDecoration } from "@graphql-typed-document-node/core";
import type { EventSourceMessage } from "eventsource-parser";
import { EventSourceParserStream } from "eventsource-parser/stream";
import { ServerClock } from "./clock.js";

const ENDPOINT = "/graphql";

/**
 * A refused request: `code` is the GraphQL error's extensions.code, or UNREACHABLE;
 * `extensions` the rest of them (EVENTS_PRUNED's resumeAfterSeq, for one).
 */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly extensions: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

/** EVENTS_PRUNED: retention dropped events after the afterSeq asked; every event after `resumeAfterSeq` is still kept. */
export function prunedThrough(err: unknown): string | null {
  if (!(err instanceof ApiError) || err.code !== "EVENTS_PRUNED") return null;
  const seq = err.extensions.resumeAfterSeq;
  return typeof seq === "string" && /^\d+$/.test(seq) ? seq : null;
}

type GraphQLErrorBody = { message: string; extensions?: { code?: string } & Record<string, unknown> };
const apiError = (error: GraphQLErrorBody) => new ApiError(error.message, error.extensions?.code ?? "ERROR", error.extensions ?? {});

export type Doc<R, V> = DocumentTypeDecoration<R, V> & { toString(): string };

/** How a subscription ended without an error: the server completed it, the caller aborted it, or the key was switched (reopen it at once). */
export type Ended = "complete" | "aborted" | "switched";

export class Api {
  /** The open subscriptions' own aborts: a key switch ends them, and their followers open them again with the new key. */
  private readonly streams = new Set<AbortController>();
  /** A request in flight that replaces this very key (replaceKey): a refusal of the old key waits for its answer. */
  private replacing: Promise<unknown> | null = null;
  /** The server's clock, as every answer's Date header tells it. */
  readonly clock = new ServerClock();

  constructor(private token: string) {}

  /** POST /graphql with a key; a network failure is ApiError UNREACHABLE. */
  private async post(token: string, query: string, variables: unknown, accept: string, signal?: AbortSignal): Promise<Response> {
    const sentAt = Date.now();
    let response: Response;
    try {
      response = await fetch(ENDPOINT, {
        method: "POST",
        headers: { "content-type": "application/json", accept, authorization: `Bearer ${token}` },
        body: JSON.stringify({ query, variables }),
        signal: signal ?? null,
      });
    } catch {
      throw new ApiError("the server did not answer", "UNREACHABLE");
    }
    this.clock.sample(response.headers.get("date"), sentAt, Date.now());
    return response;
  }

  /** One operation with one key; throws ApiError with the server's message when it answers errors. */
  private async send<R, V>(token: string, document: Doc<R, V>, variables: V): Promise<R> {
    const response = await this.post(token, document.toString(), variables, "application/graphql-response+json, application/json");
    const body = (await response.json().catch(() => null)) as {
      data?: R;
      errors?: GraphQLErrorBody[];
    } | null;
    const error = body?.errors?.[0];
    if (error) throw apiError(error);
    if (!body?.data) throw new ApiError(`the server answered ${response.status}`, "UNREACHABLE");
    return body.data;
  }

  /**
   * Whether `err` only says that `token` was replaced by this page's own
   * rotation: an UNAUTHENTICATED that arrives while the rotation is in flight
   * waits for its answer, and is the rotation's doing if the key has changed since.
   */
  private async replacedSince(token: string, err: unknown): Promise<boolean> {
    if (!(err instanceof ApiError) || err.code !== "UNAUTHENTICATED") return false;
    await this.replacing?.catch(() => {});
    return this.token !== token;
  }

  /**
   * One operation; throws ApiError with the server's message when it answers
   * errors. One refused because this page had just replaced its key is sent
   * again with the new key.
   */
  async request<R, V>(document: Doc<R, V>, variables: V): Promise<R> {
    const token = this.token;
    try {
      return await this.send(token, document, variables);
    } catch (err) {
      if (!(await this.replacedSince(token, err))) throw err;
      return this.send(this.token, document, variables);
    }
  }

  /**
   * A mutation that revokes the very key it is sent with and answers its
   * successor (rotateBoardKey). The server ends what the old key has open as
   * soon as it commits, maybe before its answer arrives here: until it does,
   * refusals of the old key wait, and then count as a switch, not as a
   * sign-out. Once it answers, every request carries the new key and every
   * open subscription ends with "switched", for its follower to reopen with it.
   * The new key is kept in this object only; the caller decides where else.
   */
  async replaceKey<R, V>(document: Doc<R, V>, variables: V, newKey: (data: R) => string): Promise<R> {
    const sent = this.send(this.token, document, variables).then((data) => {
      this.token = newKey(data);
      for (const stream of this.streams) stream.abort();
      return data;
    });
    this.replacing = sent;
    try {
      return await sent;
    } finally {
      if (this.replacing === sent) this.replacing = null;
    }
  }

  /**
   * A subscription over SSE: calls `opened` once the server has accepted it,
   * then `next` for each result until the stream ends (resolves with how) or
   * fails (rejects with ApiError). `signal` ends it ("aborted"); a key switch
   * (replaceKey) ends it too ("switched"), refused by the server first or not.
   */
  async subscribe<R, V>(document: Doc<R, V>, variables: V, handlers: { opened(): void; next(data: R): void }, signal: AbortSignal): Promise<Ended> {
    const token = this.token;
    const own = new AbortController();
    const abort = () => own.abort();
    signal.addEventListener("abort", abort);
    if (signal.aborted) own.abort();
    this.streams.add(own);
    let reader: ReadableStreamDefaultReader<EventSourceMessage> | null = null;
    try {
      const response = await this.post(token, document.toString(), variables, "text/event-stream", own.signal);
      if (!response.ok || !response.body) {
        throw new ApiError(`the server answered ${response.status}`, response.status === 401 ? "UNAUTHENTICATED" : "UNREACHABLE");
      }
      handlers.opened();
      reader = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
      for (;;) {
        const { value: message, done } = await reader.read();
        if (done || message.event === "complete") return "complete";
        if (message.event !== "next" || !message.data) continue;
        const result = JSON.parse(message.data) as { data?: R; errors?: GraphQLErrorBody[] };
        const error = result.errors?.[0];
        if (error) throw apiError(error);
        if (result.data) handlers.next(result.data);
      }
    } catch (err) {
      // Ended by a key switch: aborted by it, or refused by the server as the rotation committed.
      if (own.signal.aborted && this.token !== token) return "switched";
      if (signal.aborted) return "aborted";
      if (await this.replacedSince(token, err)) return "switched";
      throw err instanceof ApiError ? err : new ApiError("the live connection dropped", "UNREACHABLE");
    } finally {
      reader?.releaseLock();
      this.streams.delete(own);
      signal.removeEventListener("abort", abort);
    }
  }
}
