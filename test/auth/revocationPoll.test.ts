// The revocation poll reads each committed revocation once: keys revoked by a
// transaction its previous snapshot could not see, and no others, however
// long a transaction stays open elsewhere in the cluster (docs/access.md,
// "Rotating and revoking keys").
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connectDb } from "../../src/db/client.js";
import type { DbHandle } from "../../src/db/client.js";
import { type KeyRevocations, RevocationPoll } from "../../src/auth/revocations.js";
import { ADMIN_DATABASE_URL, createTestDatabase } from "../helpers/db.js";
import type { TestDatabase } from "../helpers/db.js";

let database: TestDatabase;
let handle: DbHandle;
let admin: pg.Client;
let companyId: string;

beforeAll(async () => {
  database = await createTestDatabase();
  handle = connectDb(database.url, 2, "revocation-poll-test");
  admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  companyId = (await admin.query("INSERT INTO companies (name) VALUES ('poll') RETURNING id")).rows[0].id;
});
afterAll(async () => {
  await admin?.end();
  await handle?.close();
  await database?.drop();
});

const newKey = async (): Promise<string> =>
  (await admin.query("INSERT INTO api_keys (company_id, role, key_hash) VALUES ($1, 'BOARD', $2) RETURNING id", [companyId, randomBytes(16).toString("hex")]))
    .rows[0].id;
const REVOKE = "UPDATE api_keys SET revoked_at = now(), revoked_xid = pg_current_xact_id() WHERE id = $1";

/** A poll whose revocations land in `polls`, one entry per poll: the key ids it read. */
function recordingPoll() {
  const polls: string[][] = [];
  const revocations = {
    revokedKeys: (ids: readonly string[]) => void polls.push([...ids].sort()),
    forgetAll: async () => {},
  } as unknown as KeyRevocations;
  return { poll: new RevocationPoll(handle.prisma, revocations, 60_000, () => {}), polls };
}

it("a transaction left open in another database does not make polls read old revocations again, and each revocation still arrives once", async () => {
  // Open, with a transaction id, for the whole test: the oldest transaction of the cluster.
  const elsewhere = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await elsewhere.connect();
  const { poll, polls } = recordingPoll();
  try {
    await elsewhere.query("BEGIN");
    await elsewhere.query("SELECT pg_current_xact_id()");
    await poll.start();
    poll.stop(); // polled by hand below
    const first = await newKey();
    await admin.query(REVOKE, [first]);
    await poll.poll();
    await poll.poll();
    // A revocation in a transaction that is open across a poll arrives with the poll after its commit.
    const second = await newKey();
    const revoking = new pg.Client({ connectionString: database.url });
    await revoking.connect();
    try {
      await revoking.query("BEGIN");
      await revoking.query(REVOKE, [second]);
      // A younger transaction that ends first: the poll's snapshot lists the revoking one as running (below its xmax).
      await newKey();
      await poll.poll();
      await revoking.query("COMMIT");
    } finally {
      await revoking.end();
    }
    await poll.poll();
    await poll.poll();
    expect(polls).toEqual([[first], [], [], [second], []]);
  } finally {
    poll.stop();
    await elsewhere.end();
  }
});
