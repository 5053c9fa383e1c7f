// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
// and `tracestate` a client sends, read strictly, and written. Shared by the
// API (src/tracing/operations.ts reads them) and the baton/client SDK (which
// writes them). Imports nothing but @opentelemetry/api's types.
//
// Invariant: what a client sends can only ever add a parent to a span. A value
// that is too long, malformed, of version ff, or names the all-zero trace or
// span is ignored as if it were absent: never an error, never a throw.
import { TraceFlags, createTraceState } from "@opentelemetry/api";
import type { SpanContext } from "@opentelemetry/api";

/** Longest header read. Version 00 is exactly 55 characters; later versions may append fields. */
const MAX_TRACEPARENT = 256;
/** The W3C limit a vendor must propagate; longer lists are dropped whole (32 members at most). */
const MAX_TRACESTATE = 512;
const MAX_TRACESTATE_MEMBERS = 32;

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
// key = simple-key / tenant@system; value: printable ASCII without ',' and '=', not ending in a space.
const TRACESTATE_MEMBER =
  /^(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** The remote parent a `traceparent` names (with its `tracestate`, if that is valid too), or null. */
export function parseTraceparent(traceparent: unknown, tracestate?: unknown): SpanContext | null {
  if (typeof traceparent !== "string" || traceparent.length > MAX_TRACEPARENT) return null;
  const m = TRACEPARENT.exec(traceparent.trim());
  if (!m) return null;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  // ff is forbidden; version 00 has exactly four fields. A later version is read by its first four.
  if (version === "ff" || (version === "00" && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  const context: SpanContext = { traceId, spanId, traceFlags: parseInt(flags, 16) & TraceFlags.SAMPLED, isRemote: true };
  const state = validTracestate(tracestate);
  if (state) context.traceState = createTraceState(state);
  return context;
}

/** A `tracestate` worth passing on, or undefined (too long, too many members, or malformed: dropped whole). */
function validTracestate(tracestate: unknown): string | undefined {
  if (typeof tracestate !== "string" || tracestate.length === 0 || tracestate.length > MAX_TRACESTATE) return undefined;
  const members = tracestate
    .split(",")
    .map((m) => m.trim())
    .filter((m) => m.length > 0);
  if (members.length === 0 || members.length > MAX_TRACESTATE_MEMBERS) return undefined;
  return members.every((m) => TRACESTATE_MEMBER.test(m)) ? members.join(",") : undefined;
}

/** The `traceparent` header for a span context (version 00). */
export function formatTraceparent(context: Pick<SpanContext, "traceId" | "spanId" | "traceFlags">): string {
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}
