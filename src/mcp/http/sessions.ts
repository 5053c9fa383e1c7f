// MCP sessions over HTTP, kept in PostgreSQL (mcp_sessions) so that any API
// instance answers any request of any session: no affinity, nothing in one
// process's memory. The statements, each with the rule it keeps:
//   OPEN_SESSION        a key opens at most mcpSessionsPerKey sessions, across
//                       instances (LOCK_KEY_ROW, then COUNT_SESSIONS in a later
//                       snapshot), and an instance at most mcpSessionsPerInstance
//                       (its sessions are opened one at a time);
//   TOUCH_SESSION       every request of a session renews it (last_seen_at);
//   SET_SESSION_RUN     a session has one run: set only over the one it had;
//   HOLD / DROP_HOLD    the epoch at which the session claimed an issue;
//   END_SESSION         DELETE from its client: the row goes, then its run is
//                       finished (finishRun: RELEASED, RUN_FINISHED);
//   EXTEND_SESSION_LEASES_IF_LIVE  heartbeatRun for the run of every session
//                       seen within the idle limit whose key still works: a
//                       live run only (a dead run is never revived);
//   END_IDLE_SESSIONS   sessions idle past the limit, or whose key was
//                       revoked, are ended as by their client.
// A session whose every instance stops keeps nothing alive: its run's lease
// runs out and the recovery sweep takes its holds back, as for any dead run.
import { randomUUID } from "node:crypto";
import type { Db } from "../../db/client.js";
import { isUuid } from "../../domain/validate.js";
import { queryAll, queryOne, queryOneInTransaction, retryingAborts, sql, statement } from "../../db/sql.js";
import { finishRun } from "../../locks/runs/runs.js";
import type { LockDeps } from "../../locks/shared/deps.js";
import type { Logger } from "../../log.js";
import { LimitExceededError } from "../../bounds/settings.js";
import type { Session } from "../session.js";
import { Refusal } from "../tools/shapes.js";

export interface SessionKey {
  companyId: string;
  agentId: string;
  keyId: string;
}

export interface SessionBounds {
  readonly mcpSessionsPerKey: number;
  readonly mcpSessionsPerInstance: number;
}

interface SessionRow {
  run_id: string | null;
  holds: Record<string, number>;
}

/** This process's name in mcp_sessions.instance_id: sessions opened here count against this instance. */
const INSTANCE_ID = randomUUID();

/** Opens on this instance, one at a time: only this process writes its INSTANCE_ID, so its count cannot be passed by a race. */
let opening: Promise<unknown> = Promise.resolve();

/** Opens a session for `key` within the bounds; its id, which the client sends back as Mcp-Session-Id (null: the key was revoked meanwhile). */
export function openSession(db: Db, key: SessionKey, bounds: SessionBounds): Promise<string | null> {
  const opened = opening.then(() => openNow(db, key, bounds));
  opening = opened.catch(() => {});
  return opened;
}

/**
 * LOCK_KEY_ROW, then COUNT_SESSIONS, then OPEN_SESSION, in one transaction.
 * The count is its own statement, after the key's row is locked: under READ
 * COMMITTED it reads a snapshot taken once the lock was granted, so it sees
 * every session that an earlier holder of the lock (on any instance) opened.
 */
async function openNow(db: Db, key: SessionKey, bounds: SessionBounds): Promise<string | null> {
  const opened = await retryingAborts(() =>
    db.$transaction(async (tx) => {
      const locked = await queryOneInTransaction<{ ok: boolean } | undefined>(
        tx,
        statement("LOCK_KEY_ROW", sql`SELECT k.revoked_at IS NULL AS ok FROM api_keys k WHERE k.id = ${key.keyId}::uuid FOR UPDATE`),
      );
      if (!locked?.ok) return null;
      const live = await queryOneInTransaction<{ per_key: number; per_instance: number }>(
        tx,
        statement(
          "COUNT_SESSIONS",
          sql`
          SELECT (SELECT count(*)::int FROM mcp_sessions s WHERE s.key_id = ${key.keyId}::uuid) AS per_key,
                 (SELECT count(*)::int FROM mcp_sessions s WHERE s.instance_id = ${INSTANCE_ID}) AS per_instance`,
        ),
      );
      if (live.per_key >= bounds.mcpSessionsPerKey) {
        throw new LimitExceededError(
          "mcpSessionsPerKey",
          bounds.mcpSessionsPerKey,
          "too many MCP sessions open for this key: end one (DELETE) or let it idle out",
        );
      }
      if (live.per_instance >= bounds.mcpSessionsPerInstance) {
        throw new LimitExceededError("mcpSessionsPerInstance", bounds.mcpSessionsPerInstance, "too many MCP sessions open on this instance");
      }
      return queryOneInTransaction<{ id: string }>(
        tx,
        statement(
          "OPEN_SESSION",
          sql`
          INSERT INTO mcp_sessions (company_id, agent_id, key_id, instance_id)
          VALUES (${key.companyId}::uuid, ${key.agentId}::uuid, ${key.keyId}::uuid, ${INSTANCE_ID})
          RETURNING id`,
        ),
      );
    }),
  );
  return opened?.id ?? null;
}

/** The session `id` of `key`, renewed by this request; null if there is none (ended, idle past the limit, another key's). */
export async function touchSession(db: Db, id: string, keyId: string): Promise<DbSession | null> {
  if (!isUuid(id)) return null;
  const row = await queryOne<SessionRow | undefined>(
    db,
    statement(
      "TOUCH_SESSION",
      sql`
      UPDATE mcp_sessions s SET last_seen_at = now()
       WHERE s.id = ${id}::uuid AND s.key_id = ${keyId}::uuid
      RETURNING s.run_id, s.holds`,
    ),
  );
  return row ? new DbSession(db, id, row) : null;
}

/**
 * Ends session `id` of `key`: its row goes, then its run is finished and what
 * it holds goes back to the queue. False if there was no such session.
 */
export async function endSession(deps: LockDeps, id: string, keyId: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  const ended = await queryOne<Ended | undefined>(
    deps.db,
    statement(
      "END_SESSION",
      sql`DELETE FROM mcp_sessions s WHERE s.id = ${id}::uuid AND s.key_id = ${keyId}::uuid RETURNING s.run_id, s.agent_id, s.company_id, (SELECT a.name_key FROM agents a WHERE a.id = s.agent_id) AS agent_name_key`,
    ),
  );
  if (!ended) return false;
  await finishSessionRun(deps, ended);
  return true;
}

interface Ended {
  run_id: string | null;
  agent_id: string;
  company_id: string;
  agent_name_key: string;
}

/**
 * Finishes an ended session's run. The session is gone either way: a run that
 * cannot be finished now (the database away) is left to its lease and the
 * recovery sweep, as a dead run's holds always are, and said in the log.
 */
async function finishSessionRun(deps: LockDeps, ended: Ended, log?: Logger): Promise<void> {
  if (!ended.run_id) return;
  try {
    await finishRun(deps, { agentId: ended.agent_id, companyId: ended.company_id, agentNameKey: ended.agent_name_key }, ended.run_id, "SUCCEEDED");
  } catch (err) {
    log?.("warn", "MCP session ended, but its run could not be finished: its lease will run out", {
      runId: ended.run_id,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

/** A session of the table: what a tool needs of it, each a statement on its row. */
class DbSession implements Session {
  keyRevoked = false;

  constructor(
    private readonly db: Db,
    readonly id: string,
    private row: SessionRow,
    private readonly startRun?: () => Promise<string>,
    private readonly finishRun?: (runId: string) => Promise<void>,
  ) {}

  /** The same session, able to start and finish runs through the API as the request's key. */
  withRuns(startRun: () => Promise<string>, finish: (runId: string) => Promise<void>): DbSession {
    return new DbSession(this.db, this.id, this.row, startRun, finish);
  }

  async run(): Promise<string> {
    if (this.row.run_id) return this.row.run_id;
    if (!this.startRun || !this.finishRun) throw new Error("this session cannot start runs");
    const started = await this.startRun();
    const set = await this.setRun(started, null);
    // Another request of the session started one first: that one is the session's.
    if (set !== started) await this.finishRun(started);
    if (!set) throw new SessionEndedError();
    this.row.run_id = set;
    return set;
  }

  /** Sets the session's run to `runId` if it is still `expected`; the run it has after (null: the session is gone). */
  private async setRun(runId: string | null, expected: string | null): Promise<string | null> {
    const row = await queryOne<{ run_id: string | null } | undefined>(
      this.db,
      statement(
        "SET_SESSION_RUN",
        sql`
        UPDATE mcp_sessions s
           SET run_id = CASE WHEN s.run_id IS NOT DISTINCT FROM ${expected}::uuid THEN ${runId}::uuid ELSE s.run_id END
         WHERE s.id = ${this.id}::uuid
        RETURNING s.run_id`,
      ),
    );
    return row ? row.run_id : null;
  }

  async currentRun(): Promise<string | null> {
    return this.row.run_id;
  }

  async runDied(runId: string): Promise<void> {
    if (this.row.run_id !== runId) return;
    await this.setRun(null, runId);
    this.row.run_id = null;
  }

  async holdOf(issueId: string): Promise<number | undefined> {
    return this.row.holds[issueId];
  }

  async held(issueId: string, epoch: number): Promise<void> {
    this.row.holds = { ...this.row.holds, [issueId]: epoch };
    await this.db.$executeRaw(
      statement("HOLD", sql`UPDATE mcp_sessions SET holds = holds || jsonb_build_object(${issueId}::text, ${epoch}::int) WHERE id = ${this.id}::uuid`),
    );
  }

  async released(issueId: string): Promise<void> {
    const { [issueId]: _gone, ...rest } = this.row.holds;
    this.row.holds = rest;
    await this.db.$executeRaw(statement("DROP_HOLD", sql`UPDATE mcp_sessions SET holds = holds - ${issueId}::text WHERE id = ${this.id}::uuid`));
  }

  keyRefused(): void {
    this.keyRevoked = true;
  }
}

/** The session was ended (DELETE, idle, key revoked) while a request of it ran. */
class SessionEndedError extends Refusal {
  constructor() {
    super("SESSION_ENDED", "this MCP session has ended (DELETE, idle past the limit, or its key revoked): start a new one");
  }
}

/** How often keepSessions runs: three times per lease, and four times per idle limit, at least every 250 ms and at most every 10 s. */
export function sessionKeepingMs(leaseSeconds: number, idleSeconds: number): number {
  return Math.min(10_000, Math.max(250, Math.floor(Math.min((leaseSeconds * 1000) / 3, (idleSeconds * 1000) / 4))));
}

/**
 * Every `everyMs`, on every instance: extends the leases of the runs of
 * sessions seen within `idleSeconds`, then ends the sessions idle past it or
 * whose key was revoked. Returns its stop.
 */
export function keepSessions(deps: LockDeps, idleSeconds: number, everyMs: number, log: Logger): { stop(): Promise<void> } {
  let running: Promise<void> | null = null;
  const tick = async () => {
    try {
      await extendSessionLeases(deps, idleSeconds);
      await endIdleSessions(deps, idleSeconds, log);
    } catch (err) {
      log("warn", "MCP sessions: keeping leases failed; trying again", { error: err instanceof Error ? err.message : String(err) });
    }
  };
  // A tick still running (a slow database) makes the next one wait for the interval after it: no backlog of ticks.
  const timer = setInterval(() => {
    running ??= tick().finally(() => (running = null));
  }, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

async function extendSessionLeases(deps: Pick<LockDeps, "db" | "leaseSeconds">, idleSeconds: number): Promise<number> {
  return deps.db.$executeRaw(
    statement(
      "EXTEND_SESSION_LEASES_IF_LIVE",
      sql`
      UPDATE heartbeat_runs r
         SET last_heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => ${deps.leaseSeconds}::int)
        FROM mcp_sessions s JOIN api_keys k ON k.id = s.key_id
       WHERE r.id = s.run_id AND r.status = 'RUNNING' AND r.lease_expires_at > now()
         AND s.last_seen_at > now() - make_interval(secs => ${idleSeconds}::int) AND k.revoked_at IS NULL`,
    ),
  );
}

/** Ends up to 100 sessions idle past `idleSeconds` or with a revoked key, each as END_SESSION does; how many. */
async function endIdleSessions(deps: LockDeps, idleSeconds: number, log?: Logger): Promise<number> {
  const ended = await queryAll<Ended>(
    deps.db,
    statement(
      "END_IDLE_SESSIONS",
      sql`
      DELETE FROM mcp_sessions s
       WHERE s.id IN (
         SELECT i.id FROM mcp_sessions i JOIN api_keys k ON k.id = i.key_id
          WHERE i.last_seen_at <= now() - make_interval(secs => ${idleSeconds}::int) OR k.revoked_at IS NOT NULL
          LIMIT 100 FOR UPDATE OF i SKIP LOCKED)
      RETURNING s.run_id, s.agent_id, s.company_id, (SELECT a.name_key FROM agents a WHERE a.id = s.agent_id) AS agent_name_key`,
    ),
  );
  for (const session of ended) await finishSessionRun(deps, session, log);
  return ended.length;
}
