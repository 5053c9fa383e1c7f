// One RealWorld (test/conformance/adapter.ts: the lock verbs on two
// connections, and a plain client) on a fresh database for a test file:
// made before its tests, closed and dropped after them.
import { afterAll, beforeAll } from "vitest";
import { RealWorld } from "../conformance/adapter.js";
import { createTestDatabase } from "./db.js";
import type { TestDatabase } from "./db.js";

export function useRealWorld(): { readonly world: RealWorld } {
  let database: TestDatabase | undefined;
  let world: RealWorld | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    world = await RealWorld.connect(database.url);
  });
  afterAll(async () => {
    await world?.close();
    await database?.drop();
  });
  return {
    get world() {
      if (!world) throw new Error("useRealWorld: the world exists only while the file's tests run");
      return world;
    },
  };
}

/** Waits (at most 5 s) until `n` of the world's two instances' connections are waiting on a lock (a staggered race's step). */
export async function untilWaiting(world: RealWorld, n: number): Promise<void> {
  const until = Date.now() + 5000;
  while (Date.now() < until) {
    await world.admin.query("SELECT pg_stat_clear_snapshot()");
    const { rows } = await world.admin.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name LIKE 'baton-conformance-_'",
    );
    if (rows[0]!.n >= n) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`${n} statements were not waiting within 5 s`);
}
