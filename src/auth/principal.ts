// Who is calling. Resolved once per request (or WebSocket connection) from the
// bearer token; key lookups are cached in memory because keys never change
// once issued, which keeps the claim path at one database round trip.
import type { Db } from "../db/client.js";
import { queryOne, sql } from "../db/sql.js";
import { hashKey, sameSecret } from "./keys.js";

export type Principal =
  | { role: "ADMIN"; companyId: null; agentId: null }
  | { role: "BOARD"; companyId: string; agentId: null }
  | { role: "AGENT"; companyId: string; agentId: string; agentNameKey: string };

const MAX_CACHED_KEYS = 10_000;

export class PrincipalResolver {
  private readonly cache = new Map<string, Principal>();

  constructor(
    private readonly db: Db,
    private readonly adminToken: string,
  ) {}

  /** null: no such token. Tokens arrive as `Bearer <token>` or bare. */
  async resolve(authorization: unknown): Promise<Principal | null> {
    const token = parseBearer(authorization);
    if (!token) return null;
    if (sameSecret(token, this.adminToken)) return { role: "ADMIN", companyId: null, agentId: null };
    if (!token.startsWith("baton_") || token.length > 200) return null;
    const hash = hashKey(token);
    const cached = this.cache.get(hash);
    if (cached) return cached;
    const row = await queryOne<{ role: "BOARD" | "AGENT"; companyId: string; agentId: string | null; nameKey: string | null } | undefined>(
      this.db,
      sql`SELECT k.role, k.company_id AS "companyId", k.agent_id AS "agentId", a.name_key AS "nameKey"
            FROM api_keys k LEFT JOIN agents a ON a.id = k.agent_id
           WHERE k.key_hash = ${hash}`,
    );
    if (!row) return null;
    const principal: Principal =
      row.role === "BOARD"
        ? { role: "BOARD", companyId: row.companyId, agentId: null }
        : { role: "AGENT", companyId: row.companyId, agentId: row.agentId!, agentNameKey: row.nameKey! };
    if (this.cache.size >= MAX_CACHED_KEYS) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(hash, principal);
    return principal;
  }
}

/** `unknown`: graphql-ws connectionParams are whatever JSON the client sent; only a string can be a token. */
export function parseBearer(authorization: unknown): string | null {
  if (typeof authorization !== "string" || !authorization) return null;
  const value = authorization.trim();
  const match = /^Bearer\s+(.+)$/i.exec(value);
  const token = (match ? match[1]! : value).trim();
  return token || null;
}
