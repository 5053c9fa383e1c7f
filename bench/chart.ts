// A small dependency-free SVG line chart (log-2 x axis) for the README.
import type { ScenarioResult } from "./scenario.js";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

export function renderChart(chart: NonNullable<ScenarioResult["chart"]>): string {
  const W = 640,
    H = 360,
    L = 70,
    R = 20,
    T = 40,
    B = 50;
  const series = Object.entries(chart.series);
  const xs = [...new Set(series.flatMap(([, pts]) => pts.map(([x]) => x)))].sort((a, b) => a - b);
  const maxY = Math.max(...series.flatMap(([, pts]) => pts.map(([, y]) => y))) * 1.1 || 1;
  const lx = (x: number) => Math.log2(x);
  const [x0, x1] = [lx(xs[0]!), lx(xs.at(-1)!)];
  const px = (x: number) => L + ((lx(x) - x0) / (x1 - x0 || 1)) * (W - L - R);
  const py = (y: number) => T + (1 - y / maxY) * (H - T - B);
  const ticksY = Array.from({ length: 5 }, (_, i) => (maxY / 5) * (i + 1));
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<title>${chart.title}</title>`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${chart.title}</text>`,
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#333"/>`,
    `<line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#333"/>`,
    ...xs.map((x) => `<text x="${px(x)}" y="${H - B + 18}" text-anchor="middle">${x}</text>`),
    ...ticksY.map(
      (y) =>
        `<line x1="${L}" y1="${py(y)}" x2="${W - R}" y2="${py(y)}" stroke="#eee"/><text x="${L - 6}" y="${py(y) + 4}" text-anchor="end">${Math.round(y)}</text>`,
    ),
    `<text x="${W / 2}" y="${H - 12}" text-anchor="middle">${chart.xLabel}</text>`,
    `<text x="16" y="${H / 2}" text-anchor="middle" transform="rotate(-90 16 ${H / 2})">${chart.yLabel}</text>`,
    ...series.map(([name, pts], i) => {
      const color = COLORS[i % COLORS.length];
      const path = pts.map(([x, y], j) => `${j ? "L" : "M"}${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" ");
      const dots = pts.map(([x, y]) => `<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${color}"/>`).join("");
      const legend = `<rect x="${L + 10}" y="${T + 4 + i * 18}" width="12" height="3" fill="${color}"/><text x="${L + 28}" y="${T + 9 + i * 18}">${name}</text>`;
      return `<path d="${path}" fill="none" stroke="${color}" stroke-width="2"/>${dots}${legend}`;
    }),
    `</svg>`,
  ];
  return `${parts.join("\n")}\n`;
}
