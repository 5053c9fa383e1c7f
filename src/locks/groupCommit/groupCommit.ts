// Group commit: requests of one company that reach this API instance while
// its previous statement of the same kind is still running are answered
// together by the next one — one round trip and one commit (one WAL flush)
// for the whole group instead of one each. When the instance is idle a
// request goes out at once, alone: grouping adds no delay, it only appears
// under load, where it saves the database a statement and a commit per
// request.
//
// The statements it runs answer each request exactly as running them one
// after another in arrival order would; requests that touch the same row
// (same `key`) never share a group, so that order is kept trivially.

import type { Context } from "@opentelemetry/api";
import { changedNothing } from "../../db/sql.js";
import { inGroup, submitter, tracing } from "../../tracing/spans.js";

/** More than this many waiting requests go out in several statements. */
const MAX_GROUP = 64;
/** How far down the queue a group looks past requests whose key it already has (so a backlog on one key costs no quadratic scan). */
const MAX_SKIPPED = 4 * MAX_GROUP;

interface Waiting<Req, Ans> {
  request: Req;
  resolve: (answer: Ans) => void;
  reject: (err: unknown) => void;
  /** The submitter's trace context, with tracing on: the group's statement span links its operation (src/tracing/spans.ts). */
  trace: Context | undefined;
}

export class GroupCommit<Req, Ans> {
  private readonly queues = new Map<string, Waiting<Req, Ans>[]>();

  constructor(
    /** Runs one statement for the group; answers in request order. */
    private readonly run: (companyId: string, group: Req[]) => Promise<Ans[]>,
    /** Requests with equal keys go in different groups (null: any may share). */
    private readonly key: (request: Req) => string | null = () => null,
    /** Whether a failed statement certainly changed nothing, so its members may run again alone. */
    private readonly safeToRerun: (err: unknown) => boolean = changedNothing,
  ) {}

  submit(companyId: string, request: Req): Promise<Ans> {
    return new Promise((resolve, reject) => {
      const waiting = { request, resolve, reject, trace: submitter() };
      const queue = this.queues.get(companyId);
      if (queue) {
        queue.push(waiting); // a statement is running: join the next group
        return;
      }
      const fresh = [waiting];
      this.queues.set(companyId, fresh);
      void this.drain(companyId, fresh);
    });
  }

  /** One statement at a time per company: whoever arrived meanwhile goes in the next. */
  private async drain(companyId: string, queue: Waiting<Req, Ans>[]): Promise<void> {
    while (queue.length > 0) {
      const group = this.takeGroup(queue);
      try {
        const answers = await this.statement(companyId, group);
        for (const [i, w] of group.entries()) w.resolve(answers[i]!);
      } catch (err) {
        // A statement PostgreSQL refused changed nothing. One request's
        // trouble (a row held elsewhere past the timeout, a deadlock that
        // outlived its retries) must not become the others' answer: each
        // goes again alone, in order, and gets its own. But a statement whose
        // answer was lost (the connection dropped) may have committed: run
        // again, a claim would take a second issue nobody is told about. Its
        // members get the error, as a request alone would.
        if (group.length === 1 || !this.safeToRerun(err)) for (const w of group) w.reject(err);
        else for (const w of group) await this.runAlone(companyId, w);
      }
    }
    this.queues.delete(companyId);
  }

  private async runAlone(companyId: string, waiting: Waiting<Req, Ans>): Promise<void> {
    try {
      const [answer] = await this.statement(companyId, [waiting]);
      waiting.resolve(answer!);
    } catch (err) {
      waiting.reject(err);
    }
  }

  /** Runs one statement for `group`; with tracing on, as its first member's and linked to the others'. */
  private statement(companyId: string, group: Waiting<Req, Ans>[]): Promise<Ans[]> {
    const requests = group.map((w) => w.request);
    if (!tracing()) return this.run(companyId, requests);
    return inGroup(
      companyId,
      group.map((w) => w.trace),
      () => this.run(companyId, requests),
    );
  }

  /** Up to MAX_GROUP waiting requests, in order, skipping (for now) any whose key is already taken. */
  private takeGroup(queue: Waiting<Req, Ans>[]): Waiting<Req, Ans>[] {
    const group: Waiting<Req, Ans>[] = [];
    const keys = new Set<string>();
    for (let i = 0; i < queue.length && group.length < MAX_GROUP && i < MAX_SKIPPED; ) {
      const key = this.key(queue[i]!.request);
      if (key !== null && keys.has(key)) {
        i++;
        continue;
      }
      if (key !== null) keys.add(key);
      group.push(queue.splice(i, 1)[0]!);
    }
    return group;
  }
}
