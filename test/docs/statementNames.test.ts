// Statement names: each written once in code, where its SQL is, and the docs
// speak of the same statements. In src/ a name is the first argument of
// statement("NAME", …), or, for the few statements run on a bare node-postgres
// client, a string that starts with `/* NAME */`. In docs/invariants.md and
// docs/lifecycle.md a statement name is an upper-case word with an underscore
// written bare (CLAIM_NEXT_FOR_EACH); constants, enum values and error codes
// go in backticks (`TIMED_OUT`, `CLEAR_LOCKS`) and are not statement names,
// nor is anything in a fenced block or in double quotes (a cited test title).
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const DOCS = ["docs/invariants.md", "docs/lifecycle.md"];
/** Generated code and the executable model run no SQL. */
const SKIPPED = ["src/generated", "src/model", "src/board"];

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return SKIPPED.includes(path) ? [] : sourceFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/** Every statement name bound in src/, with the file that binds it (once per binding). */
function namesInCode(): { name: string; file: string }[] {
  return sourceFiles("src").flatMap((file) => {
    const text = readFileSync(join(ROOT, file), "utf8");
    const bound = [...text.matchAll(/\bstatement\(\s*"([^"]*)"/g), ...text.matchAll(/[`"']\/\* ([A-Z][A-Z0-9_]*) \*\//g)];
    return bound.map((m) => ({ name: m[1]!, file }));
  });
}

/** The statement names a doc gives: bare upper-case words with an underscore, outside code spans, fenced blocks and quotes. */
function namesInDoc(file: string): string[] {
  const prose = readFileSync(join(ROOT, file), "utf8")
    .replace(/^```[\s\S]*?^```/gm, "")
    .replace(/`[^`\n]*`/g, "")
    .replace(/"[^"\n]*"/g, "");
  return [...prose.matchAll(/(?<![\w/.-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![\w-])/g)].map((m) => m[0]);
}

describe("statement names", () => {
  const code = namesInCode();
  const inCode = new Set(code.map((c) => c.name));
  const inDocs = new Set(DOCS.flatMap(namesInDoc));

  it("are upper-case words joined by _ (what src/db/client.ts and src/tracing/spans.ts read back)", () => {
    expect(code.length).toBeGreaterThan(40);
    expect(code.filter((c) => !/^[A-Z][A-Z_]*$/.test(c.name))).toEqual([]);
  });

  it("are each bound once in the code", () => {
    const seen = new Map<string, string[]>();
    for (const { name, file } of code) seen.set(name, [...(seen.get(name) ?? []), file]);
    expect([...seen].filter(([, files]) => files.length > 1)).toEqual([]);
  });

  it("given in docs/invariants.md and docs/lifecycle.md all exist in the code (constants and codes go in backticks)", () => {
    expect([...inDocs].filter((name) => !inCode.has(name)).sort()).toEqual([]);
  });

  it("of every lock statement in src/locks/ appear in docs/invariants.md or docs/lifecycle.md", () => {
    const locks = code.filter((c) => c.file.startsWith("src/locks/"));
    expect(locks.length).toBeGreaterThan(15);
    expect(locks.filter((c) => !inDocs.has(c.name)).map((c) => `${c.name} (${relative("src/locks", c.file)})`)).toEqual([]);
  });
});
