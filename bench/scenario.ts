// The shape every benchmark scenario returns, so bench/run.ts can print one
// Markdown table per scenario, write bench/results/latest.json and draw the chart.
export interface BenchOptions {
  /** About a minute for the whole suite instead of several. */
  quick: boolean;
  /** A PostgreSQL URL of a user who may create databases (each scenario makes its own). */
  adminUrl: string;
  /** Redis for scenarios that need pub/sub across instances. */
  redisUrl: string;
}

export interface ScenarioResult {
  /** e.g. "claim throughput" */
  name: string;
  /** Column order for the table. */
  columns: string[];
  rows: Record<string, string | number>[];
  /** What was compared, what the target was, whether it was met. */
  notes: string[];
  /** Optional series for the chart: label → [x, y] points. */
  chart?: { title: string; xLabel: string; yLabel: string; series: Record<string, [number, number][]> };
}
