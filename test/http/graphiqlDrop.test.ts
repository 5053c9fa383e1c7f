// GraphiQL in a real browser (Debian's chromium), reached through a proxy
// whose connections the test cuts: a subscription whose connection drops
// shows, in words, that the connection was lost, not the browser's Event
// serialised ({"isTrusted":true}).
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { cuttableProxy } from "../helpers/cuttableProxy.js";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

let h: Harness;
let co: Company;
let browser: Browser;
let page: Page;
let proxy: Awaited<ReturnType<typeof cuttableProxy>>;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}: bash scripts/test-prerequisites.sh installs it (npm test runs it first), or set CHROMIUM_PATH`);
  h = await startHarness();
  co = await createCompany(h, 1);
  proxy = await cuttableProxy(new URL(h.url));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  page = await browser.newPage();
});

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await h?.close();
});

/** Replaces the text of the Monaco editor labelled `label` (insertText: no auto-closed brackets). */
async function setEditor(label: string, text: string) {
  const editor = page.locator(`section[aria-label="${label}"] .monaco-editor .view-lines >> visible=true`);
  await editor.click();
  await page.keyboard.press("Control+A");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(text);
  await expect.poll(async () => (await editor.innerText()).replace(/\s+/g, "")).toBe(text.replace(/\s+/g, ""));
}

async function result(): Promise<string> {
  return (await page.locator('[aria-label="Result Window"]').innerText()).replace(/\s+/g, " ");
}

it("a subscription whose connection drops says that the connection was lost, in words", async () => {
  await page.goto(proxy.url, { waitUntil: "load" });
  await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).waitFor({ timeout: 30_000 });
  await page.getByRole("button", { name: "Headers" }).click();
  await setEditor("Headers", JSON.stringify({ authorization: `Bearer ${co.board.token}` }));
  await setEditor("Operation Editor", `subscription { lockChanged(companyId: "${co.id}") { seq kind issueId } }`);
  await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).click();
  // The subscription is live: a claim shows in the result window.
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "seen before the drop" } });
  const agent = co.agents[0]!;
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  await expect
    .poll(
      async () => {
        await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: createIssue.id });
        await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: createIssue.id, outcome: "REQUEUE" });
        return result();
      },
      { timeout: 30_000 },
    )
    .toContain(createIssue.id);

  // The server becomes unreachable: the socket is cut and every new connection refused.
  proxy.state.paused = true;
  proxy.cut();
  await expect
    .poll(result, { timeout: 30_000, interval: 250 })
    .toContain(`{ "errors": [ { "message": "the connection to the server was lost; run the subscription again" } ] }`);
  expect(await result()).not.toContain("isTrusted");
}, 90_000);
