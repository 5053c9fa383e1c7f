// What a client may see of an error. Our own error classes become client
// errors with their code; GraphQL's errors pass, less anything a library put
// in them about its internals (yoga echoes a JSON parser's message as
// extensions.originalError); everything else is masked and logged.
//
// HTTP status: yoga answers errors in GraphQL requests 200 to application/json
// clients (GraphQL over HTTP) and anything else 4xx; malformed bodies and
// limits stay 4xx here.
import { GraphQLError } from "graphql";
import { SubscriptionOverflowError } from "../events/stream.js";
import { LimitExceededError } from "../limits.js";
import { ForbiddenError, InvalidInputError } from "../locks/types.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";
import { unavailability } from "../db/sql.js";
import type { Metrics } from "../metrics.js";

export function maskError(log: Logger, metrics: Metrics) {
  return (error: unknown, message: string): Error => {
    const located = error instanceof GraphQLError ? error : null;
    const original = located?.originalError ?? error;
    const clientError = (msg: string, extensions: Record<string, unknown>) =>
      new GraphQLError(msg, { nodes: located?.nodes, path: located?.path, extensions });
    if (original instanceof InvalidInputError) return clientError(original.message, { code: "BAD_USER_INPUT" });
    if (original instanceof ForbiddenError) return clientError(original.message, { code: "FORBIDDEN" });
    if (original instanceof SubscriptionOverflowError) return clientError(original.message, { code: "SUBSCRIPTION_OVERFLOW" });
    if (original instanceof LimitExceededError) {
      metrics.limitRefusals.inc({ limit: original.limit });
      return clientError(original.message, original.extensions);
    }
    if (original instanceof GraphQLError) {
      const shown = located ?? original;
      const { originalError, http, ...extensions } = shown.extensions as { originalError?: unknown; http?: { status?: number; spec?: boolean }; code?: unknown };
      if (originalError === undefined && !(extensions.code === "LIMIT_EXCEEDED" && http?.spec)) return shown;
      // A request refused before it is a GraphQL request (a body that is not JSON, one over a limit) is
      // answered 4xx even to application/json clients: yoga tells by `spec`, or by an originalError, which is not shown.
      return new GraphQLError(shown.message, {
        nodes: shown.nodes,
        path: shown.path,
        extensions: http ? { ...extensions, http: { status: http.status } } : extensions,
      });
    }
    const away = unavailability(original);
    if (away) {
      // The database is away: the client's to retry, not a bug (no stack in the log).
      log("warn", "database unavailable", { error: String((original as Error)?.message ?? original).split("\n").filter(Boolean).at(-1), kind: away, path: located?.path?.join(".") });
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
