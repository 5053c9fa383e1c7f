// `npm run bench` (-- --quick for about a minute; -- --only claims,scale to
// pick scenarios; the 10-minute soak runs only as -- --only soak). Runs each scenario against PostgreSQL on this machine,
// prints a Markdown table per scenario, and writes bench/results/latest.json,
// bench/results/latest.md and bench/results/claims.svg (linked from README);
// a --quick run writes bench/results/quick.* instead (not committed).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { defaultOptions } from "./lib.js";
import type { BenchOptions, ScenarioResult } from "./scenario.js";
import { renderChart } from "./chart.js";

const SCENARIOS: Record<string, () => Promise<{ run(o: BenchOptions): Promise<ScenarioResult> }>> = {
  claims: () => import("./claims.js"),
  keys: () => import("./keys.js"),
  graph: () => import("./graph.js"),
  peers: () => import("./peers.js"),
  fanout: () => import("./fanout.js"),
  recovery: () => import("./recovery.js"),
  scale: () => import("./scale.js"),
  ledger: () => import("./ledger.js"),
  hostile: () => import("./hostile.js"),
  board: () => import("./board.js"),
  soak: () => import("./soak.js"),
  retention: () => import("./retention.js"),
};
/** Scenarios that run only when named (--only soak): the soak takes 10 minutes on its own, retention fills a 10-million-row ledger first. */
const ON_REQUEST = new Set(["soak", "retention"]);

const { values } = parseArgs({ options: { quick: { type: "boolean", default: false }, only: { type: "string" } } });
const options = defaultOptions(values.quick ?? false);
const names = values.only ? values.only.split(",") : Object.keys(SCENARIOS).filter((n) => !ON_REQUEST.has(n));
for (const name of names) if (!SCENARIOS[name]) throw new Error(`unknown scenario ${name}; have ${Object.keys(SCENARIOS).join(", ")}`);

function table(result: ScenarioResult): string {
  const head = `| ${result.columns.join(" | ")} |\n| ${result.columns.map(() => "---").join(" | ")} |`;
  const body = result.rows.map((row) => `| ${result.columns.map((c) => String(row[c] ?? "")).join(" | ")} |`).join("\n");
  const notes = result.notes.map((n) => `- ${n}`).join("\n");
  return `### ${result.name}\n\n${head}\n${body}\n\n${notes}\n`;
}

const started = new Date();
const results: ScenarioResult[] = [];
const failures: string[] = [];
for (const name of names) {
  const t = performance.now();
  process.stderr.write(`bench: ${name}…\n`);
  try {
    const result = await (await SCENARIOS[name]!()).run(options);
    results.push(result);
    console.log(`\n${table(result)}`);
  } catch (err) {
    failures.push(`${name}: ${(err as Error).message}`);
    console.log(`\n### ${name}\n\nfailed: ${(err as Error).message}\n`);
  }
  process.stderr.write(`bench: ${name} took ${((performance.now() - t) / 1000).toFixed(0)}s\n`);
}

mkdirSync("bench/results", { recursive: true });
const header = `Measured ${started.toISOString()} on this machine (${options.quick ? "quick" : "full"} run): PostgreSQL and the API on the same 2 cores, loopback.\n`;
const prefix = options.quick ? "bench/results/quick" : "bench/results/latest";
// With --only, the other scenarios' last results are kept (each says when it ran).
const stamp = started.toISOString();
let merged: (ScenarioResult & { at?: string })[] = results.map((r) => ({ ...r, at: stamp }));
if (values.only && existsSync(`${prefix}.json`)) {
  const previous = JSON.parse(readFileSync(`${prefix}.json`, "utf8")) as { at: string; results: (ScenarioResult & { at?: string })[] };
  const fresh = new Map(merged.map((r) => [r.name, r]));
  merged = [
    ...previous.results.map((r) => fresh.get(r.name) ?? { ...r, at: r.at ?? previous.at }),
    ...merged.filter((r) => !previous.results.some((p) => p.name === r.name)),
  ];
}
writeFileSync(`${prefix}.json`, `${JSON.stringify({ at: stamp, quick: options.quick, results: merged, failures }, null, 2)}\n`);
writeFileSync(
  `${prefix}.md`,
  `# Baton benchmarks\n\n${header}\n${merged.map((r) => table(r) + (r.at && r.at !== stamp ? `\n(measured ${r.at})\n` : "")).join("\n")}`,
);
const claims = results.find((r) => r.chart);
const chartFile = options.quick ? "bench/results/quick-claims.svg" : "bench/results/claims.svg";
if (claims?.chart) writeFileSync(chartFile, renderChart(claims.chart));
console.log(`\nwrote ${prefix}.{json,md}${claims?.chart ? ` and ${chartFile}` : ""}`);
if (failures.length) {
  console.log(`failed scenarios:\n${failures.map((f) => `- ${f}`).join("\n")}`);
  process.exit(1);
}
