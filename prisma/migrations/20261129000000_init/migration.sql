-- Baton's initial schema. Kept in step with prisma/schema.prisma by hand
-- (Prisma's migrate engine is not available everywhere Baton is built); a test
-- checks that every model and column of schema.prisma exists after migrating.

CREATE TYPE "issue_status" AS ENUM ('BACKLOG', 'OPEN', 'CLAIMED', 'IN_PROGRESS', 'BLOCKED', 'DONE', 'CANCELLED', 'ESCALATED');
-- Declaration order is claim order: PostgreSQL sorts enum values by it.
CREATE TYPE "issue_priority" AS ENUM ('CRITICAL', 'HIGH', 'MEDIUM', 'LOW');
CREATE TYPE "run_status" AS ENUM ('RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT');
CREATE TYPE "lock_event_kind" AS ENUM ('CLAIMED', 'ADOPTED', 'EXECUTION_ACQUIRED', 'RELEASED', 'RECOVERED', 'ESCALATED', 'FORCE_RELEASED', 'STATUS_CHANGED');
CREATE TYPE "key_role" AS ENUM ('BOARD', 'AGENT');

CREATE TABLE "companies" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "name" TEXT NOT NULL,
    "last_event_seq" BIGINT NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    CONSTRAINT "companies_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "companies_name_length" CHECK (char_length("name") BETWEEN 1 AND 200)
);

CREATE TABLE "agents" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "company_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "name_key" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    CONSTRAINT "agents_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "agents_name_length" CHECK (char_length("name") BETWEEN 1 AND 200)
);
CREATE UNIQUE INDEX "agents_company_id_name_key_key" ON "agents"("company_id", "name_key");

CREATE TABLE "api_keys" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "company_id" UUID NOT NULL,
    "agent_id" UUID,
    "role" "key_role" NOT NULL,
    "key_hash" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id"),
    -- An agent key belongs to exactly one agent; a board key to none.
    CONSTRAINT "api_keys_role_agent" CHECK (("role" = 'AGENT') = ("agent_id" IS NOT NULL))
);
CREATE UNIQUE INDEX "api_keys_key_hash_key" ON "api_keys"("key_hash");

CREATE TABLE "issues" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "company_id" UUID NOT NULL,
    "title" TEXT NOT NULL,
    "description" TEXT,
    "status" "issue_status" NOT NULL DEFAULT 'OPEN',
    "priority" "issue_priority" NOT NULL DEFAULT 'MEDIUM',
    "assignee_agent_id" UUID,
    "checkout_run_id" UUID,
    "execution_run_id" UUID,
    "execution_agent_name_key" TEXT,
    "execution_locked_at" TIMESTAMPTZ(6),
    "claimed_at" TIMESTAMPTZ(6),
    "attempt_count" INTEGER NOT NULL DEFAULT 0,
    "max_attempts" INTEGER NOT NULL DEFAULT 3,
    "lock_epoch" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    "updated_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    CONSTRAINT "issues_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "issues_title_length" CHECK (char_length("title") BETWEEN 1 AND 500),
    CONSTRAINT "issues_max_attempts_range" CHECK ("max_attempts" BETWEEN 1 AND 100),
    CONSTRAINT "issues_attempt_count_nonnegative" CHECK ("attempt_count" >= 0),
    CONSTRAINT "issues_lock_epoch_nonnegative" CHECK ("lock_epoch" >= 0),
    -- The lock pair (SEMANTICS, Issue life cycle): CLAIMED holds only the
    -- checkout; IN_PROGRESS holds both, for the same run; nothing else holds
    -- either. No statement, however buggy, can leave a half-released pair.
    CONSTRAINT "issues_lock_pair" CHECK (
        CASE "status"
            WHEN 'CLAIMED' THEN "checkout_run_id" IS NOT NULL AND "execution_run_id" IS NULL
            WHEN 'IN_PROGRESS' THEN "checkout_run_id" IS NOT NULL AND "execution_run_id" = "checkout_run_id"
            ELSE "checkout_run_id" IS NULL AND "execution_run_id" IS NULL
        END
    ),
    -- The execution details exist exactly while the execution lock does.
    CONSTRAINT "issues_execution_details" CHECK (
        ("execution_run_id" IS NULL) = ("execution_agent_name_key" IS NULL)
        AND ("execution_run_id" IS NULL) = ("execution_locked_at" IS NULL)
    ),
    CONSTRAINT "issues_claimed_at" CHECK ("checkout_run_id" IS NULL OR "claimed_at" IS NOT NULL)
);
-- Held issues by holder: finishRun's release and the recovery sweep. (The
-- execution lock always names the checkout's run, so it needs no index.)
CREATE INDEX "issues_checkout_run_id_idx" ON "issues"("checkout_run_id") WHERE "checkout_run_id" IS NOT NULL;
-- issues(companyId, ...) lists in (created_at, id) order.
CREATE INDEX "issues_company_id_created_at_id_idx" ON "issues"("company_id", "created_at", "id");
-- The claim index: exactly the claim's WHERE and ORDER BY (assignee, then
-- priority rank, created_at, id), over claimable rows only, so the next issue
-- is the first entry of an index scan however many DONE rows the table holds.
CREATE INDEX "issues_claimable_idx" ON "issues"("company_id", "assignee_agent_id", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts";
-- The same without the assignee, for claims that also take unassigned work:
-- an ordered scan that skips other agents' rows.
CREATE INDEX "issues_pool_idx" ON "issues"("company_id", "priority", "created_at", "id")
    WHERE "status" = 'OPEN' AND "attempt_count" < "max_attempts";
-- The recovery sweep's third step: OPEN issues without an attempt left (rare).
CREATE INDEX "issues_exhausted_idx" ON "issues"("id")
    WHERE "status" = 'OPEN' AND "attempt_count" >= "max_attempts";

CREATE TABLE "heartbeat_runs" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "company_id" UUID NOT NULL,
    "agent_id" UUID NOT NULL,
    "status" "run_status" NOT NULL DEFAULT 'RUNNING',
    "started_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    "last_heartbeat_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    "lease_expires_at" TIMESTAMPTZ(6) NOT NULL,
    "finished_at" TIMESTAMPTZ(6),
    CONSTRAINT "heartbeat_runs_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "heartbeat_runs_finished" CHECK (("status" = 'RUNNING') = ("finished_at" IS NULL))
);
CREATE INDEX "heartbeat_runs_company_id_started_at_idx" ON "heartbeat_runs"("company_id", "started_at");
-- The recovery loop's first step scans only running runs by lease.
CREATE INDEX "heartbeat_runs_running_lease_idx" ON "heartbeat_runs"("lease_expires_at") WHERE "status" = 'RUNNING';

CREATE TABLE "lock_events" (
    "company_id" UUID NOT NULL,
    "seq" BIGINT NOT NULL,
    "issue_id" UUID NOT NULL,
    "kind" "lock_event_kind" NOT NULL,
    "status" "issue_status" NOT NULL,
    "run_id" UUID,
    "agent_id" UUID,
    "checkout_run_id" UUID,
    "execution_run_id" UUID,
    "reason" TEXT,
    "at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    CONSTRAINT "lock_events_pkey" PRIMARY KEY ("company_id", "seq")
);
CREATE INDEX "lock_events_company_id_issue_id_seq_idx" ON "lock_events"("company_id", "issue_id", "seq");

ALTER TABLE "agents" ADD CONSTRAINT "agents_company_id_fkey" FOREIGN KEY ("company_id") REFERENCES "companies"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_company_id_fkey" FOREIGN KEY ("company_id") REFERENCES "companies"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE SET NULL ON UPDATE CASCADE;
ALTER TABLE "issues" ADD CONSTRAINT "issues_company_id_fkey" FOREIGN KEY ("company_id") REFERENCES "companies"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "issues" ADD CONSTRAINT "issues_assignee_agent_id_fkey" FOREIGN KEY ("assignee_agent_id") REFERENCES "agents"("id") ON DELETE SET NULL ON UPDATE CASCADE;
ALTER TABLE "heartbeat_runs" ADD CONSTRAINT "heartbeat_runs_company_id_fkey" FOREIGN KEY ("company_id") REFERENCES "companies"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "heartbeat_runs" ADD CONSTRAINT "heartbeat_runs_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
-- lock_events has no foreign keys, on purpose: its rows are written only by
-- the lock statements, in the same statement as the change to the (locked)
-- issue row, and the append runs while the company's seq lock is held, so
-- every foreign-key check there would lengthen the serialized section that
-- bounds a company's event throughput (docs/events.md). Ids are checked by
-- the statements that write them.

-- "Dead" has one definition, on the database clock, shared by claimIssue's
-- adoption, the recovery sweep and lockAudit: a run is live only while it is
-- RUNNING and its lease lies in the future. A missing run (NULL) is dead.
CREATE FUNCTION "baton_run_is_live"("status" "run_status", "lease_expires_at" TIMESTAMPTZ)
    RETURNS BOOLEAN LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT coalesce("status" = 'RUNNING' AND "lease_expires_at" > now(), false) $$;
