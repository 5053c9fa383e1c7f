// What a client may see of an error. Our own error classes become client
// errors with their code; GraphQL's errors pass, less anything a library put
// in them about its internals (yoga echoes a JSON parser's message as
// extensions.originalError); everything else is masked and logged.
//
// HTTP status: yoga answers errors in GraphQL requests 200 to application/json
// clients (GraphQL over HTTP) and anything else 4xx; malformed bodies and
// limits stay 4xx here.
import { GraphQLError } from "graphql";
import { SubscriptionOverflowError } from "../events/notices.js";
import { LimitExceededError } from "../bounds/settings.js";
import { EventsPrunedError, ForbiddenError, InvalidInputError, NotFoundError, SeqAheadError } from "../domain/errors.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";
import { RetriesExhaustedError, unavailability } from "../db/sql.js";
import type { Metrics } from "../metrics.js";

/** The code of a GraphQLError graphql-js raised without one, from what it says. */
export function codeOf(message: string): string {
  if (/^Syntax Error/.test(message)) return "GRAPHQL_PARSE_FAILED";
  if (/^Variable "\$|^Too many errors processing variables/.test(message)) return "BAD_USER_INPUT";
  if (/^Unable to identify operation|^Could not determine what operation|^Must provide operation|^Unknown operation named/.test(message)) {
    return "OPERATION_RESOLUTION_FAILURE";
  }
  return "GRAPHQL_VALIDATION_FAILED";
}

/**
 * yoga refuses some requests before GraphQL with an empty body (a
 * Content-Type it does not take, an Accept it cannot meet). Every refusal
 * here is JSON with a message and a code, like every other.
 */
export function emptyRefusals() {
  const say: Record<number, string> = {
    405: "use GET or POST",
    406:
      "the Accept header allows no answer this endpoint gives: accept application/json (or application/graphql-response+json); " +
      "subscriptions also text/event-stream",
    415: "send the operation as JSON: Content-Type: application/json",
  };
  return {
    onResponse({ response, setResponse }: { response: Response; setResponse(r: Response): void }) {
      if (response.status < 400 || response.body !== null || !say[response.status]) return;
      const headers = new Headers(response.headers);
      headers.set("content-type", "application/json; charset=utf-8");
      headers.delete("content-length");
      const body = JSON.stringify({ errors: [{ message: say[response.status], extensions: { code: "BAD_REQUEST" } }] });
      setResponse(new Response(body, { status: response.status, headers }));
    },
  };
}

export function maskError(log: Logger, metrics: Metrics) {
  return (error: unknown, message: string): Error => {
    const located = error instanceof GraphQLError ? error : null;
    const original = located?.originalError ?? error;
    const clientError = (msg: string, extensions: Record<string, unknown>) => new GraphQLError(msg, { nodes: located?.nodes, path: located?.path, extensions });
    if (original instanceof InvalidInputError) return clientError(original.message, { code: "BAD_USER_INPUT" });
    if (original instanceof ForbiddenError) return clientError(original.message, { code: "FORBIDDEN" });
    if (original instanceof NotFoundError) return clientError(original.message, { code: "NOT_FOUND" });
    if (original instanceof EventsPrunedError) {
      return clientError(original.message, {
        code: "EVENTS_PRUNED",
        resumeAfterSeq: original.resumeAfterSeq.toString(),
        oldestAvailableSeq: original.oldestAvailableSeq?.toString() ?? null,
      });
    }
    if (original instanceof SeqAheadError) {
      return clientError(original.message, { code: "SEQ_AHEAD", afterSeq: original.afterSeq.toString(), ceilingSeq: original.ceilingSeq.toString() });
    }
    if (original instanceof SubscriptionOverflowError) return clientError(original.message, { code: "SUBSCRIPTION_OVERFLOW" });
    if (original instanceof LimitExceededError) {
      metrics.limitRefusals.inc({ limit: original.limit });
      return clientError(original.message, original.extensions);
    }
    if (original instanceof GraphQLError) {
      const shown = located ?? original;
      const { originalError, http, ...extensions } = shown.extensions as {
        originalError?: unknown;
        http?: { status?: number; spec?: boolean };
        code?: unknown;
      };
      // graphql-js reports bad variables and invalid documents without a code: every error a client sees has one.
      // One with a path was raised while the answer was built (a value that cannot be serialised): ours, not the client's.
      if (extensions.code === undefined && shown.path) {
        log("error", "unexpected error", { error: shown.message, path: shown.path.join(".") });
        return clientError(message, { code: "INTERNAL_SERVER_ERROR" });
      }
      if (extensions.code === undefined) extensions.code = codeOf(shown.message);
      else if (originalError === undefined && !(extensions.code === "LIMIT_EXCEEDED" && http?.spec)) return shown;
      // A request refused before it is a GraphQL request (a body that is not JSON, one over a limit) is
      // answered 4xx even to application/json clients: yoga tells by `spec`, or by an originalError, which is not shown.
      return new GraphQLError(shown.message, {
        nodes: shown.nodes,
        path: shown.path,
        extensions: http ? { ...extensions, http: { status: http.status } } : extensions,
      });
    }
    // yoga parses a GET's `variables` and `extensions` query parameters as JSON, and lets the SyntaxError through.
    if (original instanceof SyntaxError) {
      return clientError("the variables and extensions parameters must be JSON", { code: "BAD_REQUEST", http: { status: 400 } });
    }
    if (original instanceof RetriesExhaustedError) {
      // Concurrent writers won every try (a key's last slot, one issue's ledger order): the client's to retry, not a bug.
      log("warn", "conflict retries exhausted", { tries: original.tries, elapsedMs: Math.round(original.elapsedMs), path: located?.path?.join(".") });
      return clientError("concurrent changes to the same rows won every try; nothing was changed: retry (docs/access.md, Retrying)", {
        code: "CONFLICT_RETRY",
        outcome: "NOT_APPLIED",
      });
    }
    const away = unavailability(original);
    if (away) {
      // The database is away: the client's to retry, not a bug (no stack in the log).
      const lastLine = String((original as Error)?.message ?? original)
        .split("\n")
        .filter(Boolean)
        .at(-1);
      log("warn", "database unavailable", { error: lastLine, kind: away, path: located?.path?.join(".") });
      return clientError(
        away === "unreachable"
          ? "the database is unreachable; nothing was changed: retry"
          : "the connection to the database was lost: this request may or may not have taken effect (docs/access.md, Retrying)",
        { code: "UNAVAILABLE", outcome: away === "unreachable" ? "NOT_APPLIED" : "UNKNOWN" },
      );
    }
    log("error", "unexpected error", { ...errorFields(original), path: located?.path?.join(".") });
    return clientError(message, { code: "INTERNAL_SERVER_ERROR" });
  };
}
