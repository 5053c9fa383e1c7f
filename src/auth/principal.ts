// Who is calling. Resolved once per request (or WebSocket connection) from the
// bearer token, before the request's body is read. Known keys are cached in
// memory, which keeps the claim path at one database round trip; a key that
// is rotated or revoked is removed from the cache on every instance
// (revocations.ts), never looked up again per request. Tokens that are not
// keys cost a lookup only within the unknown-key budget (unknownKeys.ts), and
// a token already found unknown is remembered, so repeating it costs nothing.
//
// Keys are found by their sha256 (keys.ts), through a unique index: what the
// lookup compares is a hash of the token, never the key itself, so its time
// says nothing about any stored key. The admin token is compared in constant
// time (timingSafeEqual).
import type { Db } from "../db/client.js";
import { queryOne, sql, statement } from "../db/sql.js";
import { timingSafeEqual } from "node:crypto";
import { hashKey } from "./keys.js";
import type { KeyRevocations } from "./revocations.js";
import { UnknownKeyGuard } from "../bounds/unknownKeys.js";
import type { Principal } from "../domain/types.js";

const ADMIN: Principal = Object.freeze({ role: "ADMIN", companyId: null, agentId: null, keyId: null });

const MAX_CACHED_KEYS = 10_000;
const MAX_REMEMBERED_UNKNOWN = 10_000;
/** generateKey's shape: `baton_<kind>_` and 32 random bytes in base64url. */
const KEY_SHAPE = /^baton_(board|agent)_[A-Za-z0-9_-]{43}$/;

export class PrincipalResolver {
  private readonly known = new Map<string, Principal>();
  private readonly unknown = new Set<string>();
  private readonly inFlight = new Map<string, Promise<Principal | null>>();
  private readonly guard: UnknownKeyGuard;
  private readonly adminHash: Buffer;

  constructor(
    private readonly db: Db,
    adminToken: string,
    unknownKeysPerMinute: number,
    private readonly revocations: KeyRevocations,
    /** Called after each database lookup of a key (for metrics). */
    private readonly onLookup: (found: boolean) => void = () => {},
  ) {
    this.guard = new UnknownKeyGuard(unknownKeysPerMinute);
    this.adminHash = Buffer.from(hashKey(adminToken), "hex");
    revocations.onForget((keyIds) => {
      if (keyIds === null) return this.known.clear();
      for (const [hash, principal] of this.known) if (keyIds.has(principal.keyId!)) this.known.delete(hash);
    });
  }

  /**
   * null: no token, or not a key. Tokens arrive as `Bearer <token>` or bare.
   * Throws LimitExceededError when `address` has spent its unknown-key budget.
   */
  async resolve(authorization: unknown, address = "unknown"): Promise<Principal | null> {
    const token = parseBearer(authorization);
    if (!token) return null;
    // One hash per request: compared with the admin token's in constant time, then the cache's key.
    const hash = hashKey(token);
    if (timingSafeEqual(Buffer.from(hash, "hex"), this.adminHash)) return ADMIN;
    if (!KEY_SHAPE.test(token)) return null;
    const cached = this.known.get(hash);
    if (cached) return cached;
    if (this.unknown.has(hash)) return null;
    let pending = this.inFlight.get(hash);
    if (!pending) {
      pending = this.guard.lookup(
        address,
        () => this.lookup(hash),
        (principal) => principal !== null,
      );
      this.inFlight.set(hash, pending);
      void pending.finally(() => this.inFlight.delete(hash)).catch(() => {});
    }
    return pending;
  }

  private async lookup(hash: string): Promise<Principal | null> {
    // A revocation that lands while this lookup is in flight may be one it read
    // before: the answer serves this request, but is not cached.
    const generation = this.revocations.generation;
    // Invariant: only a key that works: not revoked, and not an agent's that is disabled.
    const row = await queryOne<{ keyId: string; role: "BOARD" | "AGENT"; companyId: string; agentId: string | null; nameKey: string | null } | undefined>(
      this.db,
      statement(
        "FIND_KEY_BY_HASH",
        sql`SELECT k.id AS "keyId", k.role, k.company_id AS "companyId", k.agent_id AS "agentId", a.name_key AS "nameKey"
            FROM api_keys k LEFT JOIN agents a ON a.id = k.agent_id
           WHERE k.key_hash = ${hash} AND k.revoked_at IS NULL AND a.disabled_at IS NULL`,
      ),
    );
    this.onLookup(row !== undefined);
    if (!row) {
      remember(this.unknown, hash, MAX_REMEMBERED_UNKNOWN);
      return null;
    }
    const principal: Principal =
      row.role === "BOARD"
        ? { role: "BOARD", companyId: row.companyId, agentId: null, keyId: row.keyId }
        : { role: "AGENT", companyId: row.companyId, agentId: row.agentId!, agentNameKey: row.nameKey!, keyId: row.keyId };
    if (generation !== this.revocations.generation) return principal;
    if (this.known.size >= MAX_CACHED_KEYS) this.known.delete(this.known.keys().next().value!);
    this.known.set(hash, principal);
    return principal;
  }
}

/** Adds to a bounded set, forgetting the oldest entry when full. */
function remember(set: Set<string>, value: string, max: number): void {
  if (set.size >= max) set.delete(set.values().next().value!);
  set.add(value);
}

/** What per-key limits count against: the key itself, or the address for a caller without one. */
export function principalKey(principal: Principal | null, address: string): string {
  if (!principal) return `anonymous:${address}`;
  if (principal.role === "ADMIN") return "admin";
  if (principal.role === "BOARD") return `board:${principal.companyId}`;
  return `agent:${principal.agentId}`;
}

/** `unknown`: graphql-ws connectionParams are whatever JSON the client sent; only a string can be a token. */
export function parseBearer(authorization: unknown): string | null {
  if (typeof authorization !== "string" || !authorization) return null;
  const value = authorization.trim();
  const match = /^Bearer\s+(.+)$/i.exec(value);
  const token = (match ? match[1]! : value).trim();
  return token || null;
}
