// The board's scheduler tick (the runHeartbeat mutation; its answer is the
// GraphQL type HeartbeatTick). Not a run's heartbeat (heartbeatRun in runs.ts
// renews one run's lease). For each agent with claimable work assigned to it:
// start a run, claim its next issue with the very same statement an agent
// would use, and finish the run SUCCEEDED if it got nothing (another tick, or
// the agent itself, may have been faster).
import { queryAll, raw, sql, statement } from "../../db/sql.js";
import { claimIssue } from "../claim/claimIssue.js";
import type { LockDeps } from "../shared/deps.js";
import { claimableBy } from "../shared/fragments.js";
import { finishRun, startRun } from "./runs.js";
import type { IssueClaimed } from "../shared/types.js";
import type { Run } from "../../domain/types.js";
import { AgentDisabledError } from "../../domain/errors.js";

/** What one tick did: the runs it started, and the claims they made. */
export interface SchedulerTick {
  runs: Run[];
  claims: IssueClaimed[];
}

/** The enabled agents with claimable work of their own (not the pool's), one probe of issues_claimable_idx per agent. */
const agentsWithWork = (companyId: string) =>
  statement(
    "AGENTS_WITH_CLAIMABLE_WORK",
    sql`
  SELECT a.id AS "agentId", a.name_key AS "agentNameKey" FROM agents a
   WHERE a.company_id = ${companyId}::uuid AND a.disabled_at IS NULL
     AND EXISTS (SELECT 1 FROM issues i
                  WHERE i.company_id = a.company_id AND ${claimableBy("i", raw("a.id"))})
   ORDER BY a.created_at, a.id`,
  );

export async function tickScheduler(deps: LockDeps, companyId: string): Promise<SchedulerTick> {
  const agents = await queryAll<{ agentId: string; agentNameKey: string }>(deps.db, agentsWithWork(companyId));
  const started: Run[] = [];
  const results = await Promise.allSettled(
    agents.map(async ({ agentId, agentNameKey }) => {
      const actor = { companyId, agentId, agentNameKey };
      let run: Run;
      try {
        run = await startRun(deps, actor);
      } catch (err) {
        // disabled since agentsWithWork read it: no run for it, the others go on
        if (err instanceof AgentDisabledError) return null;
        throw err;
      }
      started.push(run);
      const claimed = await claimIssue(deps, actor, { runId: run.id });
      if (claimed.__typename === "IssueClaimed") return { run: claimed.run, claim: claimed };
      const finished = await finishRun(deps, actor, run.id, "SUCCEEDED");
      return { run: finished.__typename === "RunUpdated" ? finished.run : run, claim: null };
    }),
  );
  const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failure) {
    // Nobody will hear of these runs: end them now (releasing anything they
    // claimed, at no attempt's cost) rather than leave it to their leases.
    await Promise.allSettled(started.map((run) => finishRun(deps, { companyId, agentId: run.agentId, agentNameKey: "" }, run.id, "CANCELLED")));
    throw failure.reason;
  }
  const ok = results.flatMap((r) => (r as PromiseFulfilledResult<{ run: Run; claim: IssueClaimed | null } | null>).value ?? []);
  return { runs: ok.map((r) => r.run), claims: ok.flatMap((r) => (r.claim ? [r.claim] : [])) };
}
