// The `traceparent` every SDK request carries (docs/client.md, Tracing), so
// that the API's spans of one issue's life (claim → acquire → heartbeats →
// release) share one trace.
//
// With an OpenTelemetry SDK in the calling process (a tracer provider
// registered with @opentelemetry/api), its spans are made there, and its
// sampler decides for the server too: an issue's life is a span ("baton
// issue"), each request a client span under it, and the handler runs with the
// life's span active, so its own spans nest under the issue. Without one,
// nothing is recorded, and the SDK still makes valid W3C ids itself: a random
// trace id per issue life (or the caller's active trace, if it has one) and a
// fresh span id per request, flagged sampled.
import { randomBytes } from "node:crypto";
import { SpanKind, SpanStatusCode, TraceFlags, context, trace } from "@opentelemetry/api";
import type { Attributes, Context, Span, SpanContext } from "@opentelemetry/api";
import { formatTraceparent } from "../tracing/traceparent.js";

const tracer = () => trace.getTracer("baton/client");

const randomId = (bytes: number) => {
  for (;;) {
    const id = randomBytes(bytes).toString("hex");
    if (!/^0+$/.test(id)) return id; // all zeros is invalid
  }
};

const validParent = (ctx: Context): SpanContext | undefined => {
  const sc = trace.getSpanContext(ctx);
  return sc && trace.isSpanContextValid(sc) ? sc : undefined;
};

/**
 * Whether an SDK made this span (recording, or sampled out by its sampler):
 * the API's no-op tracer only ever hands back its parent's ids, or none.
 */
const madeBySdk = (span: Span, parent: Context) => {
  const sc = span.spanContext();
  return trace.isSpanContextValid(sc) && sc.spanId !== validParent(parent)?.spanId;
};

/**
 * A stretch of work whose requests share one trace: one issue's life in
 * work(), or a batch claim and the lives of what it claimed. `context` is
 * what its requests and its handler run under.
 */
export class TraceLife {
  private constructor(
    readonly context: Context,
    private readonly span: Span | null,
  ) {}

  /** A new life under `parent` (default: the active context). */
  static start(name: string, parent: Context = context.active()): TraceLife {
    const span = tracer().startSpan(name, { kind: SpanKind.INTERNAL }, parent);
    if (madeBySdk(span, parent)) return new TraceLife(trace.setSpan(parent, span), span); // its sampling decision stands
    // No SDK recording here: our own ids, in the caller's trace if it has one.
    const inherited = validParent(parent);
    const ids: SpanContext = {
      traceId: inherited?.traceId ?? randomId(16),
      spanId: randomId(8),
      traceFlags: inherited?.traceFlags ?? TraceFlags.SAMPLED,
      traceState: inherited?.traceState,
    };
    return new TraceLife(trace.setSpanContext(parent, ids), null);
  }

  /** Notes ids (never a title or a token) on the life's span, when one is recorded. */
  note(attributes: Attributes): void {
    this.span?.setAttributes(attributes);
  }

  end(): void {
    this.span?.end();
  }
}

/** The headers one request carries, and what to call when it is answered (ends its client span, if one is recorded). */
export function requestTrace(
  operation: string | undefined,
  parent: Context = context.active(),
): { headers: Record<string, string>; end(failed?: boolean): void } {
  const span = tracer().startSpan(operation ? `baton ${operation}` : "baton request", { kind: SpanKind.CLIENT }, parent);
  let sc: SpanContext;
  if (madeBySdk(span, parent)) sc = span.spanContext();
  else {
    const inherited = validParent(parent);
    sc = {
      traceId: inherited?.traceId ?? randomId(16),
      spanId: randomId(8),
      traceFlags: inherited?.traceFlags ?? TraceFlags.SAMPLED,
      traceState: inherited?.traceState,
    };
  }
  const headers: Record<string, string> = { traceparent: formatTraceparent(sc) };
  const state = sc.traceState?.serialize();
  if (state) headers.tracestate = state;
  return {
    headers,
    end(failed) {
      if (failed) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  };
}
