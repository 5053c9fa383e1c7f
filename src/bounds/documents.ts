// Parsing under limits, and the reuse of parsed documents.
//
// A GraphQL document costs memory and CPU in proportion to its tokens (about
// 300 bytes of AST per token), so tokens are what is bounded: maxTokens with a
// valid key, anonymousMaxTokens without one. The parser stops counting at the
// limit, so a huge document costs no more than a document at the limit.
//
// Parsed documents are kept for reuse in an LRU (lru-cache) weighed by tokens
// (and one per 16 characters of source, which bounds comments and whitespace
// too): documentCacheTokens in all, a fortieth of that for one document. Documents
// from callers without a valid key are never kept: they cannot fill the cache
// or push out the documents of real clients. Validation results are kept for
// documents that came from the cache (a WeakSet: they go when the document
// goes).
import { GraphQLError, parse } from "graphql";
import type { DocumentNode } from "graphql";
import type { Plugin } from "graphql-yoga";
import { LRUCache } from "lru-cache";
import type { Principal } from "../domain/types.js";
import type { Limits } from "./settings.js";
import { LimitExceededError } from "./settings.js";

/** What the server context carries into every operation: set by the HTTP handler and the WebSocket server. */
export interface TransportContext {
  /** null: no valid key. */
  principal: Principal | null;
}

const CHARS_PER_UNIT = 16;

/** The tokens graphql-js counted while parsing `document`. */
const tokensOf = (document: DocumentNode) => (document as DocumentNode & { tokenCount?: number }).tokenCount ?? 0;

/**
 * The parsed documents kept: at most `budget` units in all, at most a
 * fortieth of it (rounded down) for one, and the least recently used goes
 * first. null when not even a one-unit document would fit (`budget` below 40, or 0: off).
 */
function documentCache(budget: number): LRUCache<string, DocumentNode> | null {
  const maxEntrySize = Math.floor(budget / 40);
  if (maxEntrySize < 1) return null;
  return new LRUCache<string, DocumentNode>({
    maxSize: budget,
    maxEntrySize,
    sizeCalculation: (document, source) => tokensOf(document) + Math.ceil(source.length / CHARS_PER_UNIT),
  });
}

/** A GraphQL error for a limit, as clients see it: LIMIT_EXCEEDED with the limit's name and value. */
export function limitError(error: LimitExceededError): GraphQLError {
  return new GraphQLError(error.message, { extensions: { ...error.extensions, http: { status: 400 } } });
}

/** Parses `source` with the caller's token limit; a document over it is refused with LIMIT_EXCEEDED (maxTokens). */
function parseWithin(source: string, principal: Principal | null, limits: Limits): DocumentNode {
  const name = principal ? "maxTokens" : "anonymousMaxTokens";
  const maxTokens = limits[name];
  // Without a key, even reading a long source is refused: the body limit bounds HTTP, this bounds WebSocket messages.
  if (!principal && source.length > limits.anonymousMaxBodyBytes) {
    throw limitError(new LimitExceededError("anonymousMaxBodyBytes", limits.anonymousMaxBodyBytes, "document too long for a request without a valid key"));
  }
  try {
    return parse(source, { maxTokens });
  } catch (err) {
    if (err instanceof GraphQLError && /contains more th\w+ \d+ tokens/.test(err.message)) {
      throw limitError(new LimitExceededError(name, maxTokens, `document has more than ${maxTokens} tokens`));
    }
    throw err;
  }
}

export function documentLimits(limits: Limits, onRefused: (limit: string) => void): Plugin<TransportContext> {
  const cache = documentCache(limits.documentCacheTokens);
  const validated = new WeakSet<DocumentNode>();
  return {
    onParse({ context, params, setParsedDocument, setParseFn }) {
      const principal = context.principal ?? null;
      const source = params.source.toString();
      if (principal) {
        const cached = cache?.get(source);
        if (cached) return setParsedDocument(cached);
      }
      setParseFn(() => {
        let document: DocumentNode;
        try {
          document = parseWithin(source, principal, limits);
        } catch (err) {
          if (err instanceof GraphQLError && err.extensions.code === "LIMIT_EXCEEDED") onRefused(String(err.extensions.limit));
          throw err;
        }
        // A source parsed twice at once keeps the first document, and its place in the order.
        if (principal && cache && !cache.has(source)) cache.set(source, document);
        return document;
      });
    },
    onValidate({ params, setResult }) {
      if (validated.has(params.documentAST)) return setResult([]);
      return ({ result }) => {
        if (result.length === 0) validated.add(params.documentAST);
      };
    },
  };
}
