// Random work graphs for the graph race tests (races.test.ts): a seeded PRNG,
// so a failing run names the seed that replays its graph, and a layered DAG
// whose edges go only from a later layer to an earlier one, so it is acyclic
// by construction. Also the acyclicity check of a graph read back from
// issue_dependencies.
import type { IssuePriority } from "../generated/graphql.js";

/** mulberry32: a PRNG of 32 bits of state, numbers in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A whole number in [lo, hi]. */
export const between = (random: () => number, lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));

const PRIORITIES: readonly IssuePriority[] = ["CRITICAL", "HIGH", "MEDIUM", "LOW"];
export const somePriority = (random: () => number) => PRIORITIES[between(random, 0, 3)]!;

/** What a claimer does with an issue the first time it claims it: split it into sub-issues, the parent waiting on them or not. */
export interface Split {
  subIssues: number;
  parentWaits: boolean;
}

/** Issues are numbered 0 … layers × perLayer − 1, layer by layer. */
export interface DagPlan {
  layers: number[][];
  priority: IssuePriority[];
  /** Per issue, the issues it waits on from creation (createIssues' blockedBy): all in earlier layers. */
  blockedBy: number[][];
  /** Edges the board adds after creation (addDependency): [issue, blocker], blocker in an earlier layer, none repeating blockedBy. */
  boardEdges: [number, number][];
  /** The issues a claimer splits. */
  splits: Map<number, Split>;
}

export function planDag(random: () => number, o: { layers: number; perLayer: number; maxBlockers: number; boardEdges: number; splits: number }): DagPlan {
  const layers = Array.from({ length: o.layers }, (_, l) => Array.from({ length: o.perLayer }, (_, n) => l * o.perLayer + n));
  const total = o.layers * o.perLayer;
  const layerOf = (i: number) => Math.floor(i / o.perLayer);
  // A blocker from an earlier layer, the one just before most often, so the graph is deep as well as wide.
  const earlier = (i: number) => {
    const l = layerOf(i);
    const from = random() < 0.6 ? l - 1 : between(random, 0, l - 1);
    return layers[from]![between(random, 0, o.perLayer - 1)]!;
  };
  const blockedBy = Array.from({ length: total }, (_, i) => {
    if (layerOf(i) === 0) return [];
    return [...new Set(Array.from({ length: between(random, 0, o.maxBlockers) }, () => earlier(i)))];
  });
  const boardEdges: [number, number][] = [];
  const seen = new Set(blockedBy.flatMap((bs, i) => bs.map((b) => `${i}>${b}`)));
  while (boardEdges.length < o.boardEdges) {
    const i = between(random, o.perLayer, total - 1);
    const b = earlier(i);
    if (seen.has(`${i}>${b}`)) continue;
    seen.add(`${i}>${b}`);
    boardEdges.push([i, b]);
  }
  const splits = new Map<number, Split>();
  while (splits.size < o.splits) {
    splits.set(between(random, 0, total - 1), { subIssues: between(random, 1, 3), parentWaits: random() < 0.5 });
  }
  return { layers, priority: Array.from({ length: total }, () => somePriority(random)), blockedBy, boardEdges, splits };
}

/** A cycle among the edges (issue → blocker), as the issues along it, or null when the graph is acyclic. */
export function findCycle(edges: readonly { issue_id: string; blocked_by_id: string }[]): string[] | null {
  const next = new Map<string, string[]>();
  for (const e of edges) (next.get(e.issue_id) ?? next.set(e.issue_id, []).get(e.issue_id)!).push(e.blocked_by_id);
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (id: string): string[] | null => {
    if (state.get(id) === "done") return null;
    if (state.get(id) === "open") return [...path.slice(path.indexOf(id)), id];
    state.set(id, "open");
    path.push(id);
    for (const b of next.get(id) ?? []) {
      const found = visit(b);
      if (found) return found;
    }
    path.pop();
    state.set(id, "done");
    return null;
  };
  for (const id of next.keys()) {
    const found = visit(id);
    if (found) return found;
  }
  return null;
}
