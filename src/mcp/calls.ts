// How the MCP tools reach the API: each tool runs GraphQL operations of the
// schema, as the caller's key, so every rule and bound of the API holds for
// them unchanged. `baton mcp` (stdio) sends them over HTTP to BATON_URL with
// the SDK's request (src/cli/commands/mcp.ts); /mcp runs them in-process
// through the instance's own yoga, as the request's key (callInProcess).
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import { batonErrorOf } from "../client/errors.js";
import { retryingConflicts } from "../client/request.js";

/** Runs one operation; a GraphQL error is thrown as BatonError (src/client/errors.ts). */
export type GraphQLCall = <R, V extends Record<string, unknown>>(document: TypedDocumentNode<R, V>, variables: V) => Promise<R>;

/** In-process: `fetch` is the instance's yoga, with the request's principal already resolved; CONFLICT_RETRY is retried. */
export function callInProcess(fetch: (request: Request) => Promise<Response>): GraphQLCall {
  const once = async <R, V extends Record<string, unknown>>(document: TypedDocumentNode<R, V>, variables: V): Promise<R> => {
    const response = await fetch(
      new Request("http://in-process/graphql", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ query: print(document), variables }),
      }),
    );
    const body = (await response.json()) as { data?: R | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };
    if (body.errors?.length) throw batonErrorOf(body.errors);
    return body.data as R;
  };
  return (document, variables) => retryingConflicts(() => once(document, variables));
}
