// Input rules shared by the verbs (docs/access.md, Errors). A violation is
// an InvalidInputError (BAD_USER_INPUT) thrown before any statement runs.
import { InvalidInputError } from "./errors.js";

export const MAX_TITLE_LENGTH = 500;
export const MAX_DESCRIPTION_LENGTH = 100_000;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Text the database can store as sent: at most `max` characters, no NUL
 * (U+0000), which PostgreSQL refuses in text, and no lone surrogate. Returns
 * the text unchanged.
 */
export function validateText(name: string, value: string, max: number): string {
  // Characters as PostgreSQL counts them (code points): an emoji is one, though it is two UTF-16 units.
  if (value.length > max && [...value].length > max) throw new InvalidInputError(`${name} must be at most ${max} characters`);
  if (value.includes("\u0000")) throw new InvalidInputError(`${name} must not contain NUL characters`);
  // Half of a surrogate pair is not a character: it would be stored as U+FFFD, silently changed.
  if (LONE_SURROGATE.test(value)) throw new InvalidInputError(`${name} must be well-formed Unicode (it has half of a surrogate pair)`);
  return value;
}

export function validateTitle(title: string | null): asserts title is string {
  if (title === null || title.trim() === "") throw new InvalidInputError("title must not be empty");
  validateText("title", title, MAX_TITLE_LENGTH);
}

export function validateDescription(description: string): void {
  validateText("description", description, MAX_DESCRIPTION_LENGTH);
}

export function validateMaxAttempts(maxAttempts: number | null): asserts maxAttempts is number {
  if (maxAttempts === null || !Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 100) {
    throw new InvalidInputError("maxAttempts must be between 1 and 100");
  }
}

export const MAX_CONCURRENCY_KEY_LENGTH = 200;
const MAX_CONCURRENCY_LIMIT = 10_000;

/** A concurrency key: 1..200 characters, compared exactly (no trimming, no case folding). */
export function validateConcurrencyKey(name: string, key: string): string {
  if (key.length === 0) throw new InvalidInputError(`${name} must not be empty (leave it out, or null, for the unkeyed pool)`);
  return validateText(name, key, MAX_CONCURRENCY_KEY_LENGTH);
}

/** A key's limit on active issues: 1..10000. */
export function validateConcurrencyLimit(maxActive: number): number {
  if (!Number.isInteger(maxActive) || maxActive < 1 || maxActive > MAX_CONCURRENCY_LIMIT) {
    throw new InvalidInputError(`maxActive must be between 1 and ${MAX_CONCURRENCY_LIMIT} (null removes the limit)`);
  }
  return maxActive;
}

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Ids are UUIDs; anything else is malformed input, not a missing row. */
export function validateId(name: string, value: string): string {
  if (!isUuid(value)) throw new InvalidInputError(`${name} must be a UUID, got ${JSON.stringify(value.slice(0, 80))}`);
  return value.toLowerCase();
}

/**
 * A seq as clients and messages send it: a decimal string of a non-negative
 * 64-bit integer (docs/events.md). The one check for afterSeq, beforeSeq and
 * the seqs of pub/sub messages.
 */
export function isSeq(value: string): boolean {
  return /^\d{1,19}$/.test(value) && BigInt(value) <= 9223372036854775807n;
}

export function validateSeq(name: string, value: string): string {
  if (!isSeq(value)) throw new InvalidInputError(`${name} must be a decimal seq`);
  return value;
}

/** payload and result: at most 64 KB of JSON once serialised (the database's CHECK says the same). */
export const MAX_JSON_BYTES = 65_536;

/**
 * A JSON value a client sent (payload, result), serialised for the database:
 * at most MAX_JSON_BYTES bytes as PostgreSQL stores it, no NUL (jsonb refuses
 * \u0000 in strings). null or undefined: nothing.
 */
export function serialiseJson(name: string, value: unknown): string | null {
  if (value === null || value === undefined) return null;
  checkJson(name, value);
  const text = JSON.stringify(value);
  if (text === undefined) throw new InvalidInputError(`${name} must be a JSON value`);
  if (Buffer.byteLength(text, "utf8") > MAX_JSON_BYTES) throw new InvalidInputError(`${name} must be at most ${MAX_JSON_BYTES} bytes of JSON`);
  return text;
}

/** How deeply payload and result may nest (objects and arrays). */
const MAX_JSON_DEPTH = 64;

/**
 * Walks a JSON value without recursion (a hostile value cannot overflow the
 * stack): at most MAX_JSON_DEPTH levels of objects and arrays, and no string
 * or key PostgreSQL's jsonb would refuse (NUL, half of a surrogate pair).
 * Strings are checked as they are, not as JSON text, where a backslash and
 * "u0000" would look like a NUL.
 */
function checkJson(name: string, value: unknown): void {
  const stack: [unknown, number][] = [[value, 1]];
  const text = (s: string) => {
    if (s.includes("\u0000")) throw new InvalidInputError(`${name} must not contain NUL characters`);
    if (LONE_SURROGATE.test(s)) throw new InvalidInputError(`${name} must be well-formed Unicode (it has half of a surrogate pair)`);
  };
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v === "string") text(v);
    if (v === null || typeof v !== "object") continue;
    if (depth > MAX_JSON_DEPTH) throw new InvalidInputError(`${name} must be nested at most ${MAX_JSON_DEPTH} levels deep`);
    if (!Array.isArray(v)) for (const key of Object.keys(v)) text(key);
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
}

/** A whole number of seconds in min..max (retryAfterSeconds, retryDelaySeconds, maxExecutionSeconds). */
export function validateSeconds(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) throw new InvalidInputError(`${name} must be a whole number of seconds from ${min} to ${max}`);
  return value;
}

export const MAX_RETRY_SECONDS = 86_400;
export const MAX_EXECUTION_SECONDS = 604_800;
const MAX_IDEMPOTENCY_KEY_LENGTH = 200;

/** An idempotency key: 1..200 characters, compared exactly. */
export function validateIdempotencyKey(key: string): string {
  if (key.length === 0) throw new InvalidInputError("idempotencyKey must not be empty (leave it out for none)");
  return validateText("idempotencyKey", key, MAX_IDEMPOTENCY_KEY_LENGTH);
}

/** A notBefore instant: a valid date within a sane range (years 2000..9999). */
export function validateInstant(name: string, value: Date): Date {
  const t = value.getTime();
  if (!Number.isFinite(t) || t < Date.UTC(2000, 0, 1) || t >= Date.UTC(10000, 0, 1))
    throw new InvalidInputError(`${name} must be a date between the years 2000 and 9999`);
  return value;
}
