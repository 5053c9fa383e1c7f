-- MCP sessions over HTTP (src/mcp/http/sessions.ts, docs/agents.md): an
-- agent's session lives here, not in one API instance's memory, so that any
-- instance can answer any of its requests. A session has at most one run,
-- started by its first tool call that needs one; `holds` maps each issue the
-- session claimed to the lock epoch it claimed it at, so a hold lost since
-- (force-released, recovered, key revoked) is told, never mistaken for one
-- still held. last_seen_at is the session's last request: the instances keep
-- the run's lease while it is recent, and end the session (finishRun) once it
-- is older than BATON_MCP_SESSION_IDLE_SECONDS or its key is revoked.

CREATE TABLE "mcp_sessions" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "company_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "key_id" UUID NOT NULL,
    "instance_id" TEXT NOT NULL,
    "run_id" UUID,
    "holds" JSONB NOT NULL DEFAULT '{}',
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_seen_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "mcp_sessions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "mcp_sessions_company_id_fkey" FOREIGN KEY ("company_id") REFERENCES "companies"("id"),
    CONSTRAINT "mcp_sessions_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id"),
    CONSTRAINT "mcp_sessions_key_id_fkey" FOREIGN KEY ("key_id") REFERENCES "api_keys"("id"),
    CONSTRAINT "mcp_sessions_instance_id_length" CHECK (char_length("instance_id") BETWEEN 1 AND 100)
);

-- Sessions per key (the limit counts them) and the idle sweep's scan.
CREATE INDEX "mcp_sessions_key_id_idx" ON "mcp_sessions"("key_id");
CREATE INDEX "mcp_sessions_instance_id_idx" ON "mcp_sessions"("instance_id");
CREATE INDEX "mcp_sessions_last_seen_at_idx" ON "mcp_sessions"("last_seen_at");
