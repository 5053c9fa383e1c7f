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
