import { principalKey } from "../auth/principal.js";
import type { KeyRevocations } from "../auth/revocations.js";
import { issueNotices } from "../events/notices.js";
import { lockEventStream } from "../events/stream.js";
import { getIssues } from "../reads/lists.js";
import { builder } from "./builder.js";
import { keyRevoked, requireCompanyReader } from "./context.js";
import { validateId } from "../domain/validate.js";
import { parseSeq } from "./queries.js";
import { IssueRef } from "./types/issue.js";
import { LockEventRef } from "./types/lockEvent.js";

/**
 * The stream, ended with UNAUTHENTICATED as soon as the key that opened it is
 * revoked (src/auth/revocations.ts), on whichever instance it is open. The
 * revocation ends the source at once (both streams' return() wakes a pending
 * next(), which then answers done), and next() turns that end into the
 * error. Nothing is raced per event: a promise that lives as long as the
 * subscription would hold every event's result until it ends.
 */
function endWhenRevoked<T>(source: AsyncIterableIterator<T>, revocations: KeyRevocations, keyId: string | null): AsyncIterableIterator<T> {
  if (keyId === null) return source; // the admin token is not a key: nothing to revoke
  let revoked = false;
  const unwatch = revocations.watch(keyId, () => {
    revoked = true;
    void source.return?.(undefined)?.catch(() => {});
  });
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      let result: IteratorResult<T>;
      try {
        result = revoked ? { done: true, value: undefined } : await source.next();
      } catch (err) {
        unwatch();
        throw revoked ? keyRevoked() : err;
      }
      if (revoked) {
        unwatch();
        throw keyRevoked();
      }
      if (result.done) unwatch();
      return result;
    },
    async return(value?: unknown) {
      unwatch();
      return (await source.return?.(value)) ?? { done: true, value: undefined };
    },
    async throw(err?: unknown) {
      unwatch();
      if (source.throw) return source.throw(err);
      throw err;
    },
  };
}

builder.subscriptionFields((t) => ({
  lockChanged: t.field({
    type: LockEventRef,
    description:
      "Every committed LockEvent of the company that matches the filters, from any\n" +
      "API instance. With afterSeq, first replays committed events with seq > afterSeq\n" +
      "(ascending), then continues live, with no duplicates.",
    args: {
      companyId: t.arg.id({ required: true }),
      issueId: t.arg.id(),
      agentId: t.arg.id(),
      afterSeq: t.arg.id(),
    },
    subscribe: (_root, args, ctx) => {
      const filter = {
        companyId: requireCompanyReader(ctx, args.companyId),
        issueId: args.issueId != null ? validateId("issueId", args.issueId) : null,
        agentId: args.agentId != null ? validateId("agentId", args.agentId) : null,
        afterSeq: parseSeq("afterSeq", args.afterSeq),
      };
      const { metrics, admission } = ctx.services;
      // Counted against the key's and the company's limits until the stream ends, however it ends.
      const release = admission.openSubscription(principalKey(ctx.principal, ""), filter.companyId);
      const stream = lockEventStream(ctx.services.ledger, ctx.services.bus, ctx.services.watcher, filter, {
        onOpen: () => metrics.subscriptions.inc(),
        onClose: () => {
          metrics.subscriptions.dec();
          release();
        },
      });
      return endWhenRevoked(stream, ctx.services.revocations, ctx.principal!.keyId);
    },
    resolve: (event) => event,
  }),

  issuesChanged: t.field({
    type: [IssueRef],
    description:
      "Issues of the company created or edited without a lock change (title, description, priority, assignee, maxAttempts), " +
      "as they are now, from any API instance. Lock and status changes are lockChanged's. Best effort: not in the ledger and " +
      "not replayed, so read the issues after subscribing (and after any reconnect). Each answer holds up to 1000 issues.",
    args: { companyId: t.arg.id({ required: true }) },
    subscribe: async (_root, args, ctx) => {
      const companyId = requireCompanyReader(ctx, args.companyId);
      const { metrics, admission } = ctx.services;
      const release = admission.openSubscription(principalKey(ctx.principal, ""), companyId);
      const notices = await issueNotices(ctx.services.bus, companyId, {
        maxPending: ctx.services.subscriptionBuffer,
        onOpen: () => metrics.subscriptions.inc(),
        onClose: () => {
          metrics.subscriptions.dec();
          release();
        },
      });
      return endWhenRevoked(notices, ctx.services.revocations, ctx.principal!.keyId);
    },
    resolve: (ids, args, ctx) => getIssues(ctx.services.db, ids, args.companyId),
  }),
}));
