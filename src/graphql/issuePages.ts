// Pages of issues (Query.issues, Issue.subIssues): keyset cursors over
// (created_at, id), and the connection shape.
import { listIssues } from "../reads/lists.js";
import type { Issue, IssueStatus } from "../domain/types.js";
import { InvalidInputError } from "../domain/errors.js";
import { validateId } from "../domain/validate.js";
import { PAGE_LIMITS, pageSize } from "../bounds/pages.js";
import type { Context } from "./context.js";

export interface IssueEdge {
  cursor: string;
  node: Issue;
}
export interface IssueConnection {
  edges: IssueEdge[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}

const encodeCursor = (id: string) => Buffer.from(`issue:${id}`).toString("base64url");

function decodeCursor(cursor: string): string {
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  if (!text.startsWith("issue:")) throw new InvalidInputError("after is not a cursor from this API");
  try {
    return validateId("after", text.slice("issue:".length));
  } catch {
    throw new InvalidInputError("after is not a cursor from this API");
  }
}

export interface IssueFilter {
  status?: IssueStatus[] | null;
  assigneeAgentId?: string | null;
  parentId?: string | null;
  ready?: boolean | null;
}

/** One page of a company's issues matching `filter`, oldest first, after the cursor `after`. */
export async function issuePage(
  ctx: Context,
  companyId: string,
  filter: IssueFilter,
  first: number | null | undefined,
  after: string | null,
): Promise<IssueConnection> {
  const page = await listIssues(ctx.services.db, companyId, {
    ...filter,
    afterId: after != null ? decodeCursor(after) : null,
    first: pageSize("first", first, PAGE_LIMITS.issues),
  });
  const edges = page.issues.map((node) => ({ cursor: encodeCursor(node.id), node }));
  return { edges, pageInfo: { hasNextPage: page.hasNextPage, endCursor: edges.at(-1)?.cursor ?? null } };
}
