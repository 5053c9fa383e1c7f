// The ledger's price: direct claims/s at 16 clients for the claim statement
//  - as shipped (event row, seq from the transaction id: no lock),
//  - with the design it replaced (issue 13): the seq taken from a per-company
//    counter row whose lock is held until commit (gapless; serialises a
//    company's commits),
//  - with no event row at all.
// So the cost of a resumable, in-order stream is known, not guessed.
import { claimNextSkipLockedStatement } from "../src/locks/claim/claimNextSkipLocked.js";
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
    await f.db.query(`CREATE TABLE IF NOT EXISTS bench_counter (company_id uuid PRIMARY KEY, last bigint NOT NULL)`);
    await f.db.query(`INSERT INTO bench_counter VALUES ($1, 0) ON CONFLICT (company_id) DO UPDATE SET last = 0`, [f.companyId]);
    const SEQ = /baton_event_seq\(c\.last_event_xid, (row_number\(\) OVER \([^)]*\)) - 1\)/;
    const variants: [string, (text: string) => string][] = [
      ["event, seq from the transaction id (shipped)", (t) => t],
      [
        "event, gapless per-company counter held until commit (before)",
        (t) =>
          t
            .replace(
              /appended AS \(/,
              `stream AS (UPDATE bench_counter co SET last = co.last + n.changes
                 FROM (SELECT company_id, count(*) AS changes FROM changes GROUP BY company_id) n WHERE co.company_id = n.company_id
               RETURNING co.company_id AS id, co.last - n.changes AS base),
               appended AS (`,
            )
            .replace(SEQ, "(SELECT s.base FROM stream s WHERE s.id = c.company_id) + $1"),
      ],
      ["no event", (t) => t.replace(/(appended AS \(\s*INSERT INTO lock_events[\s\S]*?FROM \w+ c)/, "$1 WHERE false")],
    ];
    for (const [name, rewrite] of variants.slice(1)) {
      const probe = claimNextSkipLockedStatement(
        "00000000-0000-4000-8000-000000000000",
        { companyId: f.companyId, agentId: f.workers[0]!.agentId, agentNameKey: "x" },
        true,
      ).text;
      if (rewrite(probe) === probe) throw new Error(`bench/ledger.ts: the "${name}" rewrite no longer matches the claim statement`);
    }
    let shipped = 0;
    for (const [name, rewrite] of variants) {
      await f.refill(backlog);
      const r = await load(clients, seconds, async (i) => {
        const w = f.workers[i]!;
        const s = claimNextSkipLockedStatement(w.runId, { companyId: f.companyId, agentId: w.agentId, agentNameKey: w.nameKey }, true);
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
      'The counter variant is the ledger as it was before issue 13: its row lock, held until commit, serialises the commits of one company. The shipped seq takes no lock (docs/events.md, "How seq is made").',
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { defaultOptions } = await import("./lib.js");
  console.log(JSON.stringify(await run(defaultOptions(process.argv.includes("--quick"))), null, 2));
}
