// A clean install on the Node the README names prints no EBADENGINE warning.
// npm prints one for every installed package whose `engines` range does not
// admit the running Node or npm; the lockfile records each package's range,
// so checking them all against the oldest Node and npm we support is the
// same test without a 30-second install.
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import semver from "semver";
import { expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
const lock = JSON.parse(readFileSync(path.join(root, "package-lock.json"), "utf8"));
const README = readFileSync(path.join(root, "README.md"), "utf8");

/** The oldest Node that package.json admits: what a newcomer may have. */
const oldestNode = semver.minVersion(pkg.engines.node)!.version;

it("names the same Node in the README as in package.json", () => {
  const [, major, minor] = README.match(/You need Node (\d+) \(≥ (\d+\.\d+)\)/) ?? [];
  expect(`${major}.x`, "README's Node").toBe(`${semver.major(oldestNode)}.x`);
  expect(`${minor}.0`).toBe(oldestNode);
});

it("installs only packages that support that Node and the npm it ships with", () => {
  const refused: string[] = [];
  for (const [where, entry] of Object.entries<{ version?: string; engines?: Record<string, string> }>(lock.packages)) {
    if (!where) continue;
    const engines = entry.engines ?? {};
    const name = where.replace(/^.*node_modules\//, "");
    if (engines.node && !semver.satisfies(oldestNode, engines.node)) refused.push(`${name}@${entry.version} wants node ${engines.node}`);
    if (engines.npm && !semver.satisfies("10.8.2", engines.npm)) refused.push(`${name}@${entry.version} wants npm ${engines.npm}`);
  }
  expect(refused).toEqual([]);
});

it("records why each override exists", () => {
  // An override silently pins a dependency of a dependency; one nobody can
  // explain is one nobody dares remove. docs/development.md says why.
  const docs = readFileSync(path.join(root, "docs/development.md"), "utf8");
  for (const name of Object.keys(pkg.overrides ?? {})) expect(docs, name).toContain(`\`${name}\``);
});

it("builds the CLI as an executable file, which npx baton runs directly", () => {
  // npm's `npx baton` in the checkout execs package.json's bin as it is: without
  // its execute bits it answers "baton: Permission denied" (tsc writes 0644)
  const bin = path.join(root, (pkg as { bin: Record<string, string> }).bin.baton!);
  expect(readFileSync(bin, "utf8").startsWith("#!/usr/bin/env node\n")).toBe(true);
  expect(statSync(bin).mode & 0o111).toBe(0o111);
});
