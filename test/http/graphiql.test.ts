// GraphiQL in a real browser (Debian's chromium, driven by playwright-core):
// the page loads with no request leaving this machine, a query runs as the
// key set in its Headers tab, and a subscription over WebSocket, signed in
// the same way, shows an event caused by a mutation sent through the API.
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

/** Where Debian's chromium is (scripts/test-prerequisites.sh installs it); nothing is downloaded at run time. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

let h: Harness;
let co: Company;
let browser: Browser;
let page: Page;
const external: string[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}: bash scripts/test-prerequisites.sh installs it (npm test runs it first), or set CHROMIUM_PATH`);
  h = await startHarness();
  co = await createCompany(h, 1);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  page = await browser.newPage();
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

/** Replaces the text of the Monaco editor labelled `label` (insertText: no auto-closed brackets). */
async function setEditor(label: string, text: string) {
  await page.locator(`section[aria-label="${label}"] .monaco-editor .view-lines >> visible=true`).click();
  await page.keyboard.press("Control+A");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(text);
  const shown = page.locator(`section[aria-label="${label}"] .monaco-editor .view-lines >> visible=true`);
  await expect.poll(async () => (await shown.innerText()).replace(/\s+/g, "")).toBe(text.replace(/\s+/g, ""));
}

async function result(): Promise<string> {
  return (await page.locator('[aria-label="Result Window"]').innerText()).replace(/\s+/g, " ");
}

it("loads from this server alone, with no request to any other host", async () => {
  await page.goto(h.url, { waitUntil: "load" });
  await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).waitFor({ timeout: 30_000 });
  expect(external).toEqual([]);
});

it("runs a query as the key set in the Headers tab", async () => {
  await page.getByRole("button", { name: "Headers" }).click();
  await setEditor("Headers", JSON.stringify({ authorization: `Bearer ${co.board.token}` }));
  await setEditor("Operation Editor", `query { me { role companyId } }`);
  // GraphiQL reads the editors a moment after typing: run until the answer is this query's.
  await expect
    .poll(
      async () => {
        await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).click();
        return result();
      },
      { timeout: 20_000, interval: 500 },
    )
    .toContain(`"role": "BOARD"`);
  expect(await result()).toContain(co.id);
});

it("shows, live, an event of a subscription signed in through the Headers tab", async () => {
  await setEditor("Operation Editor", `subscription { lockChanged(companyId: "${co.id}") { seq kind issueId } }`);
  await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).click();
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "seen in GraphiQL" } });
  const agent = co.agents[0]!;
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
  // Claim until the subscription, which starts a moment after the click, has seen a claim.
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
  expect(await result()).not.toContain("UNAUTHENTICATED");
  expect(external).toEqual([]);
});
