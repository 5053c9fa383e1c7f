// What the lock verbs are given: the database, where committed events go, the
// lease length and the API's group commits. Types only: the statements'
// shared SQL is in fragments.ts, how a change is committed in commit.ts, and
// the checks on a run in runs.ts.
import type { Db, Queryable } from "../../db/client.js";
import type { AcquireAnswer, AcquireRequest, ClaimAnswer, ClaimRequest, ReleaseAnswer, ReleaseRequest } from "./requests.js";
import type { EventSink } from "../../domain/types.js";

/** What every lock verb needs. No GraphQL in here. */
export interface LockDeps {
  readonly db: Db;
  readonly events: EventSink;
  readonly leaseSeconds: number;
  /**
   * Group commit (groupCommit.ts) for the single-issue agent statements; the
   * API sets it up (groups.ts). Without it every request is its own statement.
   */
  readonly groups?: LockGroups;
}

/**
 * What one grouped statement needs: something to run SQL on (the client, or a
 * transaction) and somewhere to publish what it committed.
 */
export interface StatementDeps {
  readonly db: Queryable;
  readonly events: EventSink;
}

/** A GroupCommit, as the verbs see it. */
export interface Grouped<Req, Ans> {
  submit(companyId: string, request: Req): Promise<Ans>;
}

/** Filled in by groups.ts; its requests and answers are in requests.ts. */
export interface LockGroups {
  readonly claim: Grouped<ClaimRequest, ClaimAnswer>;
  readonly acquire: Grouped<AcquireRequest, AcquireAnswer>;
  readonly release: Grouped<ReleaseRequest, ReleaseAnswer>;
}
