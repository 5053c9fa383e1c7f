// The board's only way to the server: GraphQL over HTTP on this page's own
// origin, with the key in the Authorization header (never in a URL), and the
// live ledger as GraphQL over SSE, read from a streamed POST so the key stays a
// header there too. Both are typed by the board's codegen'd documents.
import type { DocumentTypeDecoration } from "@graphql-typed-document-node/core";

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

export class Api {
  constructor(private readonly token: string) {}

  /** POST /graphql with the key; a network failure is ApiError UNREACHABLE. */
  private async post(query: string, variables: unknown, accept: string, signal?: AbortSignal): Promise<Response> {
    try {
      return await fetch(ENDPOINT, {
        method: "POST",
        headers: { "content-type": "application/json", accept, authorization: `Bearer ${this.token}` },
        body: JSON.stringify({ query, variables }),
        signal: signal ?? null,
      });
    } catch {
      throw new ApiError("the server did not answer", "UNREACHABLE");
    }
  }

  /** One operation; throws ApiError with the server's message when it answers errors. */
  async request<R, V>(document: Doc<R, V>, variables: V): Promise<R> {
    const response = await this.post(document.toString(), variables, "application/graphql-response+json, application/json");
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
   * A subscription over SSE: calls `opened` once the server has accepted it,
   * then `next` for each result until the stream ends (resolves) or fails
   * (rejects with ApiError). `signal` ends it.
   */
  async subscribe<R, V>(document: Doc<R, V>, variables: V, handlers: { opened(): void; next(data: R): void }, signal: AbortSignal): Promise<void> {
    let response: Response;
    try {
      response = await this.post(document.toString(), variables, "text/event-stream", signal);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    if (!response.ok || !response.body) throw new ApiError(`the server answered ${response.status}`, response.status === 401 ? "UNAUTHENTICATED" : "UNREACHABLE");
    handlers.opened();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(message)?.[1];
          const data = message
            .split("\n")
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trimStart())
            .join("\n");
          if (event === "complete") return;
          if (event !== "next" || !data) continue;
          const result = JSON.parse(data) as { data?: R; errors?: GraphQLErrorBody[] };
          const error = result.errors?.[0];
          if (error) throw apiError(error);
          if (result.data) handlers.next(result.data);
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      throw err instanceof ApiError ? err : new ApiError("the live connection dropped", "UNREACHABLE");
    } finally {
      reader.releaseLock();
    }
  }
}
