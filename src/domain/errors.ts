// The two errors every layer may raise for a caller's mistake; src/graphql/errors.ts
// turns them into FORBIDDEN and BAD_USER_INPUT. Nothing was changed when one is thrown.

/** A valid token used outside its scope: another agent's run. Maps to FORBIDDEN. */
export class ForbiddenError extends Error {
  override name = "ForbiddenError";
}
/** Input that is well-typed but not acceptable. Maps to BAD_USER_INPUT; nothing changed. */
export class InvalidInputError extends Error {
  override name = "InvalidInputError";
}
