// The ledger's price: direct claims/s at 16 clients for the claim statement
//  - as shipped (event row + per-company gapless seq, held until commit),
//  - with the event row but an unordered seq from a plain sequence (the
//    bigserial scheme docs/events.md rules out: numbers become visible out of order),
//  - with no event row at all.
// So the cost of a gap-free, in-order stream is known, not guessed.
import { claimNextStatement } from "../src/locks/claimIssues.js";
import { fixture } from "./fixture.js";
import { load } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";

export async function run(options: BenchOptions): Promise<ScenarioResult> {
  const clients = 16;
  const seconds = options.quick ? 2 : 10;
  const backlog = options.quick ? 20_000 : 200_000;
  const f = await fixture("baton_bench_ledger", clients, 4713);
  const rows: ScenarioResult["rows"] = [];
  try {
    await f.db.query(`CREATE SEQUENCE IF NOT EXISTS bench_unordered_seq`);
    const variants: [string, (text: string) => string][] = [
      ["event + gapless per-company seq (shipped)", (t) => t],
      [
        "event + plain sequence (not gap-free)",
        (t) => t.replace(/stream AS \(.*?\),\s*appended AS/s, "stream AS (SELECT DISTINCT company_id AS id, nextval('bench_unordered_seq') - 1 AS base FROM changed), appended AS"),
      ],
      [
        "no event",
        (t) =>
          t
            .replace(/,\s*stream AS \(.*?\)\s*SELECT \(SELECT json_build_object\('id', run\.id/s, " SELECT (SELECT json_build_object('id', run.id")
            .replace("(SELECT list FROM events) AS events", "'[]'::json AS events"),
      ],
    ];
    let shipped = 0;
    for (const [name, rewrite] of variants) {
      await f.refill(backlog);
      const r = await load(clients, seconds, async (i) => {
        const w = f.workers[i]!;
        const s = claimNextStatement(w.runId, { companyId: f.companyId, agentId: w.agentId, agentNameKey: w.nameKey }, true);
        const { rows: res } = await f.db.query({ name: `claim_${name.length}`, text: rewrite(s.text), values: s.values });
        return (res[0]?.issues?.length ?? 0) > 0;
      });
      if (!shipped) shipped = r.perSecond;
      rows.push({
        variant: name,
        "claims/s": Math.round(r.perSecond),
        "p50 ms": r.p50.toFixed(1),
        "p99 ms": r.p99.toFixed(1),
        "vs shipped": `${(r.perSecond / shipped).toFixed(2)}×`,
      });
    }
  } finally {
    await f.close();
  }
  return {
    name: "the ledger's price",
    columns: ["variant", "claims/s", "p50 ms", "p99 ms", "vs shipped"],
    rows,
    notes: [
      `${clients} clients, direct statements with node-postgres, ${seconds}s each, ${backlog} open issues.`,
      "The gapless seq serialises the commits of one company (its counter row is locked until commit), so a company's event rate is bounded by commit latency; claimIssues amortises it (one seq lock per batch).",
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { defaultOptions } = await import("./lib.js");
  console.log(JSON.stringify(await run(defaultOptions(process.argv.includes("--quick"))), null, 2));
}
