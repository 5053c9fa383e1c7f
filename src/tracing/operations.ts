// A span per GraphQL operation, as a yoga plugin (src/app.ts adds it only when
// tracing is on). Its parent is the caller's `traceparent`: the HTTP header,
// or over WebSocket the operation's `extensions.traceparent` (or
// `extensions.headers.traceparent`, where GraphiQL puts headers). Anything
// malformed is ignored (traceparent.ts) and the operation starts a trace.
//
// A query or mutation runs its resolvers inside the span, so the lock
// statements it runs are its children (spans.ts, statementSpan) and
// `traced()` notes its outcome. A subscription's span covers setting it up
// only, and is never made active: the ledger watcher and the stream it starts
// outlive it by hours, and would otherwise hang every later poll under it.
import { SpanKind, SpanStatusCode, context, trace } from "@opentelemetry/api";
import type { Attributes, Span } from "@opentelemetry/api";
import { getOperationAST } from "graphql";
import type { ExecutionArgs, ExecutionResult, GraphQLError } from "graphql";
import type { Plugin } from "graphql-yoga";
import type { Principal } from "../domain/types.js";
import { ATTR, currentTracer, tracing } from "./spans.js";
import { parseTraceparent } from "./traceparent.js";

/** What the plugin reads of the context: yoga's request (absent over WebSocket) and params, and the caller. */
interface OperationContext {
  principal?: Principal | null;
  request?: { headers: { get(name: string): string | null } };
  params?: { extensions?: Record<string, unknown> | null };
}

/** Operation names are client text: a span name keeps at most this much of one. */
const MAX_NAME = 100;

/** The caller's trace context, from the HTTP headers or the operation's extensions; undefined when absent or malformed. */
function callerParent(ctx: OperationContext) {
  const headers = ctx.request?.headers;
  if (headers) return parseTraceparent(headers.get("traceparent"), headers.get("tracestate"));
  const ext = ctx.params?.extensions;
  if (!ext || typeof ext !== "object") return null;
  const inner = (ext.headers && typeof ext.headers === "object" ? ext.headers : {}) as Record<string, unknown>;
  return parseTraceparent(ext.traceparent ?? inner.traceparent, ext.tracestate ?? inner.tracestate);
}

function startOperation(args: ExecutionArgs) {
  const ctx = (args.contextValue ?? {}) as OperationContext;
  const op = getOperationAST(args.document, args.operationName);
  const type = op?.operation ?? "unknown";
  const name = op?.name?.value.slice(0, MAX_NAME);
  const attributes: Attributes = { "graphql.operation.type": type };
  if (name) attributes["graphql.operation.name"] = name;
  const principal = ctx.principal;
  if (principal) {
    attributes["baton.role"] = principal.role;
    if (principal.companyId) attributes[ATTR.company] = principal.companyId;
    if (principal.agentId) attributes[ATTR.agent] = principal.agentId;
  }
  const remote = callerParent(ctx);
  const parent = remote ? trace.setSpanContext(context.active(), remote) : context.active();
  const span = currentTracer().startSpan(name ? `${type} ${name}` : type, { kind: SpanKind.SERVER, attributes }, parent);
  return { span, active: trace.setSpan(parent, span) };
}

/** Marks a span failed by its first error's code (never the message: it can quote the caller's input). */
function endOperation(span: Span, errors: readonly GraphQLError[] | undefined): void {
  if (errors?.length) {
    span.setAttribute("error.type", String(errors[0]!.extensions?.code ?? "GRAPHQL_ERROR"));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

export function operationSpans(): Plugin {
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      if (!tracing()) return;
      const { span, active } = startOperation(args);
      setExecuteFn((a) => context.with(active, () => executeFn(a)));
      return {
        onExecuteDone({ result }) {
          endOperation(span, (result as ExecutionResult).errors);
        },
      };
    },
    onSubscribe({ args }) {
      if (!tracing()) return;
      const { span } = startOperation(args);
      return {
        onSubscribeResult({ result }) {
          endOperation(span, (result as ExecutionResult).errors);
        },
        onSubscribeError() {
          endOperation(span, [{ extensions: { code: "SUBSCRIBE_FAILED" } } as unknown as GraphQLError]);
        },
      };
    },
  };
}
