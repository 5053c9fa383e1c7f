// GET / and GET /favicon.ico over HTTP: a landing page that links GraphiQL,
// the board and the docs, with the security headers every page gets and no
// script; an SVG icon that every page links.
import { afterAll, beforeAll, expect, it } from "vitest";
import { startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";

let h: Harness;
let origin: string;

beforeAll(async () => {
  h = await startHarness();
  origin = new URL(h.url).origin;
});
afterAll(() => h?.close());

const asBrowser = { accept: "text/html,application/xhtml+xml,*/*;q=0.8" };

it("GET / is a landing page linking GraphiQL, the board and the docs, with the pages' security headers and no script", async () => {
  const res = await fetch(`${origin}/`, { headers: asBrowser });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
  const html = await res.text();
  expect(html).toContain(`<a href="/graphql">GraphiQL</a>`);
  expect(html).toContain(`<a href="/board">The live board</a>`);
  expect(html).toContain("docs/lifecycle.md");
  expect(html).toContain(`<link rel="icon" href="/favicon.ico"`);
  expect(html).not.toContain("<script");
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  expect(res.headers.get("x-frame-options")).toBe("DENY");
  expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  expect(res.headers.get("cache-control")).toBe("no-store");
  const policy = res.headers.get("content-security-policy") ?? "";
  expect(policy).toContain("default-src 'none'");
  expect(policy).toContain("frame-ancestors 'none'");
  expect(policy).not.toContain("script-src");
  // Without a browser's Accept, the same page.
  expect(await (await fetch(`${origin}/`)).text()).toBe(html);
});

it("GET /favicon.ico is an SVG icon, and the board and GraphiQL link it", async () => {
  const res = await fetch(`${origin}/favicon.ico`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("image/svg+xml");
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  expect(await res.text()).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"[^>]*>[\s\S]*<\/svg>\n$/);
  expect(await (await fetch(`${origin}/board`)).text()).toContain(`<link rel="icon" href="/favicon.ico" type="image/svg+xml">`);
  expect(await (await fetch(`${origin}/graphql`, { headers: asBrowser })).text()).toContain(`<link rel="icon" href="/favicon.ico" />`);
});

it("answers HEAD without a body, refuses other methods with 405 in words, and leaves other paths 404", async () => {
  const head = await fetch(`${origin}/`, { method: "HEAD" });
  expect(head.status).toBe(200);
  expect(Number(head.headers.get("content-length"))).toBeGreaterThan(0);
  expect(await head.text()).toBe("");
  const post = await fetch(`${origin}/`, { method: "POST", body: "x" });
  expect(post.status).toBe(405);
  expect(post.headers.get("allow")).toBe("GET, HEAD");
  expect(await post.text()).toBe("/ is read with GET\n");
  expect((await fetch(`${origin}/favicon.png`)).status).toBe(404);
  expect((await fetch(`${origin}/index.html`)).status).toBe(404);
});
