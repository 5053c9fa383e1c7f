// LockEvent.issue for every operation of the instance at once.
import type { Queryable } from "../db/client.js";
import { getIssues } from "../reads/lists.js";
import type { Issue } from "../domain/types.js";

/**
 * A minimal DataLoader shared by every operation of the instance: `issue`
 * lookups made in the same tick go to the database as one query per company
 * scope. When an event reaches a thousand subscriptions that select
 * `LockEvent.issue`, that is one read, not a thousand. Nothing is kept after a
 * batch settles (`issue` means the issue as it is now).
 */
export class IssueLoader {
  private pending: Map<string | null, Map<string, Waiter[]>> | null = null;

  constructor(private readonly db: Queryable) {}

  /** The issue, if it exists within `scope` (a company id; null: any company). */
  load(scope: string | null, id: string): Promise<Issue | null> {
    return new Promise<Issue | null>((resolve, reject) => {
      if (!this.pending) {
        const batch = (this.pending = new Map());
        setImmediate(() => {
          this.pending = null;
          for (const [companyId, ids] of batch) this.fetch(companyId, ids);
        });
      }
      let ids = this.pending.get(scope);
      if (!ids) this.pending.set(scope, (ids = new Map()));
      const waiters = ids.get(id) ?? [];
      waiters.push({ resolve, reject });
      ids.set(id, waiters);
    });
  }

  private fetch(companyId: string | null, ids: Map<string, Waiter[]>): void {
    getIssues(this.db, [...ids.keys()], companyId).then(
      (issues) => {
        const byId = new Map(issues.map((i) => [i.id, i]));
        for (const [id, waiters] of ids) for (const w of waiters) w.resolve(byId.get(id) ?? null);
      },
      (err: unknown) => {
        for (const waiters of ids.values()) for (const w of waiters) w.reject(err);
      },
    );
  }
}
type Waiter = { resolve: (issue: Issue | null) => void; reject: (err: unknown) => void };
