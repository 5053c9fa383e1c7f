// What every resolver receives, and the scope checks (docs/access.md). Resolvers stay thin: check scope, validate ids, call a verb.
import { GraphQLError } from "graphql";
import type { Principal } from "../domain/types.js";
import type { KeyRevocations } from "../auth/revocations.js";
import type { Db } from "../db/client.js";
import type { EventBus } from "../events/bus.js";
import type { LedgerReader } from "../events/history.js";
import type { LedgerWatcher } from "../events/watcher.js";
import type { Admission } from "../bounds/admission.js";
import type { DependencyLoader, IssueLoader } from "./issueLoader.js";
import type { LockDeps } from "../locks/shared/deps.js";
import type { AgentActor } from "../locks/shared/types.js";
import type { Issue } from "../domain/types.js";
import { ForbiddenError } from "../domain/errors.js";
import { validateId } from "../domain/validate.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";

export interface AppServices {
  readonly db: Db;
  readonly bus: EventBus;
  readonly watcher: LedgerWatcher;
  readonly ledger: LedgerReader;
  readonly issues: IssueLoader;
  /** Issue.blockedBy and Issue.waitingOn, batched across operations. */
  readonly dependencies: DependencyLoader;
  readonly locks: LockDeps;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Live events a subscription may hold for a slow client before it is ended. */
  readonly subscriptionBuffer: number;
  /** Open connections and subscriptions, per key and company, against their limits. */
  readonly admission: Admission;
  /** Keys revoked since this instance started: refused, and what they opened ended (src/auth/revocations.ts). */
  readonly revocations: KeyRevocations;
}

export interface Context {
  readonly principal: Principal | null;
  readonly services: AppServices;
  /** The issue within the caller's scope; lookups made in one tick share a query (LockEvent.issue). */
  readonly loadIssue: (id: string) => Promise<Issue | null>;
}

export function createContext(services: AppServices, principal: Principal | null): Context {
  const scope = principal?.companyId ?? null;
  return { principal, services, loadIssue: (id) => services.issues.load(scope, id) };
}

export const unauthenticated = () =>
  new GraphQLError("missing or unknown token: send Authorization: Bearer <token>", { extensions: { code: "UNAUTHENTICATED" } });

export const keyRevoked = () =>
  new GraphQLError("this key has been revoked (rotated, or its agent disabled): use the new key", { extensions: { code: "UNAUTHENTICATED" } });

/** The caller; a key revoked since it was resolved (a WebSocket opened before) is refused like an unknown one. */
export function requirePrincipal(ctx: Context): Principal {
  if (!ctx.principal) throw unauthenticated();
  if (ctx.services.revocations.isRevoked(ctx.principal.keyId)) throw keyRevoked();
  return ctx.principal;
}

export function requireAdmin(ctx: Context): void {
  if (requirePrincipal(ctx).role !== "ADMIN") throw new ForbiddenError("only the admin token may do this");
}

/** The board's company. */
export function requireBoard(ctx: Context): string {
  const p = requirePrincipal(ctx);
  if (p.role !== "BOARD") throw new ForbiddenError("only a board key may do this");
  return p.companyId;
}

/**
 * Who manages keys and agents, and where: a board key its own company (its
 * id), the admin token any (null). Agent keys may not.
 */
export function requireKeyManager(ctx: Context): string | null {
  const p = requirePrincipal(ctx);
  if (p.role === "AGENT") throw new ForbiddenError("only a board key or the admin token may do this");
  return p.companyId;
}

/** The calling agent, acting as itself only. */
export function requireAgent(ctx: Context): AgentActor {
  const p = requirePrincipal(ctx);
  if (p.role !== "AGENT") throw new ForbiddenError("only an agent key may do this");
  return { companyId: p.companyId, agentId: p.agentId, agentNameKey: p.agentNameKey };
}

/** May the caller read this company? Admin: any; board and agent keys: their own only. */
export function requireCompanyReader(ctx: Context, companyId: string): string {
  const p = requirePrincipal(ctx);
  const id = validateId("companyId", companyId);
  if (p.role !== "ADMIN" && p.companyId !== id) throw new ForbiddenError("this token cannot read that company");
  return id;
}

/**
 * May the caller oversee this company (its agents, its lock audit)? Admin:
 * any; a board key: its own. Agent keys read issues, runs and events only.
 */
export function requireCompanyOverseer(ctx: Context, companyId: string): string {
  const id = requireCompanyReader(ctx, companyId);
  if (requirePrincipal(ctx).role === "AGENT") throw new ForbiddenError("agent keys may read issues, runs and events only");
  return id;
}

/** The company an entity lookup is confined to: null (any) for the admin. */
export function readScope(ctx: Context): string | null {
  return requirePrincipal(ctx).companyId;
}
