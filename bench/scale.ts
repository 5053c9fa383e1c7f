// Claim latency as the table grows: 10k, 100k and 1M issues, almost all of
// them DONE. The claim index covers claimable rows only, so p50 should stay
// flat (target: within ±20% from 10k to 1M).
import { claimNextSkipLockedStatement } from "../src/locks/claim/claimNextSkipLocked.js";
import { fixture } from "./fixture.js";
import { load } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const sizes = options.quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000];
  const agents = 4;
  const seconds = options.quick ? 2 : 8;
  const f = await fixture("baton_bench_scale", agents, 4712);
  const rows: ScenarioResult["rows"] = [];
  const points: [number, number][] = [];
  try {
    for (const size of sizes) {
      const open = Math.min(20_000, size / 10);
      await f.refill(open, size - open);
      const r = await load(agents, seconds, async (i) => {
        const w = f.workers[i]!;
        const s = claimNextSkipLockedStatement(w.runId, { companyId: f.companyId, agentId: w.agentId, agentNameKey: w.nameKey }, true);
        const { rows: res } = await f.db.query({ name: "claim_next", text: s.text, values: s.values });
        return (res[0]?.issues?.length ?? 0) > 0;
      });
      rows.push({ issues: size, open, "claims/s": Math.round(r.perSecond), "p50 ms": r.p50.toFixed(2), "p99 ms": r.p99.toFixed(2) });
      points.push([size, r.p50]);
    }
  } finally {
    await f.close();
  }
  const p50s = points.map(([, p]) => p);
  const spread = (Math.max(...p50s) - Math.min(...p50s)) / Math.min(...p50s);
  return {
    name: "scale",
    columns: ["issues", "open", "claims/s", "p50 ms", "p99 ms"],
    rows,
    notes: [
      `target: claim p50 within ±20% from ${sizes[0]} to ${sizes.at(-1)} issues — spread ${(spread * 100).toFixed(0)}%: ${spread <= 0.2 ? "met" : "not met"}`,
      `${agents} agents claiming directly with node-postgres, ${seconds}s per size; all but the open issues are DONE.`,
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { defaultOptions } = await import("./lib.js");
  console.log(JSON.stringify(await run(defaultOptions(process.argv.includes("--quick"))), null, 2));
}
