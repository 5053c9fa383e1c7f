// A company with N agents (each with a key and a live run) behind a Baton API
// child process, over a fresh database, plus helpers to (re)fill the backlog.
import pg from "pg";
import { ADMIN_TOKEN, freshDatabase, gql, startApi } from "./lib.js";

export interface Worker {
  agentId: string;
  key: string;
  runId: string;
  nameKey: string;
}

export interface Fixture {
  url: string;
  databaseUrl: string;
  apiUrl: string;
  /** The API child process, for CPU accounting. */
  apiPid: number | undefined;
  companyId: string;
  boardKey: string;
  workers: Worker[];
  db: pg.Pool;
  /** Deletes every issue and event, then inserts `open` OPEN issues (and `done` DONE ones) in claim order. */
  refill(open: number, done?: number): Promise<void>;
  close(): Promise<void>;
}

export async function fixture(name: string, agents: number, port: number, env: Record<string, string> = {}): Promise<Fixture> {
  const databaseUrl = await freshDatabase(name);
  // as the API connects (src/db/client.ts): no JIT
  const db = new pg.Pool({ connectionString: databaseUrl, max: Math.max(agents, 4), options: "-c jit=off" });
  const api = await startApi(databaseUrl, port, env);
  try {
    const { createCompany } = await gql<{ createCompany: { company: { id: string }; boardKey: string } }>(
      api.url,
      ADMIN_TOKEN,
      `mutation { createCompany(name: "bench") { company { id } boardKey } }`,
    );
    const workers: Worker[] = [];
    for (let i = 0; i < agents; i++) {
      const { createAgent } = await gql<{ createAgent: { agent: { id: string; nameKey: string }; apiKey: string } }>(
        api.url,
        createCompany.boardKey,
        `mutation($n: String!) { createAgent(name: $n) { agent { id nameKey } apiKey } }`,
        { n: `agent ${i}` },
      );
      const { startRun } = await gql<{ startRun: { id: string } }>(api.url, createAgent.apiKey, `mutation { startRun { id } }`);
      workers.push({ agentId: createAgent.agent.id, key: createAgent.apiKey, runId: startRun.id, nameKey: createAgent.agent.nameKey });
    }
    const companyId = createCompany.company.id;
    return {
      url: api.url,
      apiUrl: api.url,
      apiPid: api.child.pid,
      databaseUrl,
      companyId,
      boardKey: createCompany.boardKey,
      workers,
      db,
      async refill(open, done = 0) {
        await db.query(`TRUNCATE lock_events`);
        await db.query(`TRUNCATE issues CASCADE`);
        if (done > 0) {
          await db.query(
            `INSERT INTO issues (company_id, title, status, created_at)
             SELECT $1, 'old ' || g, 'DONE', now() - interval '1 day' + g * interval '1 microsecond' FROM generate_series(1, $2) g`,
            [companyId, done],
          );
        }
        await db.query(
          `INSERT INTO issues (company_id, title, priority, created_at)
           SELECT $1, 'job ' || g, (ARRAY['CRITICAL','HIGH','MEDIUM','LOW'])[1 + g % 4]::issue_priority, now() + g * interval '1 microsecond'
             FROM generate_series(1, $2) g`,
          [companyId, open],
        );
        await db.query(`VACUUM ANALYZE issues`);
        await db.query(`VACUUM ANALYZE companies`);
        await db.query(`VACUUM ANALYZE heartbeat_runs`);
      },
      async close() {
        await api.stop();
        await db.end();
      },
    };
  } catch (err) {
    await api.stop();
    await db.end();
    throw err;
  }
}
