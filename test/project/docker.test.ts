// No Docker engine runs here, so the image and compose file are checked
// against the repository instead: the compose file parses, builds this
// Dockerfile, and every file either of them names exists (or is built).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { parse } from "yaml";

const ROOT = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

interface Compose {
  services: Record<string, { build?: string; image?: string; command?: string[]; environment?: Record<string, string>; ports?: string[] }>;
}

it("docker-compose.yml parses, builds the Dockerfile, and runs the API and the recovery loop from that image", () => {
  const compose = parse(read("docker-compose.yml"), { merge: true }) as Compose;
  const { api, recovery } = compose.services;
  expect(api!.build).toBe(".");
  expect(existsSync(path.join(ROOT, "Dockerfile"))).toBe(true);
  expect(recovery!.image).toBe(api!.image);
  expect(recovery!.command).toEqual(["node", "dist/bin/recovery.js"]);
  expect(api!.environment!.BATON_ADMIN_TOKEN).toMatch(/^\$\{BATON_ADMIN_TOKEN:\?/);
});

it("every file the Dockerfile copies from the repository exists and is not excluded by .dockerignore; what it runs is built from src/bin", () => {
  const dockerfile = read("Dockerfile");
  const ignored = read(".dockerignore").split("\n").filter(Boolean);
  const copies = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
  expect(copies.length).toBeGreaterThan(5);
  for (const source of copies) {
    expect(existsSync(path.join(ROOT, source)), source).toBe(true);
    expect(
      ignored.some((pattern) => source === pattern || source.startsWith(`${pattern}/`)),
      `${source} is in .dockerignore`,
    ).toBe(false);
  }
  const commands = [...dockerfile.matchAll(/"node", "(dist\/bin\/\w+)\.js"/g)].map((m) => m[1]!);
  const compose = read("docker-compose.yml");
  commands.push(...[...compose.matchAll(/"node", "(dist\/bin\/\w+)\.js"/g)].map((m) => m[1]!));
  expect(commands).toContain("dist/bin/server");
  for (const command of commands) expect(existsSync(path.join(ROOT, `${command.replace(/^dist/, "src")}.ts`)), command).toBe(true);
  expect(JSON.parse(read("tsconfig.build.json").replace(/^\s*\/\/.*$/gm, "")).compilerOptions).toMatchObject({ outDir: "dist", rootDir: "src" });
  expect(dockerfile).toMatch(/^USER node$/m);
  // `npm ci` in the image runs the package's install-time scripts: every file they name is copied in first.
  const scripts = JSON.parse(read("package.json")).scripts as Record<string, string>;
  const named = ["preinstall", "install", "postinstall", "prepare", "postprepare"].flatMap((k) => scripts[k]?.match(/[\w./-]+\.(?:sh|ts|mjs|js)\b/g) ?? []);
  for (const file of named)
    expect(
      copies.some((c) => file === c || file.startsWith(`${c}/`)),
      `${file} (run by npm ci) is copied`,
    ).toBe(true);
});
