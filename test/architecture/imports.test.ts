// The shape of src/, read from its own import lines: no file imports itself
// back through others, no two top-level rooms import each other, and at most
// 10 exported values that no other file imports (entry points aside).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === "generated" || e.name === "node_modules" ? [] : tsFiles(rel);
    return e.name.endsWith(".ts") ? [rel] : [];
  });
}

interface Imported {
  file: string;
  names: string[] | "*";
}

/** Each relative import of a file: the file it names and the names it takes (`import type` included). */
function importsOf(file: string, text: string): Imported[] {
  const found: Imported[] = [];
  const specifiers =
    /(?:import|export)\s+(type\s+)?(\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+(?:\s*,\s*\{[^}]*\})?)\s+from\s+["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)|^import\s+["'](\.{1,2}\/[^"']+)["']/gm;
  for (const m of text.matchAll(specifiers)) {
    const spec = m[3] ?? m[4] ?? m[5]!;
    const target = path.normalize(path.join(path.dirname(file), spec)).replace(/\.js$/, ".ts");
    const clause = m[2];
    const names = clause?.includes("{")
      ? clause
          .slice(clause.indexOf("{") + 1, clause.indexOf("}"))
          .split(",")
          .map(
            (n) =>
              n
                .trim()
                .replace(/^type\s+/, "")
                .split(/\s+as\s+/)[0]!,
          )
          .filter(Boolean)
      : ("*" as const);
    found.push({ file: target, names: m[5] ? [] : names });
  }
  return found;
}

const sources = tsFiles("src");
const everyFile = [...sources, ...tsFiles("test"), ...tsFiles("bench")];
const texts = new Map(everyFile.map((f) => [f, readFileSync(path.join(ROOT, f), "utf8")]));
const imports = new Map(everyFile.map((f) => [f, importsOf(f, texts.get(f)!)]));
const room = (file: string) => file.split(path.sep)[1]!.replace(/\.ts$/, "");

describe("src/ imports", () => {
  it("form no cycle among files", () => {
    const edges = new Map(
      sources.map((f) => [
        f,
        imports
          .get(f)!
          .map((i) => i.file)
          .filter((t) => texts.has(t) && t.startsWith("src")),
      ]),
    );
    const cycles: string[][] = [];
    const state = new Map<string, "open" | "done">();
    const stack: string[] = [];
    const visit = (f: string) => {
      state.set(f, "open");
      stack.push(f);
      for (const next of edges.get(f) ?? []) {
        if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
        else if (!state.has(next)) visit(next);
      }
      stack.pop();
      state.set(f, "done");
    };
    for (const f of sources) if (!state.has(f)) visit(f);
    expect([...new Set(cycles.map((c) => c.join(" → ")))]).toEqual([]);
  });

  it("never run both ways between two top-level rooms", () => {
    const arrows = new Set<string>();
    for (const f of sources)
      for (const i of imports.get(f)!) if (i.file.startsWith("src") && room(f) !== room(i.file)) arrows.add(`${room(f)} → ${room(i.file)}`);
    const both = [...arrows].filter((a) => {
      const [from, to] = a.split(" → ");
      return from! < to! && arrows.has(`${to} → ${from}`);
    });
    expect(both).toEqual([]);
  });

  // Entry points loaded by path rather than imported: the package's exports, bins and the board's bundle.
  const ENTRY_POINTS = new Set([path.join("src", "client", "index.ts"), path.join("src", "board", "main.ts")]);
  const isEntry = (f: string) => ENTRY_POINTS.has(f) || f.startsWith(`src${path.sep}bin${path.sep}`) || f === path.join("src", "cli", "main.ts");

  it("export at most 10 values that no other file imports", () => {
    const unused: string[] = [];
    for (const f of sources) {
      if (isEntry(f)) continue;
      for (const m of texts.get(f)!.matchAll(/^export (?:async )?(?:function\*?|const|let|class) (\w+)/gm)) {
        const name = m[1]!;
        const used = everyFile.some((g) => g !== f && imports.get(g)!.some((i) => i.file === f && (i.names === "*" || i.names.includes(name))));
        if (!used) unused.push(`${f}: ${name}`);
      }
    }
    expect(unused.length, unused.join("\n")).toBeLessThanOrEqual(10);
  });
});
