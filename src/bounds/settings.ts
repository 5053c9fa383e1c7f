// Bounds on everything a client controls. Each is checked before the work it
// protects: a body is counted as it is read, a document's tokens as it is
// parsed, an answer's size before any resolver runs, a subscription before it
// starts. Requests without a valid key get the tightest bounds, so work done
// before authentication stays tiny. docs/operations.md has the table.

export interface Limits {
  /** Bytes of a request body with a valid key, counted as read (not as declared). */
  readonly maxBodyBytes: number;
  /** Bytes of a request body without a valid key. */
  readonly anonymousMaxBodyBytes: number;
  /** Lexical tokens in one GraphQL document with a valid key. */
  readonly maxTokens: number;
  /** Lexical tokens in one document without a valid key. */
  readonly anonymousMaxTokens: number;
  /** Tokens of parsed documents kept for reuse, all documents together (documents without a valid key are never kept). */
  readonly documentCacheTokens: number;
  /** The longest answer one operation could produce, in characters, computed before it runs. */
  readonly maxResponseChars: number;
  /** Operations open at once on one WebSocket. */
  readonly subscriptionsPerSocket: number;
  /** lockChanged subscriptions open at once for one key, on one instance. */
  readonly subscriptionsPerKey: number;
  /** lockChanged subscriptions open at once for one company, on one instance. */
  readonly subscriptionsPerCompany: number;
  /** WebSockets and SSE streams open at once for one key, on one instance. */
  readonly connectionsPerKey: number;
  /** WebSockets without a valid key open at once from one address. */
  readonly anonymousConnectionsPerAddress: number;
  /** Tokens that are not a known key, looked up in the database per minute per address; past it, 429 without a lookup. */
  readonly unknownKeysPerMinute: number;
  /** MCP sessions over HTTP open at once for one key, on all instances together. */
  readonly mcpSessionsPerKey: number;
  /** MCP sessions over HTTP opened on one instance and open at once. */
  readonly mcpSessionsPerInstance: number;
  /** Bytes of one MCP request body (with an agent key; without one nothing is read). */
  readonly mcpMaxBodyBytes: number;
  /** MCP requests (tool calls and the rest) per minute for one key, on one instance. */
  readonly mcpRequestsPerMinute: number;
}

export interface LimitSetting {
  readonly name: keyof Limits;
  readonly env: string;
  readonly fallback: number;
  readonly min: number;
  readonly max: number;
}

/** Every limit, its variable and its default: the config reads this table, and a test holds docs/operations.md to it. */
export const LIMIT_SETTINGS: readonly LimitSetting[] = [
  { name: "maxBodyBytes", env: "BATON_MAX_BODY_BYTES", fallback: 10 * 1024 * 1024, min: 1024, max: 256 * 1024 * 1024 },
  { name: "anonymousMaxBodyBytes", env: "BATON_ANONYMOUS_MAX_BODY_BYTES", fallback: 16 * 1024, min: 1024, max: 10 * 1024 * 1024 },
  { name: "maxTokens", env: "BATON_MAX_TOKENS", fallback: 5_000, min: 100, max: 1_000_000 },
  { name: "anonymousMaxTokens", env: "BATON_ANONYMOUS_MAX_TOKENS", fallback: 1_000, min: 100, max: 1_000_000 },
  { name: "documentCacheTokens", env: "BATON_DOCUMENT_CACHE_TOKENS", fallback: 200_000, min: 0, max: 10_000_000 },
  { name: "maxResponseChars", env: "BATON_MAX_RESPONSE_CHARS", fallback: 6_000_000, min: 10_000, max: 400_000_000 },
  { name: "subscriptionsPerSocket", env: "BATON_MAX_SUBSCRIPTIONS_PER_SOCKET", fallback: 100, min: 1, max: 1_000_000 },
  { name: "subscriptionsPerKey", env: "BATON_MAX_SUBSCRIPTIONS_PER_KEY", fallback: 200, min: 1, max: 1_000_000 },
  { name: "subscriptionsPerCompany", env: "BATON_MAX_SUBSCRIPTIONS_PER_COMPANY", fallback: 1_000, min: 1, max: 1_000_000 },
  { name: "connectionsPerKey", env: "BATON_MAX_CONNECTIONS_PER_KEY", fallback: 100, min: 1, max: 1_000_000 },
  { name: "anonymousConnectionsPerAddress", env: "BATON_ANONYMOUS_MAX_CONNECTIONS", fallback: 10, min: 0, max: 1_000_000 },
  { name: "unknownKeysPerMinute", env: "BATON_UNKNOWN_KEYS_PER_MINUTE", fallback: 30, min: 1, max: 1_000_000 },
  { name: "mcpSessionsPerKey", env: "BATON_MCP_SESSIONS_PER_KEY", fallback: 100, min: 1, max: 1_000_000 },
  { name: "mcpSessionsPerInstance", env: "BATON_MCP_SESSIONS_PER_INSTANCE", fallback: 10_000, min: 1, max: 10_000_000 },
  { name: "mcpMaxBodyBytes", env: "BATON_MCP_MAX_BODY_BYTES", fallback: 1024 * 1024, min: 1024, max: 64 * 1024 * 1024 },
  { name: "mcpRequestsPerMinute", env: "BATON_MCP_REQUESTS_PER_MINUTE", fallback: 1_200, min: 1, max: 10_000_000 },
];

export const DEFAULT_LIMITS: Limits = Object.freeze(Object.fromEntries(LIMIT_SETTINGS.map((s) => [s.name, s.fallback])) as unknown as Limits);

/**
 * A request went past one of the limits above (or the fixed query-shape ones).
 * Clients see `extensions.code = "LIMIT_EXCEEDED"` with the limit's name and
 * value; over HTTP, before GraphQL runs, a 413 or 429.
 */
export class LimitExceededError extends Error {
  override name = "LimitExceededError";
  constructor(
    readonly limit: keyof Limits,
    readonly max: number,
    message: string,
    /** Seconds after which the same request may succeed (rate limits only). */
    readonly retryAfterSeconds?: number,
  ) {
    super(`${message} (limit ${limit} = ${max})`);
  }

  get extensions() {
    return { code: "LIMIT_EXCEEDED", limit: this.limit, max: this.max };
  }
}
