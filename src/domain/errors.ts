// The errors every layer may raise for a caller's mistake; src/graphql/errors.ts
// turns them into FORBIDDEN, BAD_USER_INPUT, NOT_FOUND and EVENTS_PRUNED. Nothing was changed when one is thrown.

/** A valid token used outside its scope: another agent's run. Maps to FORBIDDEN. */
export class ForbiddenError extends Error {
  override name = "ForbiddenError";
}
/** startRun for an agent that is disabled (disableAgent): FORBIDDEN; the scheduler skips the agent. */
export class AgentDisabledError extends ForbiddenError {
  override name = "AgentDisabledError";
}

/** Input that is well-typed but not acceptable. Maps to BAD_USER_INPUT; nothing changed. */
export class InvalidInputError extends Error {
  override name = "InvalidInputError";
}

/**
 * Something the caller named that does not exist within its scope: another
 * company's is "not found" too, so nothing leaks. Maps to NOT_FOUND.
 */
export class NotFoundError extends Error {
  override name = "NotFoundError";
}

/**
 * A ledger read that asked to resume after a seq whose following events may
 * have been dropped by retention (docs/events.md, "Retention"). Maps to
 * EVENTS_PRUNED. `resumeAfterSeq` is where to resume with every kept event
 * after `afterSeq` (src/events/history.ts, resumePoint); `oldestAvailableSeq`
 * is the first event kept after it (null: none yet).
 */
export class EventsPrunedError extends Error {
  override name = "EventsPrunedError";
  constructor(
    readonly afterSeq: bigint,
    readonly resumeAfterSeq: bigint,
    readonly oldestAvailableSeq: bigint | null,
  ) {
    super(
      `events after seq ${afterSeq} were pruned by retention; resume with afterSeq ${resumeAfterSeq}` +
        (oldestAvailableSeq === null ? " (no event is kept after it yet)" : ` (the oldest event kept after it is ${oldestAvailableSeq})`),
    );
  }
}

/**
 * A ledger read that asked to resume after a seq no transaction of this
 * cluster has made yet (at or above baton_event_ceiling()): the database was
 * restored or failed over to an older copy, or the seq is not from this
 * ledger. Served, it would skip every event until the cluster's transaction
 * ids pass it. Maps to SEQ_AHEAD, with the ceiling.
 */
export class SeqAheadError extends Error {
  override name = "SeqAheadError";
  constructor(
    readonly afterSeq: bigint,
    readonly ceilingSeq: bigint,
  ) {
    super(
      `afterSeq ${afterSeq} is ahead of every seq this database has made (all are below ${ceilingSeq}): it was restored or failed over ` +
        `to a copy from before that seq, or the seq is not from this ledger; read again without afterSeq (from now) or from "0"`,
    );
  }
}
