// The spans Baton makes, and what they may carry. Used on the claim path, so
// everything here starts with one check: `tracer` is null unless
// startTracing() (setup.ts) turned tracing on, and then nothing else runs:
// no context lookup, no allocation beyond what the caller already made.
//
// Invariant: a span carries ids, counts, names of statements and union
// members, and nothing else. Never a token or key (not even a hash), never an
// issue's title or description, never a SQL parameter other than the ids
// named in ATTR, never an error message (a message can quote a value): an
// error is its SQLSTATE or class name in `error.type`.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, createContextKey, trace } from "@opentelemetry/api";
import type { Attributes, Context, Link, Span, Tracer } from "@opentelemetry/api";

/** The attributes Baton sets, by what they name. */
export const ATTR = {
  company: "baton.company.id",
  agent: "baton.agent.id",
  run: "baton.run.id",
  issue: "baton.issue.id",
  lockEpoch: "baton.lock_epoch",
  /** The result union member an operation answered (IssueClaimed, CheckoutConflict, …). */
  outcome: "baton.outcome",
  /** How many requests one grouped statement answered (src/locks/groupCommit/groupCommit.ts). */
  groupSize: "baton.group_size",
  /** How many issues a batch operation claimed or released. */
  issueCount: "baton.issue.count",
  /** Rows a recovery step changed. */
  rows: "baton.rows",
} as const;

let tracer: Tracer | null = null;

/** Whether spans are made. Off unless startTracing() found the standard variables asking for it. */
export function tracing(): boolean {
  return tracer !== null;
}

/** setup.ts: the tracer spans come from (null: tracing off). */
export function useTracer(next: Tracer | null): void {
  tracer = next;
}

/** The tracer, for modules that only call it after tracing() said yes. */
export function currentTracer(): Tracer {
  if (!tracer) throw new Error("tracing is off");
  return tracer;
}

/** Ends a span, marking it failed with the error's SQLSTATE or class name (never its message). */
function endSpan(span: Span, err?: unknown): void {
  if (err !== undefined) {
    const code = (err as { code?: unknown } | null)?.code;
    const type = typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : err instanceof Error ? err.name : "Error";
    span.setAttribute("error.type", type);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** Runs `work` in a new span, a child of the active one (or a new trace), and ends it. */
export async function inSpan<T>(name: string, work: (span: Span | null) => Promise<T>, attributes?: Attributes): Promise<T> {
  if (!tracer) return work(null);
  const span = tracer.startSpan(name, { attributes });
  try {
    const result = await context.with(trace.setSpan(context.active(), span), () => work(span));
    endSpan(span);
    return result;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

// ---- lock statements ----

const STATEMENT_NAME = /^\/\* ([A-Z_]+) \*\//;

interface Group {
  companyId: string;
  size: number;
  links: Link[];
}
const GROUP = createContextKey("baton.group");

/**
 * Runs a statement named with statement() (src/db/sql.ts) in a span called by its
 * name, as a child of the active span. A statement outside any traced work
 * (the ledger watcher's polls, a metrics scrape) makes no span: it would be a
 * trace of its own every second. Only called when tracing() is true.
 */
export async function statementSpan<T>(text: string | undefined, run: () => Promise<T>): Promise<T> {
  const parent = context.active();
  const name = text === undefined ? undefined : STATEMENT_NAME.exec(text)?.[1];
  if (!tracer || name === undefined || trace.getSpan(parent) === undefined) return run();
  const group = parent.getValue(GROUP) as Group | undefined;
  const attributes: Attributes = { "db.system.name": "postgresql", "db.query.summary": name };
  if (group) {
    attributes[ATTR.company] = group.companyId;
    attributes[ATTR.groupSize] = group.size;
  }
  const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes, links: group?.links }, parent);
  try {
    const result = await context.with(trace.setSpan(parent, span), run);
    endSpan(span);
    return result;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

/** The context a request joins a group commit from: captured only when tracing is on. */
export function submitter(): Context | undefined {
  return tracer ? context.active() : undefined;
}

/**
 * Runs one group commit's statement as part of its first member's operation,
 * with the group's size and a link to every other member's operation (one
 * statement, several parents: links, not a shared parent). Each member's own
 * span learns the group's size. Only called when tracing() is true.
 */
export function inGroup<T>(companyId: string, members: (Context | undefined)[], run: () => Promise<T>): Promise<T> {
  const links: Link[] = [];
  for (let i = 0; i < members.length; i++) {
    const span = members[i] && trace.getSpan(members[i]!);
    if (!span) continue;
    span.setAttribute(ATTR.groupSize, members.length);
    if (i > 0) links.push({ context: span.spanContext() });
  }
  const group: Group = { companyId, size: members.length, links };
  return context.with((members[0] ?? ROOT_CONTEXT).setValue(GROUP, group), run);
}

// ---- what an operation answered ----

interface Answer {
  __typename?: string;
  issueId?: string;
  issue?: { id?: string; lockEpoch?: number } | null;
  issues?: unknown[];
  run?: { id?: string } | null;
}

/**
 * Notes what a lock or run mutation answered on its operation's span: the
 * union member, and the run, issue and lockEpoch it concerned (`ids`: those
 * the caller named). Passes the result through.
 */
export function traced<R>(result: R, ids: { runId?: string | null; issueId?: string | null } = {}): R {
  if (!tracer) return result;
  const span = trace.getSpan(context.active());
  if (!span) return result;
  const answer = result as Answer;
  if (answer.__typename) span.setAttribute(ATTR.outcome, answer.__typename);
  const run = ids.runId ?? answer.run?.id;
  if (run) span.setAttribute(ATTR.run, run);
  const issue = ids.issueId ?? answer.issue?.id ?? answer.issueId;
  if (issue) span.setAttribute(ATTR.issue, issue);
  if (typeof answer.issue?.lockEpoch === "number") span.setAttribute(ATTR.lockEpoch, answer.issue.lockEpoch);
  if (Array.isArray(answer.issues)) span.setAttribute(ATTR.issueCount, answer.issues.length);
  return result;
}
