// The SDK's errors: BatonError and its subclasses, one per code a caller acts
// on, and batonErrorOf(), the one way a GraphQL answer's errors become them.

/**
 * A request the server refused, or could not be made. `code` is the GraphQL
 * error's extensions.code (UNAUTHENTICATED, FORBIDDEN, BAD_USER_INPUT,
 * LIMIT_EXCEEDED, …), or UNREACHABLE when the server did not answer.
 */
export class BatonError extends Error {
  override name = "BatonError";
  constructor(
    message: string,
    readonly code: string,
    readonly errors: readonly { message: string; extensions?: Record<string, unknown> }[] = [],
  ) {
    super(message);
  }
}

/**
 * EVENTS_PRUNED: a read that resumes after a seq (lockEvents or lockChanges
 * with afterSeq) where retention may have dropped events since. Every event
 * after `resumeAfterSeq` is still kept (docs/events.md); `oldestAvailableSeq` is
 * the first event kept after it (null: none yet). Seqs are decimal strings.
 */
export class EventsPrunedError extends BatonError {
  override name = "EventsPrunedError";
  readonly resumeAfterSeq: string;
  readonly oldestAvailableSeq: string | null;
  constructor(message: string, errors: readonly { message: string; extensions?: Record<string, unknown> }[]) {
    super(message, "EVENTS_PRUNED", errors);
    const extensions = errors[0]?.extensions ?? {};
    this.resumeAfterSeq = String(extensions.resumeAfterSeq ?? "0");
    this.oldestAvailableSeq = extensions.oldestAvailableSeq == null ? null : String(extensions.oldestAvailableSeq);
  }
}

/**
 * SEQ_AHEAD: a read that resumes after a seq the server's database has not
 * made yet (lockEvents or lockChanges with afterSeq): it was restored or
 * failed over to an older copy, or the seq is from another ledger. Every seq
 * it has made is below `ceilingSeq`; start again from "0" or from now.
 */
export class SeqAheadError extends BatonError {
  override name = "SeqAheadError";
  readonly afterSeq: string;
  readonly ceilingSeq: string;
  constructor(message: string, errors: readonly { message: string; extensions?: Record<string, unknown> }[]) {
    super(message, "SEQ_AHEAD", errors);
    const extensions = errors[0]?.extensions ?? {};
    this.afterSeq = String(extensions.afterSeq ?? "");
    this.ceilingSeq = String(extensions.ceilingSeq ?? "");
  }
}

/**
 * UNAUTHENTICATED: the token is not a key the server accepts (any more). A key
 * that worked and then gets this was revoked: rotated (rotateAgentKey,
 * rotateBoardKey), or its agent disabled (disableAgent). A worker ends with
 * it (docs/client.md, "When the key is revoked").
 */
export class UnauthenticatedError extends BatonError {
  override name = "UnauthenticatedError";
  constructor(message: string, errors: readonly { message: string; extensions?: Record<string, unknown> }[] = []) {
    super(message, "UNAUTHENTICATED", errors);
  }
}

/**
 * A problem of the domain (a union member such as NotLockOwner or
 * RunNotActive: docs/access.md) answered to an SDK method that resolves to
 * what it made, and so throws what it could not: `job.createSubIssues()`.
 * `code` is "PROBLEM"; `typename` the problem's `__typename`; `problem` every
 * field the answer carried (`issueId`, `ownerRunId`, …).
 * (`baton.request()` never throws it: there the problem is the answer.)
 */
export class ProblemError extends BatonError {
  override name = "ProblemError";
  readonly typename: string;
  constructor(readonly problem: { __typename: string; message: string } & Record<string, unknown>) {
    super(`${problem.__typename}: ${problem.message}`, "PROBLEM");
    this.typename = problem.__typename;
  }
}

/**
 * The error for a GraphQL answer's errors: EventsPrunedError for EVENTS_PRUNED, SeqAheadError for SEQ_AHEAD,
 * UnauthenticatedError for UNAUTHENTICATED, else a BatonError with the first one's code.
 */
export function batonErrorOf(errors: readonly { message: string; extensions?: Record<string, unknown> }[]): BatonError {
  const first = errors[0]!;
  const code = String(first.extensions?.code ?? "GRAPHQL_ERROR");
  if (code === "EVENTS_PRUNED") return new EventsPrunedError(first.message, errors);
  if (code === "SEQ_AHEAD") return new SeqAheadError(first.message, errors);
  if (code === "UNAUTHENTICATED") return new UnauthenticatedError(first.message, errors);
  return new BatonError(first.message, code, errors);
}
