// The one way a change is committed and published: every lock statement that
// appends events to the ledger runs through commitChange (or, for a
// transaction of several statements, commitTransaction; for a grouped
// statement, answerEach), and this is the only file in src/locks that
// publishes (test/events/publish.test.ts checks both).
import { queryOne } from "../../db/sql.js";
import type { Sql } from "../../db/sql.js";
import type { StatementDeps } from "./deps.js";
import type { LockEvent } from "../../domain/types.js";
import type { RunView } from "./types.js";

/**
 * The one way a lock change is committed: runs a statement that appends its
 * events to the ledger (appendEvents) and returns them as `events`, and, once
 * it has committed, publishes them. No verb publishes by hand, so none can
 * forget to, and none can publish before its commit.
 */
export async function commitChange<T extends { events: LockEvent[] }>(deps: Pick<StatementDeps, "db" | "events">, statement: Sql): Promise<T> {
  const row = await queryOne<T>(deps.db, statement);
  deps.events.publish(row.events);
  return row;
}

/** The same for a change made in a transaction of several statements (finishRun): `work` returns the events, or null for no change. */
export async function commitTransaction<T extends { events: LockEvent[] }>(
  deps: Pick<StatementDeps, "events">,
  work: () => Promise<T | null>,
): Promise<T | null> {
  const done = await work();
  if (done) deps.events.publish(done.events);
  return done;
}

/**
 * Runs a grouped statement (one that returns `runs`, keyed by id, and one
 * answer per request naming its `runId`), commits and publishes its events
 * (commitChange), and returns the answers in request order, each with its run.
 */
export async function answerEach<A>(deps: StatementDeps, statement: Sql): Promise<(A & { run: RunView | null })[]> {
  const row = await commitChange<{ runs: Record<string, RunView> | null; answers: (A & { runId: string })[]; events: LockEvent[] }>(deps, statement);
  return row.answers.map(({ runId, ...answer }) => ({ ...(answer as A), run: row.runs?.[runId] ?? null }));
}
