// What a handler's end means for its issue's release (baton.work(), work.ts):
// its return value is the result of DONE; Requeue, Blocked and Failed are
// the outcomes it throws on purpose, each with a reason and, if it likes, a
// result, and Requeue and Failed a retryAfterSeconds; any other throw is
// FAILED. A result is checked here before it is sent: not JSON, or over
// 64 KB, and it is left out.
/** The longest retryAfterSeconds the API takes: a day. */
export const MAX_RETRY_AFTER_SECONDS = 86_400;
/** The most JSON a payload or a result may be, serialised (the API's limit): 64 KB. */
export const MAX_JSON_BYTES = 65_536;

/** What a handler's throw may say besides its reason. */
export interface OutcomeOptions {
  /** The reason written to the ledger (default: a word for the outcome). */
  reason?: string;
  /** The issue's `result`: what the attempt produced (any JSON value, at most 64 KB); kept whatever the outcome. */
  result?: unknown;
}

export interface RetryOptions extends OutcomeOptions {
  /** 0..86400: the issue is not claimable again for this long (the API's retryAfterSeconds). */
  retryAfterSeconds?: number;
}

/** A whole number of seconds from 0 to a day, or a RangeError (thrown in the handler: the issue ends FAILED with it). */
function retryAfter(value: number | undefined): number | null {
  if (value === undefined) return null;
  if (!Number.isInteger(value) || value < 0 || value > MAX_RETRY_AFTER_SECONDS) {
    throw new RangeError(`retryAfterSeconds must be a whole number of seconds from 0 to ${MAX_RETRY_AFTER_SECONDS}, not ${value}`);
  }
  return value;
}

const optionsOf = <O extends OutcomeOptions>(given: string | O | undefined): O => (typeof given === "string" ? ({ reason: given } as O) : (given ?? ({} as O)));

/** What Requeue and Failed carry: a reason, a result, and when the issue may be claimed again. */
abstract class RetryOutcome extends Error {
  readonly retryAfterSeconds: number | null;
  readonly result: unknown;
  constructor(reasonOrOptions?: string | RetryOptions) {
    const options = optionsOf(reasonOrOptions);
    super(options.reason ?? "");
    this.retryAfterSeconds = retryAfter(options.retryAfterSeconds);
    this.result = options.result;
  }
}

/**
 * Throw it from a handler to put the issue back in the queue: `new Requeue("reason")`, or
 * `new Requeue({ retryAfterSeconds: 60, reason })` for "not now, come back in a minute". Plain, the attempt
 * stays counted; with retryAfterSeconds the issue is not claimable for that long and the attempt is given back
 * ("not now" is not a failure: docs/lifecycle.md).
 */
export class Requeue extends RetryOutcome {
  override name = "Requeue";
}

/** Throw it from a handler to mark the issue BLOCKED, with the message as the reason: `new Blocked("needs a human")`, or with `{ reason, result }`. */
export class Blocked extends Error {
  override name = "Blocked";
  readonly result: unknown;
  constructor(reasonOrOptions?: string | OutcomeOptions) {
    const options = optionsOf(reasonOrOptions);
    super(options.reason ?? "");
    this.result = options.result;
  }
}

/**
 * Throw it from a handler for FAILED with more than any other throw says: a `result`, and `retryAfterSeconds`
 * instead of the retry backoff (the attempt stays counted).
 */
export class Failed extends RetryOutcome {
  override name = "Failed";
}

/** The release a handler asks for, before its result is checked. */
export interface Release {
  outcome: "DONE" | "REQUEUE" | "BLOCKED" | "FAILED";
  reason: string | null;
  retryAfterSeconds: number | null;
  result: unknown;
}

export const outcomeOf = (err: unknown): Release => {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof Requeue) {
    const later = err.retryAfterSeconds === null ? "requeued by the worker" : `not now: retry after ${err.retryAfterSeconds} s`;
    return { outcome: "REQUEUE", reason: message || later, retryAfterSeconds: err.retryAfterSeconds, result: err.result };
  }
  if (err instanceof Blocked) return { outcome: "BLOCKED", reason: message || "blocked", retryAfterSeconds: null, result: err.result };
  const reason = (message || "failed").slice(0, 1000);
  if (err instanceof Failed) return { outcome: "FAILED", reason, retryAfterSeconds: err.retryAfterSeconds, result: err.result };
  return { outcome: "FAILED", reason, retryAfterSeconds: null, result: undefined };
};

/** A result as the release sends it: the value, or why it cannot be kept (then the release goes without it). */
export function resultOf(value: unknown): { result: unknown } | { why: string } | null {
  if (value === undefined || value === null) return null;
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    return { why: `it is not JSON (${(err as Error).message})` };
  }
  if (text === undefined) return { why: `it is not JSON (a ${typeof value})` };
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MAX_JSON_BYTES) return { why: `it is ${bytes} bytes of JSON, over the ${MAX_JSON_BYTES} the API keeps` };
  return { result: JSON.parse(text) as unknown };
}
