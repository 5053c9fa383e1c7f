// Input rules shared by the verbs (SEMANTICS, Who may do what). A violation is
// an InvalidInputError (BAD_USER_INPUT) thrown before any statement runs.
import { InvalidInputError } from "./types.js";

export const MAX_TITLE_LENGTH = 500;
export const MAX_DESCRIPTION_LENGTH = 100_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function validateTitle(title: string | null): asserts title is string {
  if (title === null || title.trim() === "") throw new InvalidInputError("title must not be empty");
  if (title.length > MAX_TITLE_LENGTH) throw new InvalidInputError(`title must be at most ${MAX_TITLE_LENGTH} characters`);
}

export function validateDescription(description: string): void {
  if (description.length > MAX_DESCRIPTION_LENGTH) {
    throw new InvalidInputError(`description must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
  }
}

export function validateMaxAttempts(maxAttempts: number | null): asserts maxAttempts is number {
  if (maxAttempts === null || !Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 100) {
    throw new InvalidInputError("maxAttempts must be between 1 and 100");
  }
}

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Ids are UUIDs; anything else is malformed input, not a missing row. */
export function validateId(name: string, value: string): string {
  if (!isUuid(value)) throw new InvalidInputError(`${name} must be a UUID, got ${JSON.stringify(value.slice(0, 80))}`);
  return value.toLowerCase();
}
