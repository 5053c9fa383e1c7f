// Debian's Chromium driven by playwright-core, as the page tests use it
// (scripts/test-prerequisites.sh installs it; nothing is downloaded at run
// time), and GraphiQL's editors as a person types into them.
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import type { Browser, Page } from "playwright-core";
import { expect } from "vitest";
import { Ops } from "./harness.js";
import type { Company } from "./harness.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Chromium headless, without the background requests a closed network refuses; one clear line when it is missing. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}: bash scripts/test-prerequisites.sh installs it (npm test runs it first), or set CHROMIUM_PATH`);
  return chromium.launch({
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
}

/** GraphiQL's editors and result window on `page`. */
export function graphiql(page: Page) {
  /** Replaces the text of the Monaco editor labelled `label` (insertText: no auto-closed brackets). */
  const setEditor = async (label: string, text: string) => {
    const editor = page.locator(`section[aria-label="${label}"] .monaco-editor .view-lines >> visible=true`);
    await editor.click();
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Delete");
    await page.keyboard.insertText(text);
    await expect.poll(async () => (await editor.innerText()).replace(/\s+/g, "")).toBe(text.replace(/\s+/g, ""));
  };
  const result = async () => (await page.locator('[aria-label="Result Window"]').innerText()).replace(/\s+/g, " ");
  /** Claims and requeues a new issue until the result window (a live lockChanged subscription) shows it; its id. */
  const claimUntilShown = async (co: Company, title: string) => {
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title } });
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
    return createIssue.id;
  };
  return { setEditor, result, claimUntilShown };
}
