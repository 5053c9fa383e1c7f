// LockEvent.issue for every operation of the instance at once.
import DataLoader from "dataloader";
import type { Queryable } from "../db/client.js";
import { getDependencies, getIssues } from "../reads/lists.js";
import type { Issue } from "../domain/types.js";

type Lookup = { scope: string | null; id: string };

/**
 * One DataLoader shared by every operation of the instance: `issue` lookups
 * made before the next setImmediate go to the database as one query per
 * company scope. When an event reaches a thousand subscriptions that select
 * `LockEvent.issue`, that is one read, not a thousand. Nothing is kept after a
 * batch settles (`issue` means the issue as it is now), and a failed read
 * fails only the lookups of its own scope.
 */
export class IssueLoader {
  private readonly loader: DataLoader<Lookup, Issue | null>;

  constructor(db: Queryable) {
    this.loader = new DataLoader((lookups) => readByScope(db, lookups), { cache: false, batchScheduleFn: (run) => setImmediate(run) });
  }

  /** The issue, if it exists within `scope` (a company id; null: any company). */
  load(scope: string | null, id: string): Promise<Issue | null> {
    return this.loader.load({ scope, id });
  }
}

/** One getIssues per scope, each id asked once; the answers in the order of `lookups`. */
async function readByScope(db: Queryable, lookups: readonly Lookup[]): Promise<(Issue | null | Error)[]> {
  const idsByScope = new Map<string | null, Set<string>>();
  for (const { scope, id } of lookups) {
    const ids = idsByScope.get(scope) ?? new Set<string>();
    idsByScope.set(scope, ids.add(id));
  }
  const found = new Map<string | null, Map<string, Issue> | Error>();
  await Promise.all(
    [...idsByScope].map(([scope, ids]) =>
      getIssues(db, [...ids], scope).then(
        (issues) => found.set(scope, new Map(issues.map((i) => [i.id, i]))),
        (err: unknown) => found.set(scope, err instanceof Error ? err : new Error(String(err), { cause: err })),
      ),
    ),
  );
  return lookups.map(({ scope, id }) => {
    const read = found.get(scope)!;
    return read instanceof Error ? read : (read.get(id) ?? null);
  });
}

export type Dependency = { issueId: string; blockedById: string; done: boolean };

/**
 * Issue.blockedBy and Issue.waitingOn for every operation of the instance at
 * once, like IssueLoader: the edges of the issues asked for before the next
 * setImmediate are read in one query (READ_DEPENDENCIES), nothing kept after.
 * Only asked for issues a resolver already holds, so already in scope.
 */
export class DependencyLoader {
  private readonly loader: DataLoader<string, Dependency[]>;

  constructor(db: Queryable) {
    this.loader = new DataLoader(
      async (ids) => {
        const byIssue = new Map<string, Dependency[]>();
        for (const d of await getDependencies(db, ids)) byIssue.set(d.issueId, [...(byIssue.get(d.issueId) ?? []), d]);
        return ids.map((id) => byIssue.get(id) ?? []);
      },
      { cache: false, batchScheduleFn: (run) => setImmediate(run) },
    );
  }

  /** The issue's blockedBy edges, oldest first, each with whether its blocker is DONE. */
  load(issueId: string): Promise<Dependency[]> {
    return this.loader.load(issueId);
  }
}
