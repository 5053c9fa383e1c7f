// GraphiQL in a real browser (Debian's chromium), reached through a proxy
// whose connections the test cuts: a subscription whose connection drops
// shows, in words, that the connection was lost, not the browser's Event
// serialised ({"isTrusted":true}).
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { graphiql, launchChromium } from "../helpers/browser.js";
import { cuttableProxy } from "../helpers/cuttableProxy.js";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

let h: Harness;
let co: Company;
let browser: Browser;
let page: Page;
let proxy: Awaited<ReturnType<typeof cuttableProxy>>;

beforeAll(async () => {
  h = await startHarness();
  co = await createCompany(h, 1);
  proxy = await cuttableProxy(new URL(h.url));
  browser = await launchChromium();
  page = await browser.newPage();
});

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await h?.close();
});

it("a subscription whose connection drops says that the connection was lost, in words", async () => {
  await page.goto(proxy.url, { waitUntil: "load" });
  await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).waitFor({ timeout: 30_000 });
  const { setEditor, result, claimUntilShown } = graphiql(page);
  await page.getByRole("button", { name: "Headers" }).click();
  await setEditor("Headers", JSON.stringify({ authorization: `Bearer ${co.board.token}` }));
  await setEditor("Operation Editor", `subscription { lockChanged(companyId: "${co.id}") { seq kind issueId } }`);
  await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).click();
  // The subscription is live: a claim shows in the result window.
  await claimUntilShown(co, "seen before the drop");

  // The server becomes unreachable: the socket is cut and every new connection refused.
  proxy.state.paused = true;
  proxy.cut();
  await expect
    .poll(result, { timeout: 30_000, interval: 250 })
    .toContain(`{ "errors": [ { "message": "the connection to the server was lost; run the subscription again" } ] }`);
  expect(await result()).not.toContain("isTrusted");
}, 90_000);
