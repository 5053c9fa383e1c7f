-- Keys can be rotated and revoked (docs/access.md, "Rotating and revoking
-- keys"). A key row is never deleted: a revoked key keeps its row, with when
-- it stopped working and the transaction that stopped it, so that every API
-- instance can find the keys revoked since it last looked (the revocation
-- poll: revoked_xid at or above the horizon it read last time) even when the
-- pub/sub message about them was lost.
ALTER TABLE "api_keys"
    ADD COLUMN "revoked_at" TIMESTAMPTZ(6),
    ADD COLUMN "revoked_xid" xid8,
    ADD CONSTRAINT "api_keys_revoked_together" CHECK (("revoked_at" IS NULL) = ("revoked_xid" IS NULL));
-- The revocation poll: one range scan over the few revoked keys.
CREATE INDEX "api_keys_revoked_xid_idx" ON "api_keys"("revoked_xid") WHERE "revoked_xid" IS NOT NULL;
-- The agent's live keys (rotation and disabling revoke them).
CREATE INDEX "api_keys_agent_id_idx" ON "api_keys"("agent_id") WHERE "revoked_at" IS NULL;

-- A disabled agent has no key that works and gets no run from the scheduler;
-- enabling it lets the board give it a new key (rotateAgentKey).
ALTER TABLE "agents"
    ADD COLUMN "disabled_at" TIMESTAMPTZ(6),
    ADD COLUMN "disabled_reason" TEXT,
    ADD CONSTRAINT "agents_disabled_reason" CHECK (("disabled_at" IS NULL) = ("disabled_reason" IS NULL) AND char_length("disabled_reason") BETWEEN 1 AND 1000);
