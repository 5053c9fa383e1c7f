// What every tool answers: structuredContent that matches its declared
// outputSchema, and a text for the model (a sentence, then the same JSON, as
// the MCP spec asks of a tool with structured output). A domain problem
// (conflict, not the holder, nothing to claim, a lost hold) is a normal answer
// with `problem` naming it; a refused request (bad arguments, the key, a
// limit) is `isError: true` with the API's code. No answer carries a stack.
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";
import { BatonError } from "../../client/errors.js";
import { unavailability } from "../../db/sql.js";
import { isUuid } from "../../domain/validate.js";
import type { GraphQLCall } from "../calls.js";
import type { Session } from "../session.js";

/** What a tool runs with: the API as the session's key, the session, and the key's company. */
export interface ToolContext {
  readonly call: GraphQLCall;
  readonly session: Session;
  readonly companyId: string;
  /** Told of every tool call under way (stdio waits for them when the session ends). */
  readonly track?: (call: Promise<unknown>) => void;
}

export const ISSUE_STATUSES = ["BACKLOG", "BLOCKED", "CANCELLED", "CLAIMED", "DONE", "ESCALATED", "IN_PROGRESS", "OPEN"] as const;
export const PRIORITIES = ["CRITICAL", "HIGH", "MEDIUM", "LOW"] as const;

/** An id as the API takes it (isUuid: any UUID); anything else is a bad argument, refused before a request. */
export const anId = (what: string) => z.string().refine(isUuid, { message: `must be ${what} (a UUID)` });
export const issueId = anId("an issue id");

export const issueShape = z.object({
  id: z.string(),
  title: z.string(),
  description: z.string().nullable(),
  priority: z.enum(PRIORITIES),
  status: z.enum(ISSUE_STATUSES),
  lockEpoch: z.number().int(),
  parentId: z.string().nullable(),
  concurrencyKey: z.string().nullable(),
});
export type IssueOut = z.infer<typeof issueShape>;

/** Who holds an issue now: its checkout's run and agent, and whether that run is live (RUNNING, lease ahead). */
const holderShape = z.object({ runId: z.string().nullable(), agentId: z.string().nullable(), live: z.boolean() });
export type Holder = z.infer<typeof holderShape>;

/** The fields a domain problem adds to any answer. */
export const problemFields = {
  problem: z.string().optional().describe("The typed problem, when the call did not do what it asked: e.g. HoldLost, CheckoutConflict, NoIssueAvailable"),
  message: z.string().optional(),
  holder: holderShape.nullable().optional(),
};
export interface ProblemOut {
  problem: string;
  message: string;
  holder?: Holder | null;
}

/**
 * A claim's answer: the issue the session now holds, and, when the session
 * had claimed that issue before at another epoch without releasing it, that
 * the earlier hold was lost (force-released, recovered): work done under it
 * was not kept as this hold's.
 */
export const earlierHoldLost = z
  .number()
  .int()
  .optional()
  .describe("This session's earlier hold of the issue, at this epoch, was lost before this claim: what was done under it did not count");

export async function claimed(ctx: ToolContext, issue: IssueOut): Promise<CallToolResult> {
  const earlier = await ctx.session.holdOf(issue.id);
  await ctx.session.held(issue.id, issue.lockEpoch);
  const lost = earlier !== undefined && earlier !== issue.lockEpoch;
  const note = lost ? ` Note: your earlier hold of it (epoch ${earlier}) was lost before this claim; start its work again.` : "";
  return answer(
    { issue, ...(lost ? { earlierHoldLost: earlier } : {}) },
    `You hold issue ${issue.id} "${issue.title}" (epoch ${issue.lockEpoch}), IN_PROGRESS: work on it, then call release_issue.${note}`,
  );
}

/** The issue fields the tools show, from an answer that may carry more. */
export function issueOut(issue: IssueOut & Record<string, unknown>): IssueOut {
  const { id, title, description, priority, status, lockEpoch, parentId, concurrencyKey } = issue;
  return { id, title, description, priority, status, lockEpoch, parentId, concurrencyKey };
}

export function answer(structured: Record<string, unknown>, sentence: string): CallToolResult {
  return { structuredContent: structured, content: [{ type: "text", text: `${sentence}\n${JSON.stringify(structured)}` }] };
}

/** A problem from a union answer: its typename and message. */
export function problemOf(result: { __typename: string; message?: string }): ProblemOut {
  return { problem: result.__typename, message: result.message ?? result.__typename };
}

/** A refused call: the API's code and message, nothing else (no stack). */
function refused(code: string, message: string): CallToolResult {
  return { isError: true, content: [{ type: "text", text: `${code}: ${message}` }] };
}

/** A refusal a tool's helpers throw (the session has ended, say): answered `isError` with its code. */
export class Refusal extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Runs a tool's body: a BatonError from the API is `isError` with its code
 * (and, for UNAVAILABLE, whether the change may have been applied); anything
 * else is logged by the caller's transport and answered without detail.
 */
export async function guarded(body: () => Promise<CallToolResult>, onUnexpected: (err: unknown) => void): Promise<CallToolResult> {
  try {
    return await body();
  } catch (err) {
    if (err instanceof Refusal) return refused(err.code, err.message);
    if (err instanceof BatonError) {
      const outcome = err.errors[0]?.extensions?.outcome;
      return refused(err.code, outcome ? `${err.message} (outcome: ${String(outcome)})` : err.message);
    }
    // The database away mid-call (in-process, a session's own statements), or the API not answering in time
    // (stdio's requests are bounded): the call may have taken effect.
    if (unavailability(err) || (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError"))) {
      return refused(
        "UNAVAILABLE",
        "the database was away: this call may or may not have taken effect (outcome: UNKNOWN); read with get_issue or list_issues before trying again",
      );
    }
    onUnexpected(err);
    return refused("INTERNAL_SERVER_ERROR", "the tool could not run; try again");
  }
}
