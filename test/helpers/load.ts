// Agents under load, for fault tests: each loops start run → claim → acquire →
// release DONE against whichever API URLs are up, until stopped, and records
// what it was told (for the history checker) and how every call ended. A call
// ends in one of three ways:
//   - an answer: data, or a GraphQL error with a code the API documents;
//   - a transport error: no answer at all (connection refused or cut);
//   - anything else, which is a finding (an INTERNAL_SERVER_ERROR, say).
// After a call whose outcome is unknown the agent drops its run (as the
// baton/client worker does), so a claim it was never told of stays with a run
// nobody uses: never with a live worker that does not know it.
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { Client, Ops } from "./harness.js";
import type { GraphQLResponse } from "./harness.js";
import type { Told } from "../../support/history.js";

export interface LoadOutcome {
  told: Told[];
  answers: number;
  /** Answers that were refusals for the database being away (UNAVAILABLE). */
  unavailable: number;
  transportErrors: number;
  /** Everything else: each is a violation. */
  unexpected: string[];
  completed: number;
}

const DOCUMENTED = new Set(["UNAVAILABLE", "UNAUTHENTICATED", "FORBIDDEN", "BAD_USER_INPUT", "LIMIT_EXCEEDED", "CONFLICT_RETRY"]);

export function startLoad(urls: () => string[], tokens: readonly string[]): { completed(): number; stop(): Promise<LoadOutcome> } {
  const outcome: LoadOutcome = { told: [], answers: 0, unavailable: 0, transportErrors: 0, unexpected: [], completed: 0 };
  let stopped = false;

  /** One call: its data, or null when it ended without data (counted here). */
  async function call<R, V>(url: string, token: string, doc: TypedDocumentNode<R, V>, variables: V): Promise<R | null> {
    let res: GraphQLResponse<R>;
    try {
      res = await new Client(url, token).request(doc, variables);
    } catch {
      outcome.transportErrors++;
      return null;
    }
    outcome.answers++;
    if (res.data && !res.errors?.length) return res.data;
    const code = String(res.errors?.[0]?.extensions?.code ?? "none");
    if (code === "UNAVAILABLE") outcome.unavailable++;
    if (!DOCUMENTED.has(code)) outcome.unexpected.push(`${code}: ${res.errors?.[0]?.message ?? JSON.stringify(res)}`);
    return null;
  }

  async function agent(token: string, n: number): Promise<void> {
    let runId: string | null = null;
    for (let i = n; !stopped; i++) {
      const live = urls();
      if (live.length === 0) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      const url = live[i % live.length]!;
      if (!runId) {
        const started = await call(url, token, Ops.StartRunDocument, {});
        runId = started?.startRun.id ?? null;
        if (!runId) await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      const claimed = await call(url, token, Ops.ClaimIssueDocument, { runId });
      if (!claimed) {
        runId = null; // it may hold an issue it was never told of: leave that run to its lease
        continue;
      }
      const claim = claimed.claimIssue;
      if (claim.__typename === "RunNotActive") {
        runId = null;
        continue;
      }
      if (claim.__typename !== "IssueClaimed") {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      outcome.told.push({ kind: "claimed", runId, issueId: claim.issue.id, lockEpoch: claim.issue.lockEpoch });
      const acquired = await call(url, token, Ops.AcquireExecutionDocument, { runId, issueId: claim.issue.id });
      if (acquired?.acquireExecution.__typename !== "ExecutionAcquired") {
        runId = null;
        continue;
      }
      const released = await call(url, token, Ops.ReleaseIssueDocument, { runId, issueId: claim.issue.id, outcome: "DONE" });
      if (released?.releaseIssue.__typename === "IssueReleased") {
        outcome.told.push({ kind: "released", runId, issueId: claim.issue.id });
        outcome.completed++;
      } else {
        runId = null;
      }
    }
  }

  const agents = tokens.map((token, n) => agent(token, n));
  return {
    completed: () => outcome.completed,
    async stop() {
      stopped = true;
      await Promise.all(agents);
      return outcome;
    },
  };
}
