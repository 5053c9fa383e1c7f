// GraphiQL in a real browser (Debian's chromium, driven by playwright-core):
// the page loads with no request leaving this machine, a query runs as the
// key set in its Headers tab, and a subscription over WebSocket, signed in
// the same way, shows an event caused by a mutation sent through the API.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { graphiql, launchChromium } from "../helpers/browser.js";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

let h: Harness;
let co: Company;
let browser: Browser;
let page: Page;
let ui: ReturnType<typeof graphiql>;
const external: string[] = [];

beforeAll(async () => {
  h = await startHarness();
  co = await createCompany(h, 1);
  browser = await launchChromium();
  page = await browser.newPage();
  ui = graphiql(page);
  const origin = new URL(h.url).origin;
  // Every request the page makes must go to this server: anything else is recorded and refused.
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(origin) || url.startsWith("blob:") || url.startsWith("data:")) return route.continue();
    external.push(url);
    return route.abort();
  });
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

it("loads from this server alone, with no request to any other host", async () => {
  await page.goto(h.url, { waitUntil: "load" });
  await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).waitFor({ timeout: 30_000 });
  expect(external).toEqual([]);
});

it("runs a query as the key set in the Headers tab", async () => {
  await page.getByRole("button", { name: "Headers" }).click();
  await ui.setEditor("Headers", JSON.stringify({ authorization: `Bearer ${co.board.token}` }));
  await ui.setEditor("Operation Editor", `query { me { role companyId } }`);
  // GraphiQL reads the editors a moment after typing: run until the answer is this query's.
  await expect
    .poll(
      async () => {
        await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).click();
        return ui.result();
      },
      { timeout: 20_000, interval: 500 },
    )
    .toContain(`"role": "BOARD"`);
  expect(await ui.result()).toContain(co.id);
});

it("shows, live, an event of a subscription signed in through the Headers tab", async () => {
  await ui.setEditor("Operation Editor", `subscription { lockChanged(companyId: "${co.id}") { seq kind issueId } }`);
  await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).click();
  await ui.claimUntilShown(co, "seen in GraphiQL");
  expect(await ui.result()).not.toContain("UNAUTHENTICATED");
  expect(external).toEqual([]);
});
