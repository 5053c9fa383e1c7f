// The live board (/board) in a real browser: Debian's chromium driven by
// playwright-core. The page is reached through a small TCP proxy in front of
// the API, so a test can drop its connections and watch it resume. Every
// request the page makes must stay on that origin. Keys the page is shown
// (rotated from its Agents tab) must never reach its console or storage.
import { execFile } from "node:child_process";
import net from "node:net";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { launchChromium } from "../helpers/browser.js";
import { ADMIN_TOKEN, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const XSS_TITLE = `<img src=x onerror="window.__pwned=1">`;
const XSS_REASON = `<script>window.__pwned=2</script> stuck since Monday`;

let h: Harness;
let co: Company;
let browser: Browser;
let page: Page;
let proxy: Proxy;
let origin: string;
const external: string[] = [];
const issues: Record<"held" | "live" | "lapse" | "force" | "xss" | "free", string> = { held: "", live: "", lapse: "", force: "", xss: "", free: "" };
let runId: string;
/** Every confirm() the page asked (all are accepted), oldest first. */
const asked: string[] = [];
/** Every line the page wrote to its console: no key may be among them. */
const consoleLines: string[] = [];

/** A TCP proxy to the API whose connections a test can cut, and refuse while paused. */
interface Proxy {
  port: number;
  paused: boolean;
  cut(): void;
  close(): Promise<void>;
}

async function startProxy(target: number): Promise<Proxy> {
  const sockets = new Set<net.Socket>();
  const state = { paused: false };
  const server = net.createServer((client) => {
    if (state.paused) return void client.destroy();
    const upstream = net.connect(target, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    client.pipe(upstream).pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get paused() {
      return state.paused;
    },
    set paused(value: boolean) {
      state.paused = value;
    },
    cut() {
      for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const row = (title: string) => page.locator("#issues-body tr", { has: page.getByRole("button", { name: title, exact: true }) });
/** A row's cell by column (Status is 0), after the row's checkbox. */
const cell = (title: string, column: number) => row(title).locator("td:not(.select)").nth(column);
const agentRow = (id: string) => page.locator(`#agents-body tr[data-agent="${id}"]`);

/** What the server makes of a key: its role, or the error code that refuses it. */
async function whoami(token: string): Promise<string> {
  const res = await h.client(token).request(Ops.MeDocument);
  return res.errors?.[0]?.extensions?.code ?? res.data!.me.role;
}

beforeAll(async () => {
  h = await startHarness();
  co = await createCompany(h, 2);
  const [agent1, agent2] = co.agents;
  for (const [key, title, assignee] of [
    ["held", "Held by agent one", agent1!.id],
    ["live", "Watched live", agent1!.id],
    ["lapse", "Lease will lapse", agent2!.id],
    ["force", "Force-release me", agent1!.id],
    ["xss", XSS_TITLE, agent1!.id],
    ["free", "Nobody holds this", null],
  ] as const) {
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title, assigneeAgentId: assignee, priority: "LOW" } });
    issues[key] = createIssue.id;
  }
  runId = (await agent1!.client.ok(Ops.StartRunDocument)).startRun.id;
  await agent1!.client.ok(Ops.ClaimIssueDocument, { runId, issueId: issues.held });

  proxy = await startProxy(new URL(h.url).port ? Number(new URL(h.url).port) : 80);
  origin = `http://127.0.0.1:${proxy.port}`;
  browser = await launchChromium();
  page = await browser.newPage();
  page.on("dialog", (dialog) => {
    asked.push(dialog.message());
    void dialog.accept();
  });
  page.on("console", (message) => void consoleLines.push(message.text()));
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(origin)) return route.continue();
    external.push(url);
    return route.abort();
  });
});

// A test that fails with the issue panel open, or another tab shown, leaves the next one the Issues tab.
afterEach(async () => {
  if (!page || page.isClosed() || !(await page.locator("#board").isVisible())) return;
  if (await page.locator("#detail").isVisible()) await page.locator("#detail-close").click();
  if ((await page.locator("#tab-button-issues").getAttribute("aria-selected")) !== "true") await page.locator("#tab-button-issues").click();
});

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await h?.close();
});

it("serves the page with a policy that allows no inline script and no other origin", async () => {
  const res = await fetch(`${origin}/board`);
  expect(res.status).toBe(200);
  const policy = res.headers.get("content-security-policy") ?? "";
  expect(policy).toContain("script-src 'self'");
  expect(policy).toContain("connect-src 'self'");
  expect(policy).not.toContain("unsafe-inline");
  expect((await fetch(`${origin}/board/../package.json`)).status).toBe(404);
  expect((await fetch(`${origin}/board/nothing.js`)).status).toBe(404);
});

it("before sign-in shows only the sign-in form: no company picker, Open board or Sign out", async () => {
  await page.goto(`${origin}/board`);
  await page.getByLabel("Board key").waitFor();
  expect(await page.getByRole("button", { name: "Sign in" }).isVisible()).toBe(true);
  for (const hidden of [page.locator("#company-picker"), page.getByRole("button", { name: "Open board" }), page.getByRole("button", { name: "Sign out" })]) {
    expect(await hidden.isVisible()).toBe(false);
  }
  // Hidden by the hidden attribute, whatever display a style rule gives the element.
  expect(await page.locator("#company-picker").evaluate((el) => getComputedStyle(el).display)).toBe("none");
});

it("refuses a wrong key with a message, and signs in with a board key: the seeded issues with their holders", async () => {
  await page.goto(`${origin}/board`);
  await page.getByLabel("Board key").fill("not-a-real-key-0123456789");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect.poll(() => page.locator("#sign-in-message").innerText()).toContain("not accepted");

  await page.getByLabel("Board key").fill(co.board.token!);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#board[data-loaded='6']").waitFor();
  expect(await page.getByRole("button", { name: "Sign out" }).isVisible()).toBe(true);
  expect(await page.locator("#issues-page").innerText()).toBe("6 issues · page 1 of 1");
  expect(await cell("Held by agent one", 0).innerText()).toBe("CLAIMED");
  expect(await cell("Held by agent one", 5).innerText()).toMatch(/^Agent 1 · run [0-9a-f]{8} · heartbeat \d+ s ago$/);
  expect(await cell("Nobody holds this", 0).innerText()).toBe("OPEN");
  expect(await cell("Nobody holds this", 5).innerText()).toBe("");
  // The key is in this tab's sessionStorage, and nowhere in the URL.
  expect(page.url()).toBe(`${origin}/board`);
  expect(await page.evaluate(() => sessionStorage.getItem("baton.board"))).toContain(co.board.token!);
  expect(await page.evaluate(() => localStorage.length)).toBe(0);
});

it("shows a claim, an acquire and a release as they commit, without reload; the event tail gains them in order", async () => {
  const navigations: string[] = [];
  page.on("framenavigated", (f) => navigations.push(f.url()));
  const agent = co.agents[0]!.client;
  const before = Number((await h.one<{ seq: string }>("SELECT coalesce(max(seq), 0) AS seq FROM lock_events WHERE company_id = $1", [co.id])).seq);

  await agent.ok(Ops.ClaimIssueDocument, { runId, issueId: issues.live });
  await expect.poll(() => cell("Watched live", 0).innerText(), { timeout: 5000 }).toBe("CLAIMED");
  await agent.ok(Ops.AcquireExecutionDocument, { runId, issueId: issues.live });
  await expect.poll(() => cell("Watched live", 0).innerText(), { timeout: 5000 }).toBe("IN_PROGRESS");
  expect(await cell("Watched live", 7).innerText()).toBe("1 / 3");
  await agent.ok(Ops.ReleaseIssueDocument, { runId, issueId: issues.live, outcome: "DONE" });
  // A DONE issue leaves the default list; one click on "Show DONE and CANCELLED" shows it.
  await expect.poll(() => row("Watched live").count(), { timeout: 5000 }).toBe(0);
  const finished = page.getByRole("checkbox", { name: /^Show DONE and CANCELLED/ });
  expect(await finished.isChecked()).toBe(false);
  await finished.check();
  expect(await cell("Watched live", 0).innerText()).toBe("DONE");
  await finished.uncheck();
  expect(await row("Watched live").count()).toBe(0);
  expect(navigations).toEqual([]);

  await page.getByRole("tab", { name: "Events" }).click();
  const events = page.locator("#events-list li");
  await expect.poll(async () => (await events.count()) >= 3).toBe(true);
  const newest = await events.evaluateAll((lis) => lis.slice(0, 3).map((li) => [Number(li.getAttribute("data-seq")), li.querySelector(".kind")!.textContent]));
  const seqs = (await h.ledgerSeqs(co.id)).filter((seq) => Number(seq) > before).map(Number);
  expect(newest).toEqual([
    [seqs[2], "RELEASED"],
    [seqs[1], "EXECUTION_ACQUIRED"],
    [seqs[0], "CLAIMED"],
  ]);
  await page.getByRole("tab", { name: "Issues" }).click();
});

it("shows an issue created, and an issue edited, as they commit: changes that write no ledger event", async () => {
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "Created live", priority: "LOW" } });
  await expect.poll(() => cell("Created live", 0).innerText(), { timeout: 5000 }).toBe("OPEN");
  await co.board.ok(Ops.UpdateIssueDocument, { id: createIssue.id, input: { title: "Renamed live", priority: "CRITICAL" } });
  await expect.poll(() => cell("Renamed live", 2).innerText(), { timeout: 5000 }).toBe("CRITICAL");
  expect(await row("Created live").count()).toBe(0);
});

it("after a dropped connection shows that it is reconnecting, then resumes after its last seq without missing a change", async () => {
  proxy.paused = true;
  proxy.cut();
  await expect.poll(() => page.locator("#live").innerText()).toContain("Reconnecting");
  // A change made while the board is cut off arrives when it resumes (afterSeq).
  const agent = co.agents[0]!.client;
  await agent.ok(Ops.ClaimIssueDocument, { runId, issueId: issues.force });
  // An issue created meanwhile writes no ledger event: the board reads the issues again when it is back.
  await co.board.ok(Ops.CreateIssueDocument, { input: { title: "Made while cut off", priority: "LOW" } });
  proxy.paused = false;
  await expect.poll(() => cell("Force-release me", 0).innerText(), { timeout: 15_000 }).toBe("CLAIMED");
  await expect.poll(() => row("Made while cut off").count(), { timeout: 15_000 }).toBe(1);
  await expect.poll(() => page.locator("#live").innerText(), { timeout: 15_000 }).toBe("Live");
});

it("shows a holder whose lease lapsed as dead, and the row OPEN again after `npm run recovery -- --once`", async () => {
  const agent2 = co.agents[1]!.client;
  const run2 = (await agent2.ok(Ops.StartRunDocument)).startRun.id;
  await agent2.ok(Ops.ClaimIssueDocument, { runId: run2, issueId: issues.lapse });
  await expect.poll(() => cell("Lease will lapse", 0).innerText(), { timeout: 5000 }).toBe("CLAIMED");
  await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second', last_heartbeat_at = now() - interval '61 seconds' WHERE id = $1", [
    run2,
  ]);
  // The board re-reads runs every 5 s: heartbeats are not lock changes.
  await expect.poll(() => cell("Lease will lapse", 5).innerText(), { timeout: 15_000 }).toContain("dead");
  expect(await cell("Lease will lapse", 5).getAttribute("class")).toContain("beat-dead");

  await page.getByRole("tab", { name: "Runs" }).click();
  await expect.poll(() => page.locator("#runs-summary").innerText()).toContain("1 dead but still holding locks");
  await page.getByRole("tab", { name: "Issues" }).click();

  await promisify(execFile)("npm", ["run", "--silent", "recovery", "--", "--once"], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: h.database.url, REDIS_URL: "" },
  });
  await expect.poll(() => cell("Lease will lapse", 0).innerText(), { timeout: 10_000 }).toBe("OPEN");
  expect(await cell("Lease will lapse", 5).innerText()).toBe("");
});

/** Which of the issue panel's actions are shown, by their names. */
async function offered(): Promise<string[]> {
  const dialog = page.getByRole("dialog");
  const names: [string, ReturnType<Page["locator"]>][] = [
    ["Force release", dialog.getByRole("button", { name: "Force release" })],
    ["Requeue", dialog.getByRole("button", { name: "Requeue" })],
    ["Cancel issue", dialog.getByRole("button", { name: "Cancel issue" })],
    ["Change key", dialog.getByRole("button", { name: "Change key" })],
    ["Raise max attempts", dialog.getByRole("button", { name: "Raise max attempts" })],
  ];
  const shown: string[] = [];
  for (const [name, button] of names) if (await button.isVisible()) shown.push(name);
  return shown;
}

it("force-releases from the page with a typed reason: a FORCE_RELEASED event carries it, and the answer is shown", async () => {
  await row("Force-release me").getByRole("button", { name: "Force-release me" }).click();
  const dialog = page.getByRole("dialog");
  await expect.poll(() => dialog.locator("#detail-title").innerText()).toBe("Force-release me");
  // CLAIMED: force release and cancel; no requeue (not a board move from CLAIMED).
  await expect.poll(offered).toEqual(["Force release", "Cancel issue", "Change key", "Raise max attempts"]);
  await dialog.getByRole("button", { name: "Force release" }).click();
  await expect.poll(() => dialog.locator("#action-answer").innerText()).toContain("reason is required");

  await dialog.getByLabel("Reason (required)").fill(XSS_REASON);
  await dialog.getByRole("button", { name: "Force release" }).click();
  await expect.poll(() => dialog.locator("#action-answer").innerText()).toBe("IssueReleased: the issue is OPEN.");
  const event = await h.one<{ kind: string; reason: string }>("SELECT kind, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq DESC LIMIT 1", [
    issues.force,
  ]);
  expect(event).toEqual({ kind: "FORCE_RELEASED", reason: XSS_REASON });
  // The history shows the event, and its reason as text.
  await expect.poll(() => dialog.locator("#detail-history").innerText()).toContain(`FORCE_RELEASED → OPEN`);
  expect(await dialog.locator("#detail-history").innerText()).toContain(XSS_REASON);
  // OPEN: nothing holds it, and it is already open.
  await expect.poll(offered).toEqual(["Cancel issue", "Change key", "Raise max attempts"]);

  // CANCELLED is terminal: no action is offered, and the panel says so.
  await dialog.getByRole("button", { name: "Cancel issue" }).click();
  await expect.poll(() => dialog.locator("#action-answer").innerText()).toBe("IssueUpdated: the issue is CANCELLED.");
  await expect.poll(offered).toEqual([]);
  expect(await dialog.locator("#actions-none").innerText()).toBe("This issue is finished: no action applies.");
  await dialog.getByRole("button", { name: "Close" }).click();
});

it("raises max attempts of an escalated issue from the page, which reopens it", async () => {
  const agent = co.agents[0]!;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, {
    input: { title: "Out of attempts", assigneeAgentId: agent.id, maxAttempts: 1, priority: "LOW" },
  });
  await agent.client.ok(Ops.ClaimIssueDocument, { runId, issueId: createIssue.id });
  await agent.client.ok(Ops.AcquireExecutionDocument, { runId, issueId: createIssue.id });
  await agent.client.ok(Ops.ReleaseIssueDocument, { runId, issueId: createIssue.id, outcome: "FAILED" });
  await expect.poll(() => cell("Out of attempts", 0).innerText(), { timeout: 5000 }).toBe("ESCALATED");
  await row("Out of attempts").getByRole("button", { name: "Out of attempts" }).click();
  const dialog = page.getByRole("dialog");
  // ESCALATED with no attempt left: requeue would be refused, so raising max attempts is what is offered.
  await expect.poll(offered).toEqual(["Cancel issue", "Change key", "Raise max attempts"]);
  await expect.poll(() => dialog.getByLabel("Max attempts").inputValue()).toBe("2");
  await dialog.getByLabel("Max attempts").fill("3");
  await dialog.getByRole("button", { name: "Raise max attempts" }).click();
  await expect.poll(() => dialog.locator("#action-answer").innerText()).toBe("IssueUpdated: the issue is OPEN.");
  expect(await h.one("SELECT status::text, max_attempts FROM issues WHERE id = $1", [createIssue.id])).toEqual({ status: "OPEN", max_attempts: 3 });
  await dialog.getByRole("button", { name: "Close" }).click();
  await expect.poll(() => cell("Out of attempts", 7).innerText()).toBe("1 / 3");
});

it("shows titles and reasons written as HTML as literal text, and runs none of their script", async () => {
  expect(await row(XSS_TITLE).count()).toBe(1);
  expect(await page.locator("#issues-body img").count()).toBe(0);
  await page.getByRole("tab", { name: "Events" }).click();
  await expect.poll(() => page.locator("#events-list").innerText()).toContain(XSS_REASON);
  expect(await page.locator("#events-list script").count()).toBe(0);
  expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
  await page.getByRole("tab", { name: "Issues" }).click();
});

it("shows the audit figures, none red on a healthy company", async () => {
  await page.getByRole("tab", { name: "Audit" }).click();
  const figure = (key: string) => page.locator(`[data-figure=${key}]`);
  await figure("doubleClaims").waitFor();
  for (const key of ["doubleClaims", "halfReleasedLocks"]) {
    expect(await figure(key).locator("strong").innerText()).toBe("0");
    expect(await figure(key).getAttribute("class")).toContain("figure-good");
  }
  await page.getByRole("tab", { name: "Issues" }).click();
});

it("signs in with the admin token and a company picker", async () => {
  const other = await browser.newPage();
  try {
    await other.goto(`${origin}/board`);
    await other.getByLabel("Board key").fill(ADMIN_TOKEN);
    await other.getByRole("button", { name: "Sign in" }).click();
    await other.getByLabel("Company").selectOption(co.id);
    await other.getByRole("button", { name: "Open board" }).click();
    await other.locator("#board[data-loaded='9']").waitFor();
    expect(await other.locator("#company-name").innerText()).toBe("Acme");
  } finally {
    await other.close();
  }
});

it("colours each status with its word, shows which status chips are on, counts in the singular for one, and explains its terms", async () => {
  const chip = page.locator("#status-filter button.status-OPEN");
  expect(await chip.getAttribute("aria-pressed")).toBe("false");
  const off = await chip.evaluate((el) => [getComputedStyle(el).backgroundColor, getComputedStyle(el, "::before").content]);
  await chip.click();
  expect(await chip.getAttribute("aria-pressed")).toBe("true");
  const on = await chip.evaluate((el) => [getComputedStyle(el).backgroundColor, getComputedStyle(el, "::before").content]);
  // On is visible without colour too: a check mark before the status.
  expect(on[1]).toBe(`"✓ "`);
  expect(off[1]).not.toBe(`"✓ "`);
  expect(on[0]).not.toBe(off[0]);
  expect(await row("Held by agent one").count()).toBe(0);
  await chip.click();
  expect(await chip.getAttribute("aria-pressed")).toBe("false");

  // Each status has its own colour, and the cell says the status in words.
  const colours = async (title: string) => cell(title, 0).evaluate((el) => `${getComputedStyle(el).color} on ${getComputedStyle(el).backgroundColor}`);
  expect(await cell("Held by agent one", 0).innerText()).toBe("CLAIMED");
  expect(await cell("Nobody holds this", 0).innerText()).toBe("OPEN");
  expect(await colours("Held by agent one")).not.toBe(await colours("Nobody holds this"));
  expect(await colours("Nobody holds this")).not.toContain("rgba(0, 0, 0, 0)");

  await page.getByLabel("Search").fill("Nobody holds");
  await expect.poll(() => page.locator("#issues-page").innerText()).toBe("1 issue · page 1 of 1");
  await page.getByLabel("Search").fill("");

  // The legend and the headers' tooltips say what a run, a lock epoch, an attempt and the two locks are.
  await page.getByText("What the columns mean").click();
  const legend = await page.locator("#legend").innerText();
  for (const term of ["Run", "Checkout lock", "Execution lock", "Lock epoch", "Attempts"]) expect(legend).toContain(term);
  expect(legend).toContain("fencing token");
  expect(await page.locator("#issues-head th[data-key=epoch]").getAttribute("title")).toMatch(/^Lock epoch: the fencing token/);
  expect(await page.locator("#issues-head th[data-key=attempts]").getAttribute("title")).toMatch(/^Attempts used of allowed/);
  await page.getByText("What the columns mean").click();
});

it("creates an issue from the page with every field; a bad field is named and nothing is created", async () => {
  const count = async () => Number((await h.one<{ n: string }>("SELECT count(*) AS n FROM issues WHERE company_id = $1", [co.id])).n);
  const before = await count();
  await page.getByText("New issue", { exact: true }).click();
  const form = page.locator("#create-form");
  await form.getByRole("button", { name: "Create issue" }).click();
  await expect.poll(() => page.locator("#create-answer").innerText()).toBe("A title is required.");
  await form.getByLabel("Title (required)").fill("Made on the board");
  await form.getByLabel("Max attempts").fill("0");
  await form.getByRole("button", { name: "Create issue" }).click();
  await expect.poll(() => page.locator("#create-answer").innerText()).toBe("Max attempts must be a whole number from 1 to 100.");
  expect(await count()).toBe(before);

  await form.getByLabel("Description").fill("Written from the board's form.");
  await form.getByLabel("Priority").selectOption("HIGH");
  await form.getByLabel("Assignee").selectOption({ label: "Agent 2" });
  await form.getByLabel("Concurrency key").fill("repo-board");
  await form.getByLabel("Max attempts").fill("5");
  await form.getByRole("button", { name: "Create issue" }).click();
  await expect.poll(() => page.locator("#create-answer").innerText()).toBe("Created “Made on the board” (OPEN, HIGH).");
  expect(
    await h.one("SELECT title, description, priority::text, assignee_agent_id, concurrency_key, max_attempts FROM issues WHERE title = $1", [
      "Made on the board",
    ]),
  ).toEqual({
    title: "Made on the board",
    description: "Written from the board's form.",
    priority: "HIGH",
    assignee_agent_id: co.agents[1]!.id,
    concurrency_key: "repo-board",
    max_attempts: 5,
  });
  await expect.poll(() => cell("Made on the board", 2).innerText()).toBe("HIGH");
  expect(await form.getByLabel("Title (required)").inputValue()).toBe("");
  await page.getByText("New issue", { exact: true }).click();
});

it("bulk actions: selects rows (one by one, or every row shown), requeues, cancels and sets priority, and says what changed and what was refused", async () => {
  const agent = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "Bulk blocked", assigneeAgentId: agent.id, priority: "LOW" },
      { title: "Bulk backlog", status: "BACKLOG", priority: "LOW" },
      { title: "Bulk open", priority: "LOW" },
    ],
  });
  const [blocked, backlog, open] = createIssues.map((i) => i.id);
  const bulkRun = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: bulkRun, issueId: blocked! });
  await agent.client.ok(Ops.ReleaseIssueDocument, { runId: bulkRun, issueId: blocked!, outcome: "BLOCKED" });
  await page.getByLabel("Search").fill("Bulk ");
  await expect.poll(() => page.locator("#issues-page").innerText(), { timeout: 5000 }).toBe("3 issues · page 1 of 1");
  await expect.poll(() => cell("Bulk blocked", 0).innerText(), { timeout: 5000 }).toBe("BLOCKED");
  const status = async (id: string) => (await h.one<{ status: string }>("SELECT status::text FROM issues WHERE id = $1", [id])).status;
  const requeue = page.getByRole("button", { name: "Requeue selected" });
  expect(await requeue.isDisabled()).toBe(true);

  // Requeue the blocked and the open one: BLOCKED → OPEN is a board move, OPEN → OPEN keeps the status.
  await row("Bulk blocked").getByRole("checkbox").check();
  await row("Bulk open").getByRole("checkbox").check();
  await expect.poll(() => page.locator("#bulk-count").innerText()).toBe("2 issues selected");
  await requeue.click();
  await expect.poll(() => page.locator("#bulk-answer").innerText()).toBe("2 issues requeued.");
  expect(asked.at(-1)).toBe("Requeue 2 selected issues?");
  expect(await status(blocked!)).toBe("OPEN");
  expect(await page.locator("#bulk-count").innerText()).toBe("No issue selected");

  // Priority of every row shown.
  await page.getByRole("checkbox", { name: "Select every issue shown" }).check();
  await expect.poll(() => page.locator("#bulk-count").innerText()).toBe("3 issues selected");
  await page.locator("#bulk").getByLabel("Priority").selectOption("CRITICAL");
  await page.getByRole("button", { name: "Set priority of selected" }).click();
  await expect.poll(() => page.locator("#bulk-answer").innerText()).toBe("3 issues set to CRITICAL.");
  expect(
    (await h.sql<{ priority: string }>("SELECT priority::text FROM issues WHERE id = ANY($1)", [[blocked, backlog, open]])).map((r) => r.priority),
  ).toEqual(["CRITICAL", "CRITICAL", "CRITICAL"]);

  // Cancel one, then requeue all three: the cancelled one is refused, and the line says which and why; the others change.
  await row("Bulk open").getByRole("checkbox").check();
  await page.getByRole("button", { name: "Cancel selected" }).click();
  await expect.poll(() => page.locator("#bulk-answer").innerText()).toBe("1 issue cancelled.");
  await page.getByRole("checkbox", { name: /^Show DONE and CANCELLED/ }).check();
  await page.getByRole("checkbox", { name: "Select every issue shown" }).check();
  await requeue.click();
  await expect
    .poll(() => page.locator("#bulk-answer").innerText())
    .toBe(`2 issues requeued, 1 refused: “Bulk open” (CANCELLED): InvalidTransition: the board cannot move issue ${open} from CANCELLED to OPEN.`);
  expect(await status(open!)).toBe("CANCELLED");
  expect(await status(backlog!)).toBe("OPEN");
  await page.getByRole("checkbox", { name: /^Show DONE and CANCELLED/ }).uncheck();
  await page.getByLabel("Search").fill("");
});

it("concurrency keys: a Key column and field, a key changed from the panel, and a limit set and removed from the Limits tab, its active count live", async () => {
  const agent = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "Keyed one", concurrencyKey: "repo-a", assigneeAgentId: agent.id, priority: "LOW" },
      { title: "Keyed two", concurrencyKey: "repo-a", assigneeAgentId: agent.id, priority: "LOW" },
      { title: "Keyed elsewhere", concurrencyKey: "repo-b", assigneeAgentId: agent.id, priority: "LOW" },
    ],
  });
  const [one, two, elsewhere] = createIssues.map((i) => i.id);
  await expect.poll(() => cell("Keyed one", 3).innerText(), { timeout: 5000 }).toBe("repo-a");
  expect(await page.locator("#issues-head th:not(.select)").nth(3).innerText()).toBe("Key");
  expect(await cell("Keyed elsewhere", 3).innerText()).toBe("repo-b");
  expect(await cell("Nobody holds this", 3).innerText()).toBe("");
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run, issueId: one! });
  await expect.poll(() => cell("Keyed one", 0).innerText(), { timeout: 5000 }).toBe("CLAIMED");

  // A limit set through the page: the key is full (1 of 1 active), amber, and says so.
  await page.getByRole("tab", { name: "Limits" }).click();
  await expect.poll(() => page.locator("#limits-empty").isVisible()).toBe(true);
  const panel = page.locator("#tab-limits");
  await panel.getByLabel("Key", { exact: true }).fill("repo-a");
  await panel.getByLabel("Max active").fill("1");
  await panel.getByRole("button", { name: "Set limit" }).click();
  await expect.poll(() => page.locator("#limits-answer").innerText()).toBe("Limit set: key “repo-a” at most 1 active (1 now).");
  const limit = page.locator("#limits-body tr[data-limit='repo-a']");
  await expect.poll(() => limit.innerText()).toMatch(/^repo-a\s+1 \/ 1 · at limit/);
  expect(await limit.getAttribute("class")).toContain("limit-full");
  expect(await h.sql("SELECT key, max_active, active FROM concurrency_keys WHERE company_id = $1 AND max_active IS NOT NULL", [co.id])).toEqual([
    { key: "repo-a", max_active: 1, active: 1 },
  ]);
  const { claimIssue } = await agent.client.ok(Ops.ClaimIssueDocument, { runId: run, issueId: two! });
  expect(claimIssue).toMatchObject({ __typename: "ConcurrencyLimitReached", key: "repo-a", maxActive: 1 });

  // The count follows lock events while the tab is shown: the release frees the key's slot.
  await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run, issueId: one! });
  await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run, issueId: one!, outcome: "DONE" });
  await expect.poll(() => limit.innerText(), { timeout: 5000 }).toMatch(/^repo-a\s+0 \/ 1\s*Change/);
  expect((await limit.getAttribute("class")) ?? "").not.toContain("limit-full");

  // The issue panel shows the key and moves the issue to another one (board updateIssue).
  await page.getByRole("tab", { name: "Issues" }).click();
  await row("Keyed elsewhere").getByRole("button").click();
  const dialog = page.getByRole("dialog");
  await expect.poll(() => dialog.locator("#detail-fields").innerText()).toMatch(/Concurrency key\s+repo-b/);
  expect(await dialog.getByLabel("Concurrency key").inputValue()).toBe("repo-b");
  await dialog.getByLabel("Concurrency key").fill("repo-a");
  await dialog.getByRole("button", { name: "Change key" }).click();
  await expect.poll(() => dialog.locator("#action-answer").innerText()).toBe("IssueUpdated: the issue is OPEN.");
  await expect.poll(() => dialog.locator("#detail-fields").innerText()).toMatch(/Concurrency key\s+repo-a/);
  expect((await h.one<{ concurrency_key: string | null }>("SELECT concurrency_key FROM issues WHERE id = $1", [elsewhere])).concurrency_key).toBe("repo-a");
  await dialog.getByLabel("Concurrency key").fill("");
  await dialog.getByRole("button", { name: "Change key" }).click();
  await expect.poll(() => dialog.locator("#detail-fields").innerText()).toMatch(/Concurrency key\s+none \(the unkeyed pool\)/);
  await dialog.getByRole("button", { name: "Close" }).click();
  await expect.poll(() => cell("Keyed elsewhere", 3).innerText()).toBe("");

  // Removing a limit is confirmed (the test accepts every dialog), then gone.
  await page.getByRole("tab", { name: "Limits" }).click();
  await page.getByRole("button", { name: "Remove the limit on repo-a" }).click();
  await expect.poll(() => page.locator("#limits-answer").innerText()).toBe("Limit removed: key “repo-a” has no limit.");
  await expect.poll(() => page.locator("#limits-body tr").count()).toBe(0);
  expect(await page.locator("#limits-empty").isVisible()).toBe(true);
  await page.getByRole("tab", { name: "Issues" }).click();
});

// ---- The work graph (issue 29): waiting, the panel's parent, blockers and sub-issues, the create form's new fields, the audit ----

/** The line under a row's title that says what a waiting issue waits on ("" when it is not waiting). */
const waits = (title: string) =>
  row(title)
    .locator("small.waits")
    .evaluate((el) => ((el as HTMLElement).hidden ? "" : (el.textContent ?? "")));
/** A list's items as text, one space between words, in a stable order (items made in one transaction have no order between them). */
const lines = async (list: ReturnType<Page["locator"]>) => (await list.locator("li").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim()).sort();
/** An instant on the database's clock, `interval` from now (an SQL interval), as ISO. */
const dbInstant = async (interval: string) => (await h.one<{ t: Date }>(`SELECT now() + $1::interval AS t`, [interval])).t.toISOString();
/** HH:MM:SS of an instant in a time zone, as the board writes it. */
const hhmmss = (iso: string, timeZone: string) =>
  new Date(iso).toLocaleTimeString("en-GB", { timeZone, hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });

it("waiting: an OPEN issue whose blockers are not DONE says so and on what (a CANCELLED one called out), and is ready live once they are DONE; a delay says until when and ends on time", async () => {
  const agent = co.agents[0]!;
  const create = async (input: Ops.CreateIssueInput) => (await co.board.ok(Ops.CreateIssueDocument, { input: { priority: "LOW", ...input } })).createIssue.id;
  const migration = await create({ title: "Write the migration", assigneeAgentId: agent.id });
  await create({ title: "Run the backfill", blockedBy: [migration] });
  const oldPlan = await create({ title: "Old plan" });
  await create({ title: "Stuck on the old plan", blockedBy: [oldPlan] });
  const later = await dbInstant("1 hour");
  await create({ title: "Later today", notBefore: later });
  await create({ title: "In a moment", notBefore: await dbInstant("2 seconds") });

  await expect.poll(() => cell("Run the backfill", 0).innerText(), { timeout: 5000 }).toBe("OPEN · waiting");
  expect(await cell("Run the backfill", 0).getAttribute("class")).toContain("status-waiting");
  expect(await waits("Run the backfill")).toBe("waiting on “Write the migration” (OPEN)");
  expect(await cell("Write the migration", 0).innerText()).toBe("OPEN");
  expect(await waits("Write the migration")).toBe("");
  // A delay: the server's instant, in this page's time zone.
  const zone = await page.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
  await expect.poll(() => waits("Later today")).toContain(`waiting until ${hhmmss(later, zone)}`);

  // The "waiting" chip lists the waiting issues only; its colour is its own, and the legend says what it means.
  const chip = page.locator("#status-filter button.status-waiting");
  await chip.click();
  expect(await row("Run the backfill").count()).toBe(1);
  expect(await row("Later today").count()).toBe(1);
  expect(await row("Write the migration").count()).toBe(0);
  await chip.click();
  const colour = (title: string) => cell(title, 0).evaluate((el) => `${getComputedStyle(el).color} on ${getComputedStyle(el).backgroundColor}`);
  expect(await colour("Run the backfill")).not.toBe(await colour("Write the migration"));
  await page.getByText("What the columns mean").click();
  expect(await page.locator("#legend").innerText()).toMatch(/waiting\s+An OPEN issue that no agent's claim takes yet/);
  await page.getByText("What the columns mean").click();

  // The blocker's status follows its lock changes; once it is DONE the dependent is ready, with no event of its own.
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run, issueId: migration });
  await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run, issueId: migration });
  await expect.poll(() => waits("Run the backfill"), { timeout: 5000 }).toBe("waiting on “Write the migration” (IN_PROGRESS)");
  await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run, issueId: migration, outcome: "DONE" });
  await expect.poll(() => cell("Run the backfill", 0).innerText(), { timeout: 5000 }).toBe("OPEN");
  expect(await waits("Run the backfill")).toBe("");

  // A CANCELLED blocker will never be DONE: said, in the alarm colour.
  await co.board.ok(Ops.UpdateIssueDocument, { id: oldPlan, input: { status: "CANCELLED" } });
  await expect.poll(() => waits("Stuck on the old plan"), { timeout: 5000 }).toBe("waiting on “Old plan” (CANCELLED: never DONE)");
  expect(await row("Stuck on the old plan").locator("small.waits").getAttribute("class")).toContain("waits-cancelled");

  // A delay ends on time (the database's wake-up writes no event): the row is ready without any notice.
  await expect.poll(() => cell("In a moment", 0).innerText(), { timeout: 10_000 }).toBe("OPEN");
  expect(await waits("In a moment")).toBe("");
  expect(await cell("Later today", 0).innerText()).toBe("OPEN · waiting");
});

it("waiting: a delay ends by the server's clock, shown in the page's time zone, even on a page whose clock is two hours fast", async () => {
  const later = await dbInstant("1 hour");
  const earlier = await dbInstant("-1 minute");
  await co.board.ok(Ops.CreateIssueDocument, { input: { title: "Delayed an hour", notBefore: later, priority: "LOW" } });
  await co.board.ok(Ops.CreateIssueDocument, { input: { title: "Delay over", notBefore: earlier, priority: "LOW" } });
  const zone = "Asia/Kathmandu";
  const context = await browser.newContext({ timezoneId: zone });
  await context.clock.install({ time: Date.now() + 2 * 3600_000 });
  const other = await context.newPage();
  try {
    await other.goto(`${origin}/board`);
    await other.getByLabel("Board key").fill(co.board.token!);
    await other.getByRole("button", { name: "Sign in" }).click();
    await other.locator("#board[data-loaded]").waitFor();
    await other.getByLabel("Search").fill("Delay");
    const otherRow = (title: string) => other.locator("#issues-body tr", { has: other.getByRole("button", { name: title, exact: true }) });
    await expect.poll(() => otherRow("Delayed an hour").locator("td.status").innerText(), { timeout: 5000 }).toBe("OPEN · waiting");
    expect(await otherRow("Delayed an hour").locator("small.waits").innerText()).toBe(`waiting until ${hhmmss(later, zone)}`);
    expect(await otherRow("Delay over").locator("td.status").innerText()).toBe("OPEN");
    // The panel says the same instant, and that it is the server's.
    await otherRow("Delayed an hour").getByRole("button", { name: "Delayed an hour" }).click();
    await expect
      .poll(() => other.locator("#detail-fields").innerText())
      .toMatch(new RegExp(`Not before\\s+${hhmmss(later, zone)} \\(the server's clock, in your time zone\\)`));
  } finally {
    await context.close();
  }
});

it("issue panel: the parent as a link, sub-issues with their status, blockers with theirs; adds a dependency (by title or id) and removes one, refusing in words what cannot be", async () => {
  const agent = co.agents[0]!;
  const { createIssue: parent } = await co.board.ok(Ops.CreateIssueDocument, {
    input: { title: "Ship the billing page", assigneeAgentId: agent.id, priority: "LOW" },
  });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run, issueId: parent.id });
  const { createSubIssues } = await agent.client.ok(Ops.CreateSubIssuesDocument, {
    runId: run,
    parentId: parent.id,
    inputs: [
      { title: "Billing schema", assigneeAgentId: agent.id, priority: "LOW" },
      { title: "Billing screens", assigneeAgentId: agent.id, priority: "LOW" },
    ],
    parentWaits: true,
  });
  if (createSubIssues.__typename !== "SubIssuesCreated") throw new Error(createSubIssues.__typename);
  const [schema, screens] = createSubIssues.issues.map((i) => i.id) as [string, string];
  await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run, issueId: parent.id, outcome: "REQUEUE" });
  // Two edges made in one transaction: in either order.
  await expect
    .poll(() => waits("Ship the billing page"), { timeout: 5000 })
    .toMatch(/^waiting on (“Billing schema” \(OPEN\), “Billing screens” \(OPEN\)|“Billing screens” \(OPEN\), “Billing schema” \(OPEN\))$/);

  const dialog = page.getByRole("dialog");
  const blockers = dialog.locator("#detail-blockers");
  const subs = dialog.locator("#detail-subissues");
  const answer = dialog.locator("#dependency-answer");
  const addDependency = async (typed: string) => {
    await dialog.getByLabel("Wait on").fill(typed);
    await dialog.getByRole("button", { name: "Add dependency" }).click();
  };
  const edges = async (issueId: string) =>
    (await h.sql<{ blocked_by_id: string }>("SELECT blocked_by_id FROM issue_dependencies WHERE issue_id = $1 ORDER BY created_at", [issueId])).map(
      (r) => r.blocked_by_id,
    );

  await row("Ship the billing page").getByRole("button", { name: "Ship the billing page" }).click();
  await expect.poll(() => dialog.locator("#detail-parent").innerText()).toBe("None: a top-level issue.");
  await expect.poll(() => lines(blockers)).toEqual(["Billing schema OPEN Remove", "Billing screens OPEN Remove"]);
  expect(await lines(subs)).toEqual(["0 of 2 DONE", "Billing schema OPEN", "Billing screens OPEN"]);
  expect(await dialog.locator("#detail-ready").innerText()).toMatch(
    /^no: waiting on (“Billing schema” \(OPEN\), “Billing screens” \(OPEN\)|“Billing screens” \(OPEN\), “Billing schema” \(OPEN\))$/,
  );

  // A sub-issue's panel links back to its parent.
  await subs.getByRole("button", { name: "Billing schema" }).click();
  await expect.poll(() => dialog.locator("#detail-title").innerText()).toBe("Billing schema");
  await expect.poll(() => dialog.locator("#detail-parent").innerText()).toBe("Ship the billing page OPEN");
  await expect.poll(() => blockers.innerText()).toBe("Nothing: it waits on no other issue.");

  // What the page can tell before sending: an empty field, an issue that is not there, itself.
  await addDependency("");
  await expect.poll(() => answer.innerText()).toBe("Type the id of the issue to wait on, or pick one from the list.");
  await addDependency("No such issue");
  await expect.poll(() => answer.innerText()).toBe("Not added: no issue of this company has the id or title “No such issue”.");
  await addDependency(schema);
  await expect.poll(() => answer.innerText()).toBe("Not added: an issue cannot wait on itself.");
  expect(await edges(schema)).toEqual([]);

  // Added by title: the panel and the row say so at once.
  await addDependency("Billing screens");
  await expect.poll(() => answer.innerText()).toBe("“Billing schema” now waits on “Billing screens”: it is claimed only once “Billing screens” is DONE.");
  expect(await edges(schema)).toEqual([screens]);
  await expect.poll(() => blockers.innerText()).toMatch(/^Billing screens OPEN\s*Remove$/);
  await expect.poll(() => waits("Billing schema")).toBe("waiting on “Billing screens” (OPEN)");
  await addDependency(screens.slice(0, 8));
  await expect.poll(() => answer.innerText()).toBe("“Billing schema” already waits on “Billing screens”.");

  // A cycle: the server refuses it with the path (the shortest), which the panel says as a chain of issues.
  await blockers.getByRole("button", { name: "Billing screens", exact: true }).click();
  await expect.poll(() => dialog.locator("#detail-title").innerText()).toBe("Billing screens");
  await addDependency(parent.id);
  await expect
    .poll(() => answer.innerText())
    .toBe("Not added: “Ship the billing page” waits on “Billing screens”, so “Billing screens” waiting on “Ship the billing page” would close a cycle.");
  expect(await edges(screens)).toEqual([]);

  // Removed from the parent: confirmed, then gone from the panel, the row and the database.
  await dialog.locator("#detail-parent").getByRole("button", { name: "Ship the billing page" }).click();
  await expect.poll(() => dialog.locator("#detail-title").innerText()).toBe("Ship the billing page");
  await dialog.getByRole("button", { name: "Remove the dependency on “Billing schema”" }).click();
  await expect.poll(() => answer.innerText()).toBe("“Ship the billing page” no longer waits on “Billing schema”.");
  expect(asked.at(-1)).toMatch(/^Stop “Ship the billing page” waiting on “Billing schema”\?/);
  expect(await edges(parent.id)).toEqual([screens]);
  await expect.poll(() => blockers.innerText()).toMatch(/^Billing screens OPEN\s*Remove$/);
  await expect.poll(() => waits("Ship the billing page")).toBe("waiting on “Billing screens” (OPEN)");

  // The sub-issues' statuses are live: one DONE, and the parent ready once its last blocker is.
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run, issueId: screens });
  await agent.client.ok(Ops.AcquireExecutionDocument, { runId: run, issueId: screens });
  await agent.client.ok(Ops.ReleaseIssueDocument, { runId: run, issueId: screens, outcome: "DONE" });
  await expect.poll(() => lines(subs), { timeout: 5000 }).toEqual(["1 of 2 DONE", "Billing schema OPEN", "Billing screens DONE"]);
  await expect.poll(() => blockers.innerText()).toMatch(/^Billing screens DONE\s*Remove$/);
  expect(await dialog.locator("#detail-ready").innerText()).toBe("yes: an agent's claim may take it");
  await dialog.getByRole("button", { name: "Close" }).click();
  expect(await cell("Ship the billing page", 0).innerText()).toBe("OPEN");
});

it("issue panel: a longer cycle is said along its whole path, and a delay is cleared from the panel", async () => {
  const create = async (title: string, input: Partial<Ops.CreateIssueInput> = {}) =>
    (await co.board.ok(Ops.CreateIssueDocument, { input: { title, priority: "LOW", ...input } })).createIssue.id;
  const first = await create("Step one");
  const second = await create("Step two", { blockedBy: [first] });
  await create("Step three", { blockedBy: [second] });
  await create("Not before next week", { notBefore: await dbInstant("7 days") });
  const dialog = page.getByRole("dialog");
  await expect.poll(() => row("Step one").count(), { timeout: 5000 }).toBe(1);
  await row("Step one").getByRole("button", { name: "Step one" }).click();
  await dialog.getByLabel("Wait on").fill("Step three");
  await dialog.getByRole("button", { name: "Add dependency" }).click();
  await expect
    .poll(() => dialog.locator("#dependency-answer").innerText())
    .toBe("Not added: “Step three” waits on “Step two”, which waits on “Step one”, so “Step one” waiting on “Step three” would close a cycle.");
  await dialog.getByRole("button", { name: "Close" }).click();

  await expect.poll(() => cell("Not before next week", 0).innerText(), { timeout: 5000 }).toBe("OPEN · waiting");
  await row("Not before next week").getByRole("button", { name: "Not before next week" }).click();
  await dialog.getByRole("button", { name: "Clear the delay" }).click();
  await expect.poll(() => dialog.locator("#action-answer").innerText()).toBe("IssueUpdated: the issue is OPEN.");
  expect(asked.at(-1)).toBe("Clear this issue's delay? Agents may claim it now.");
  expect(await dialog.locator("#detail-fields").innerText()).toMatch(/Not before\s+no delay/);
  expect(await dialog.getByRole("button", { name: "Clear the delay" }).isVisible()).toBe(false);
  await dialog.getByRole("button", { name: "Close" }).click();
  expect(await cell("Not before next week", 0).innerText()).toBe("OPEN");
});

it("creates an issue with blocked by, not before, retry delay, max execution and an idempotency key; bad ones are named first, and the same key again creates nothing and says so", async () => {
  const count = async () => Number((await h.one<{ n: string }>("SELECT count(*) AS n FROM issues WHERE company_id = $1", [co.id])).n);
  const before = await count();
  await page.getByText("New issue", { exact: true }).click();
  const form = page.locator("#create-form");
  const said = page.locator("#create-answer");
  const submit = () => form.getByRole("button", { name: "Create issue" }).click();
  await form.getByLabel("Title (required)").fill("Made with a graph");
  await form.getByLabel("Priority").selectOption("MEDIUM");
  await form.getByLabel("Assignee").selectOption("");
  await form.getByLabel("Concurrency key").fill("");
  await form.getByLabel("Max attempts").fill("3");
  for (const [label, value, words] of [
    ["Blocked by", "zzzzzzzz", "Blocked by: no issue of this company has an id that starts with “zzzzzzzz”."],
    ["Blocked by", "", ""],
    ["Retry delay (s)", "86401", "Retry delay must be a whole number of seconds from 0 to 86,400 (a day)."],
    ["Retry delay (s)", "30", ""],
    ["Max execution (s)", "1.5", "Max execution must be a whole number of seconds from 1 to 604,800 (a week), or empty for no limit."],
    ["Max execution (s)", "600", ""],
  ] as const) {
    await form.getByLabel(label).fill(value);
    if (!words) continue;
    await submit();
    await expect.poll(() => said.innerText()).toBe(words);
  }
  expect(await count()).toBe(before);

  // Blocked by an issue (its id's first 8 characters), an hour from now in this page's time zone, with a key.
  await form.getByLabel("Blocked by").fill(`${issues.free.slice(0, 8)}, ${issues.free}`);
  const local = await page.evaluate(() => {
    const at = new Date(Date.now() + 3600_000);
    at.setMilliseconds(0);
    const pad = (n: number) => String(n).padStart(2, "0");
    return {
      iso: at.toISOString(),
      field: `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`,
      zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    };
  });
  await form.getByLabel("Not before").fill(local.field);
  await form.getByLabel("Idempotency key").fill("board-graph-1");
  await submit();
  await expect
    .poll(() => said.innerText())
    .toBe(`Created “Made with a graph” (OPEN, MEDIUM), waiting on “Nobody holds this” (OPEN); until ${hhmmss(local.iso, local.zone)}.`);
  const made = await h.one<{ id: string; not_before: Date; retry_delay_seconds: number; max_execution_seconds: number; idempotency_key: string }>(
    "SELECT id, not_before, retry_delay_seconds, max_execution_seconds, idempotency_key FROM issues WHERE title = $1",
    ["Made with a graph"],
  );
  expect(made).toMatchObject({ retry_delay_seconds: 30, max_execution_seconds: 600, idempotency_key: "board-graph-1" });
  expect(made.not_before.toISOString()).toBe(local.iso);
  expect((await h.sql("SELECT blocked_by_id FROM issue_dependencies WHERE issue_id = $1", [made.id])).map((r) => r.blocked_by_id)).toEqual([issues.free]);
  expect(await form.getByLabel("Idempotency key").inputValue()).toBe("");
  await expect.poll(() => cell("Made with a graph", 0).innerText()).toBe("OPEN · waiting");

  // The same key again: the server answers the issue it has, and the page says nothing was created.
  await form.getByLabel("Title (required)").fill("Made twice?");
  await form.getByLabel("Idempotency key").fill("board-graph-1");
  await submit();
  await expect.poll(() => said.innerText()).toBe("Nothing created: the issue with idempotency key “board-graph-1” exists already: “Made with a graph” (OPEN).");
  expect(await count()).toBe(before + 1);
  for (const label of ["Blocked by", "Not before", "Idempotency key", "Max execution (s)"]) await form.getByLabel(label).fill("");
  await form.getByLabel("Retry delay (s)").fill("0");
  await page.getByText("New issue", { exact: true }).click();
});

it("audit: waitingOnCancelled counts the OPEN issues that wait on a CANCELLED blocker, listed with links; removing the dependency brings it to 0; miscountedWaits is 0", async () => {
  const figure = (key: string) => page.locator(`[data-figure=${key}]`);
  await page.getByRole("tab", { name: "Audit" }).click();
  await figure("doubleClaims").waitFor();
  await expect.poll(() => page.locator("#audit-figures").innerText()).toMatch(/Waiting on a cancelled blocker\s+1\s/);
  expect(await figure("waitingOnCancelled").getAttribute("class")).toContain("figure-pending");
  expect(await figure("waitingOnCancelled").innerText()).toContain("Waiting on a cancelled blocker");
  expect(await figure("miscountedWaits").locator("strong").innerText()).toBe("0");
  expect(await figure("miscountedWaits").getAttribute("class")).toContain("figure-good");
  const stuck = page.locator("#audit-stuck");
  expect(await stuck.innerText()).toBe("Stuck on the old plan waits on “Old plan” (CANCELLED)");

  await stuck.getByRole("button", { name: "Stuck on the old plan" }).click();
  const dialog = page.getByRole("dialog");
  await expect
    .poll(() => dialog.locator("#detail-blockers").innerText())
    .toMatch(/^Old plan CANCELLED — it will never be DONE: this issue waits until the dependency is removed\s*Remove$/);
  await dialog.getByRole("button", { name: "Remove the dependency on “Old plan”" }).click();
  await expect.poll(() => dialog.locator("#dependency-answer").innerText()).toBe("“Stuck on the old plan” no longer waits on “Old plan”.");
  await dialog.getByRole("button", { name: "Close" }).click();
  await page.locator("#audit-refresh").click();
  await expect.poll(() => figure("waitingOnCancelled").locator("strong").innerText()).toBe("0");
  expect(await figure("waitingOnCancelled").getAttribute("class")).toContain("figure-good");
  expect(await page.locator("#audit-stuck-section").isVisible()).toBe(false);
  await page.getByRole("tab", { name: "Issues" }).click();
  expect(await cell("Stuck on the old plan", 0).innerText()).toBe("OPEN");
});

it("live: a dependency added and removed by another client, and sub-issues an agent makes, show as they commit; the board's own changes show at once even with no notice", async () => {
  const agent = co.agents[0]!;
  const { createIssues } = await co.board.ok(Ops.CreateIssuesDocument, {
    inputs: [
      { title: "Edited elsewhere", assigneeAgentId: agent.id, priority: "LOW" },
      { title: "Its new blocker", priority: "LOW" },
    ],
  });
  const [edited, blocker] = createIssues.map((i) => i.id) as [string, string];
  await expect.poll(() => cell("Edited elsewhere", 0).innerText(), { timeout: 5000 }).toBe("OPEN");
  await row("Edited elsewhere").getByRole("button", { name: "Edited elsewhere" }).click();
  const dialog = page.getByRole("dialog");
  await expect.poll(() => dialog.locator("#detail-blockers").innerText()).toBe("Nothing: it waits on no other issue.");

  // Another client (the API, not this page): no ledger event, an issuesChanged notice.
  expect((await co.board.ok(Ops.AddDependencyDocument, { issueId: edited, blockedById: blocker })).addDependency.__typename).toBe("DependencyAdded");
  await expect.poll(() => waits("Edited elsewhere"), { timeout: 5000 }).toBe("waiting on “Its new blocker” (OPEN)");
  await expect.poll(() => dialog.locator("#detail-blockers").innerText(), { timeout: 5000 }).toMatch(/^Its new blocker OPEN\s*Remove$/);
  expect((await co.board.ok(Ops.RemoveDependencyDocument, { issueId: edited, blockedById: blocker })).removeDependency.__typename).toBe("DependencyRemoved");
  await expect.poll(() => waits("Edited elsewhere"), { timeout: 5000 }).toBe("");
  await expect.poll(() => dialog.locator("#detail-blockers").innerText(), { timeout: 5000 }).toBe("Nothing: it waits on no other issue.");

  // Sub-issues made by the agent holding it appear in its open panel.
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run, issueId: edited });
  await agent.client.ok(Ops.CreateSubIssuesDocument, { runId: run, parentId: edited, inputs: [{ title: "Split off live", priority: "LOW" }] });
  await expect.poll(() => dialog.locator("#detail-subissues").innerText(), { timeout: 5000 }).toMatch(/^0 of 1 DONE\s+Split off live OPEN$/);
  await dialog.getByRole("button", { name: "Close" }).click();

  // A page that hears no issuesChanged notice at all (its stream refused): its own add and remove still show at once.
  const deaf = await browser.newPage();
  try {
    await deaf.route("**/graphql", (route) => ((route.request().postData() ?? "").includes("BoardIssuesChanged") ? route.abort() : route.fallback()));
    await deaf.goto(`${origin}/board`);
    await deaf.getByLabel("Board key").fill(co.board.token!);
    await deaf.getByRole("button", { name: "Sign in" }).click();
    await deaf.locator("#board[data-loaded]").waitFor({ timeout: 15_000 });
    await deaf.getByLabel("Search").fill("Its new blocker");
    await deaf.locator("#issues-body").getByRole("button", { name: "Its new blocker" }).click();
    const deafDialog = deaf.getByRole("dialog");
    await deafDialog.getByLabel("Wait on").fill("Split off live");
    await deafDialog.getByRole("button", { name: "Add dependency" }).click();
    await expect
      .poll(() => deafDialog.locator("#dependency-answer").innerText())
      .toBe("“Its new blocker” now waits on “Split off live”: it is claimed only once “Split off live” is DONE.");
    await expect.poll(() => deafDialog.locator("#detail-blockers").innerText()).toMatch(/^Split off live OPEN\s*Remove$/);
    await deafDialog.getByRole("button", { name: "Close" }).click();
    const deafWaits = deaf.locator("#issues-body tr", { has: deaf.getByRole("button", { name: "Its new blocker", exact: true }) }).locator("small.waits");
    await expect.poll(() => deafWaits.innerText()).toBe("waiting on “Split off live” (OPEN)");
  } finally {
    await deaf.close();
  }
});

it("ledger retention: after a drop past which history was pruned, it reloads (not retrying the same afterSeq), says so, and stays live; the issue panel shows the pruned part", async () => {
  const agent = co.agents[0]!;
  const { createIssue: pruned } = await co.board.ok(Ops.CreateIssueDocument, {
    input: { title: "Claimed while pruned", assigneeAgentId: agent.id, priority: "LOW" },
  });
  await expect.poll(() => cell("Claimed while pruned", 0).innerText(), { timeout: 5000 }).toBe("OPEN");
  // Every subscription the page opens to the lock stream, with the afterSeq it asks for.
  const liveAsks: string[] = [];
  const onRequest = (request: import("playwright-core").Request) => {
    const body = request.postData() ?? "";
    if (body.includes("BoardLive")) liveAsks.push(String((JSON.parse(body) as { variables: { afterSeq: string } }).variables.afterSeq));
  };
  page.on("request", onRequest);
  try {
    // (a reconnect's ask may be sent while the proxy holds it, before the pruning: count from the cut)
    const asked = liveAsks.length;
    proxy.paused = true;
    proxy.cut();
    await expect.poll(() => page.locator("#live").innerText()).toContain("Reconnecting");
    // While the board is cut off, the issue is claimed and retention drops that event and all before it.
    await agent.client.ok(Ops.ClaimIssueDocument, { runId, issueId: pruned.id });
    await h.settled(co.id);
    const through = (await h.ledgerSeqs(co.id)).at(-1)!;
    await h.sql("DELETE FROM lock_events WHERE company_id = $1 AND seq <= $2", [co.id, through]);
    await h.sql("INSERT INTO lock_events_pruned (company_id, through_seq) VALUES ($1, $2)", [co.id, through]);
    proxy.paused = false;

    // The notice, the claim it could only learn by reading the issues again, and live again.
    await expect.poll(() => page.locator("#notice").isVisible(), { timeout: 15_000 }).toBe(true);
    expect(await page.locator("#notice-text").innerText()).toBe(
      `Events up to #${through} were pruned by retention before the board had read them; the board reloaded.`,
    );
    await expect.poll(() => cell("Claimed while pruned", 0).innerText(), { timeout: 15_000 }).toBe("CLAIMED");
    await expect.poll(() => page.locator("#live").innerText(), { timeout: 15_000 }).toBe("Live");
    // It asked from its old place (refused), then once from past the pruned history, and not from the old place again.
    const after = liveAsks.slice(asked);
    const lastOld = after.findLastIndex((seq) => BigInt(seq) < BigInt(through));
    expect(lastOld).toBeGreaterThanOrEqual(0);
    expect(after.slice(lastOld + 1)).toEqual([through]);

    // Still live: a change after the pruning arrives as it commits, on the same subscription.
    const opened = liveAsks.length;
    const { acquireExecution } = await agent.client.ok(Ops.AcquireExecutionDocument, { runId, issueId: pruned.id });
    expect(acquireExecution.__typename).toBe("ExecutionAcquired");
    await expect.poll(() => cell("Claimed while pruned", 0).innerText(), { timeout: 5000 }).toBe("IN_PROGRESS");
    expect(liveAsks.length).toBe(opened);
  } finally {
    page.off("request", onRequest);
  }

  // The issue's panel: the pruned part said as such, then what is kept; no error.
  await row("Claimed while pruned").getByRole("button").click();
  const dialog = page.getByRole("dialog");
  await expect.poll(() => dialog.locator("#detail-history li").count(), { timeout: 5000 }).toBe(2);
  expect(await dialog.locator("#detail-history li").first().innerText()).toMatch(
    /^Events up to #\d+ were pruned by retention: any earlier events of this issue are no longer kept\.$/,
  );
  expect(await dialog.locator("#detail-history li").nth(1).innerText()).toContain("EXECUTION_ACQUIRED → IN_PROGRESS");
  expect(await dialog.locator("#action-answer").innerText()).toBe("");
  await dialog.getByRole("button", { name: "Close" }).click();
  // An issue younger than anything pruned has its whole history: no such line.
  const { createIssue: young } = await co.board.ok(Ops.CreateIssueDocument, {
    input: { title: "Born after the pruning", assigneeAgentId: agent.id, priority: "LOW" },
  });
  await agent.client.ok(Ops.ClaimIssueDocument, { runId, issueId: young.id });
  await expect.poll(() => cell("Born after the pruning", 0).innerText(), { timeout: 5000 }).toBe("CLAIMED");
  await row("Born after the pruning").getByRole("button").click();
  await expect.poll(() => dialog.locator("#detail-history").innerText(), { timeout: 5000 }).toContain("CLAIMED → CLAIMED");
  expect(await dialog.locator("#detail-history li.pruned").count()).toBe(0);
  await dialog.getByRole("button", { name: "Close" }).click();
});

it("ledger retention: a company whose every event was pruned loads, goes live with no notice, and shows changes as they commit", async () => {
  const quiet = await createCompany(h, 1);
  const agent = quiet.agents[0]!;
  const { createIssue } = await quiet.board.ok(Ops.CreateIssueDocument, { input: { title: "Quiet one", assigneeAgentId: agent.id, priority: "LOW" } });
  const quietRun = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: quietRun, issueId: createIssue.id });
  await h.settled(quiet.id);
  const through = (await h.ledgerSeqs(quiet.id)).at(-1)!;
  await h.sql("DELETE FROM lock_events WHERE company_id = $1", [quiet.id]);
  await h.sql("INSERT INTO lock_events_pruned (company_id, through_seq) VALUES ($1, $2)", [quiet.id, through]);
  const other = await browser.newPage();
  try {
    await other.goto(`${origin}/board`);
    await other.getByLabel("Board key").fill(quiet.board.token!);
    await other.getByRole("button", { name: "Sign in" }).click();
    await other.locator("#board[data-loaded='1']").waitFor();
    await expect.poll(() => other.locator("#live").innerText(), { timeout: 15_000 }).toBe("Live");
    await agent.client.ok(Ops.AcquireExecutionDocument, { runId: quietRun, issueId: createIssue.id });
    const quietCell = other
      .locator("#issues-body tr", { has: other.getByRole("button", { name: "Quiet one", exact: true }) })
      .locator("td:not(.select)")
      .nth(0);
    await expect.poll(() => quietCell.innerText(), { timeout: 5000 }).toBe("IN_PROGRESS");
    expect(await other.locator("#notice").isVisible()).toBe(false);
    expect(await other.locator("#live").innerText()).toBe("Live");
  } finally {
    await other.close();
  }
});

it("a restored ledger: a live stream refused with SEQ_AHEAD reloads from now, says so, and stays live", async () => {
  const restored = await createCompany(h, 1);
  const agent = restored.agents[0]!;
  const { createIssue } = await restored.board.ok(Ops.CreateIssueDocument, { input: { title: "After a restore", assigneeAgentId: agent.id, priority: "LOW" } });
  const restoredRun = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
  const ahead = (BigInt((await h.one<{ c: string }>("SELECT baton_event_ceiling()::text AS c")).c) + (1000n << 20n)).toString();
  const other = await browser.newPage();
  // Every ask of the lock stream, with its afterSeq; once armed, the next one asks after `ahead`,
  // as a board does whose place the server's database no longer has.
  const asks: string[] = [];
  let armed = false;
  await other.route("**/graphql", async (route) => {
    const body = route.request().postData() ?? "";
    if (!body.includes("BoardLive")) return route.continue();
    const parsed = JSON.parse(body) as { variables: { afterSeq: string } };
    if (armed) {
      armed = false;
      parsed.variables.afterSeq = ahead;
    }
    asks.push(String(parsed.variables.afterSeq));
    return route.continue({ postData: JSON.stringify(parsed) });
  });
  try {
    await other.goto(`${origin}/board`);
    await other.getByLabel("Board key").fill(restored.board.token!);
    await other.getByRole("button", { name: "Sign in" }).click();
    await other.locator("#board[data-loaded='1']").waitFor();
    await expect.poll(() => other.locator("#live").innerText(), { timeout: 15_000 }).toBe("Live");
    armed = true;
    proxy.cut();
    await expect.poll(() => other.locator("#notice").isVisible(), { timeout: 15_000 }).toBe(true);
    expect(await other.locator("#notice-text").innerText()).toBe(
      "The server's ledger is behind what the board had read (its database was restored or failed over); the board reloaded from now.",
    );
    await expect.poll(() => other.locator("#live").innerText(), { timeout: 15_000 }).toBe("Live");
    const refusedAt = asks.indexOf(ahead);
    expect(refusedAt).toBeGreaterThanOrEqual(0);
    expect(asks.slice(refusedAt + 1).length).toBeGreaterThan(0);
    // Live from now: a claim committed after the reload arrives as it commits.
    await agent.client.ok(Ops.ClaimIssueDocument, { runId: restoredRun, issueId: createIssue.id });
    const restoredCell = other
      .locator("#issues-body tr", { has: other.getByRole("button", { name: "After a restore", exact: true }) })
      .locator("td:not(.select)")
      .nth(0);
    await expect.poll(() => restoredCell.innerText(), { timeout: 5000 }).toBe("CLAIMED");
  } finally {
    await other.close();
  }
});

it("agents: rotates an agent's key from the page, shown once with a copy button; the new key works, the old one is refused, and the page keeps it nowhere", async () => {
  const agent = co.agents[0]!;
  const oldKey = agent.client.token!;
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin });
  await page.getByRole("tab", { name: "Agents" }).click();
  await expect.poll(() => agentRow(agent.id).locator(".agent-state").innerText()).toBe("enabled");
  expect(await agentRow(co.agents[1]!.id).locator(".agent-state").innerText()).toBe("enabled");
  expect(await agentRow(agent.id).getByRole("button").allInnerTexts()).toEqual(["Rotate key", "Disable"]);

  await page.getByRole("button", { name: "Rotate key of Agent 1", exact: true }).click();
  const shown = page.getByRole("dialog", { name: "New key for Agent 1" });
  await shown.waitFor();
  expect(asked.at(-1)).toMatch(/^Rotate the key of Agent 1\?/);
  expect(await shown.innerText()).toContain("Shown once — copy it now.");
  const newKey = await shown.getByLabel("New key").inputValue();
  expect(newKey).toMatch(/^baton_agent_/);
  expect(newKey).not.toBe(oldKey);
  // Copy puts exactly the key on the clipboard.
  await shown.getByRole("button", { name: "Copy" }).click();
  await expect.poll(() => shown.locator("#key-copied").innerText()).toBe("Copied to the clipboard.");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(newKey);

  // The server: the new key is Agent 1's, the old one is refused.
  expect((await h.client(newKey).ok(Ops.MeDocument)).me).toMatchObject({ role: "AGENT", agentId: agent.id, companyId: co.id });
  expect(await whoami(oldKey)).toBe("UNAUTHENTICATED");
  expect(await page.locator("#agents-answer").innerText()).toBe("Agent 1 has a new key; its old one no longer works.");

  // Kept nowhere: gone from the page once the dialog closes, and never in storage, a cookie, the URL or the console.
  await shown.getByRole("button", { name: "Done" }).click();
  await expect.poll(() => page.locator("#key-dialog").isVisible()).toBe(false);
  expect(await page.locator("#new-key").inputValue()).toBe("");
  const kept = await page.evaluate(() =>
    JSON.stringify({
      session: { ...sessionStorage },
      local: { ...localStorage },
      cookie: document.cookie,
      url: location.href,
      html: document.documentElement.outerHTML,
    }),
  );
  expect(kept).not.toContain(newKey);
  expect(consoleLines.join("\n")).not.toContain(newKey);
  agent.client = h.client(newKey);
  await page.getByRole("tab", { name: "Issues" }).click();
});

it("agents: disabling asks for a reason, frees the agent's locks live and shows since when and why; enabling makes it enabled again, its old key still refused", async () => {
  const agent = co.agents[1]!;
  const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, { input: { title: "Held when disabled", assigneeAgentId: agent.id, priority: "LOW" } });
  const run = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
  await agent.client.ok(Ops.ClaimIssueDocument, { runId: run, issueId: createIssue.id });
  await expect.poll(() => cell("Held when disabled", 0).innerText(), { timeout: 5000 }).toBe("CLAIMED");

  await page.getByRole("tab", { name: "Agents" }).click();
  await page.getByRole("button", { name: "Disable Agent 2", exact: true }).click();
  const form = page.getByRole("dialog", { name: "Disable Agent 2" });
  await form.waitFor();
  // Without a reason nothing is asked or sent.
  const askedBefore = asked.length;
  await form.getByRole("button", { name: "Disable agent" }).click();
  await expect.poll(() => form.locator("#disable-answer").innerText()).toContain("A reason is required");
  expect(asked.length).toBe(askedBefore);
  expect(await h.one("SELECT disabled_at, disabled_reason FROM agents WHERE id = $1", [agent.id])).toEqual({ disabled_at: null, disabled_reason: null });

  const reason = "<b>Leaked its key</b> in a CI log";
  await form.getByLabel("Reason (required)").fill(reason);
  await form.getByRole("button", { name: "Disable agent" }).click();
  await expect.poll(() => page.locator("#agents-answer").innerText()).toBe("Agent 2 is disabled: its keys no longer work.");
  expect(asked.at(-1)).toMatch(/^Disable Agent 2\?/);
  expect(asked.at(-1)).toContain(`Reason: ${reason}`);
  expect(await page.locator("#disable-dialog").isVisible()).toBe(false);
  const state = agentRow(agent.id).locator(".agent-state");
  await expect.poll(() => state.innerText()).toMatch(/^disabled since \S.* · <b>Leaked its key<\/b> in a CI log$/);
  expect(await agentRow(agent.id).getAttribute("class")).toContain("agent-disabled");
  expect(await agentRow(agent.id).locator("b").count()).toBe(0);
  expect(await agentRow(agent.id).getByRole("button").allInnerTexts()).toEqual(["Enable"]);
  const disabled = await h.one<{ disabled_at: Date | null; disabled_reason: string | null }>("SELECT disabled_at, disabled_reason FROM agents WHERE id = $1", [
    agent.id,
  ]);
  expect(disabled.disabled_reason).toBe(reason);
  expect(disabled.disabled_at).toBeInstanceOf(Date);
  expect(await whoami(agent.client.token!)).toBe("UNAUTHENTICATED");
  // Its run was finished and its lock taken back in the same transaction: the page shows the issue OPEN again, live.
  await page.getByRole("tab", { name: "Issues" }).click();
  await expect.poll(() => cell("Held when disabled", 0).innerText(), { timeout: 5000 }).toBe("OPEN");
  expect(await cell("Held when disabled", 5).innerText()).toBe("");

  await page.getByRole("tab", { name: "Agents" }).click();
  await page.getByRole("button", { name: "Enable Agent 2", exact: true }).click();
  await expect.poll(() => page.locator("#agents-answer").innerText()).toBe("Agent 2 is enabled: “Rotate key” gives it a key.");
  expect(asked.at(-1)).toMatch(/^Enable Agent 2\?/);
  await expect.poll(() => state.innerText()).toBe("enabled");
  expect(await agentRow(agent.id).getByRole("button").allInnerTexts()).toEqual(["Rotate key", "Disable"]);
  expect(await h.one("SELECT disabled_at, disabled_reason FROM agents WHERE id = $1", [agent.id])).toEqual({ disabled_at: null, disabled_reason: null });
  expect(await whoami(agent.client.token!)).toBe("UNAUTHENTICATED");
  await page.getByRole("tab", { name: "Issues" }).click();
});

it("rotates the board key from the page: the page switches to the new key and stays live, the old key is refused, and another board signed in with it signs out saying why", async () => {
  const oldKey = co.board.token!;
  // Another board signed in with the same key (another tab), loaded and live.
  const other = await browser.newPage();
  /** The subscriptions this page opens from now on, with the key each carries. */
  const streams: { op: string; authorization: string }[] = [];
  const onRequest = (request: import("playwright-core").Request) => {
    const op = /subscription (\w+)/.exec(request.postData() ?? "")?.[1];
    if (op) void request.allHeaders().then((headers) => streams.push({ op, authorization: headers.authorization ?? "" }));
  };
  try {
    await other.goto(`${origin}/board`);
    await other.getByLabel("Board key").fill(oldKey);
    await other.getByRole("button", { name: "Sign in" }).click();
    await other.locator("#board[data-loaded]").waitFor();
    await expect.poll(() => other.locator("#live").innerText(), { timeout: 15_000 }).toBe("Live");

    page.on("request", onRequest);
    // The server ends what the old key has open as the rotation commits, so the page may hear its streams
    // refused before the rotation's answer arrives. Made certain here: the answer is held back until both
    // of this page's streams with the old key have ended. The page must not take that for a sign-out.
    const oldStreams = new Set<string>();
    let streamsEnded = () => {};
    const ended = new Promise<void>((resolve) => (streamsEnded = resolve));
    const onEnd = (request: import("playwright-core").Request) => {
      const op = /subscription (\w+)/.exec(request.postData() ?? "")?.[1];
      if (!op) return;
      void request.allHeaders().then((headers) => {
        if (headers.authorization !== `Bearer ${oldKey}`) return;
        oldStreams.add(op);
        if (oldStreams.size === 2) streamsEnded();
      });
    };
    page.on("requestfinished", onEnd);
    page.on("requestfailed", onEnd);
    let heldBack = false;
    const holdAnswer = async (route: import("playwright-core").Route) => {
      if (!(route.request().postData() ?? "").includes("BoardRotateBoardKey")) return route.fallback();
      const response = await route.fetch();
      let deadline: ReturnType<typeof setTimeout> | undefined;
      heldBack = await Promise.race([ended.then(() => true), new Promise<boolean>((resolve) => (deadline = setTimeout(() => resolve(false), 10_000)))]);
      clearTimeout(deadline);
      await route.fulfill({ response });
    };
    await page.route("**/graphql", holdAnswer);
    await page.getByRole("tab", { name: "Agents" }).click();
    await page.getByRole("button", { name: "Rotate board key" }).click();
    const shown = page.getByRole("dialog", { name: "New board key" });
    await shown.waitFor();
    await page.unroute("**/graphql", holdAnswer);
    page.off("requestfinished", onEnd);
    page.off("requestfailed", onEnd);
    expect(heldBack).toBe(true);
    expect([...oldStreams].sort()).toEqual(["BoardIssuesChanged", "BoardLive"]);
    expect(asked.at(-1)).toMatch(/^Rotate the board key\?/);
    expect(asked.at(-1)).toContain("stops working everywhere");
    expect(asked.at(-1)).toContain("every other open board signed in with it");
    const newKey = await shown.getByLabel("New key").inputValue();
    expect(newKey).toMatch(/^baton_board_/);
    expect(await shown.innerText()).toContain("Shown once — copy it now.");
    expect(await shown.innerText()).toContain("This page now uses it.");

    // The server: the old key is refused, the new one is this company's board.
    expect(await whoami(oldKey)).toBe("UNAUTHENTICATED");
    expect((await h.client(newKey).ok(Ops.MeDocument)).me).toMatchObject({ role: "BOARD", companyId: co.id });
    // This page: its session (this tab's sessionStorage, as at sign-in) holds the new key, and both streams were opened again with it.
    expect(JSON.parse((await page.evaluate(() => sessionStorage.getItem("baton.board")))!)).toEqual({ token: newKey, companyId: co.id });
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    await expect
      .poll(() => [...new Set(streams.filter((s) => s.authorization === `Bearer ${newKey}`).map((s) => s.op))].sort(), { timeout: 5000 })
      .toEqual(["BoardIssuesChanged", "BoardLive"]);
    await shown.getByRole("button", { name: "Done" }).click();
    expect(await page.locator("#new-key").inputValue()).toBe("");
    expect(consoleLines.join("\n")).not.toContain(newKey);
    co.board = h.client(newKey);

    // Still live with the new key: an issue created, then claimed, after the rotation show as they commit, without a sign-in.
    const agent = co.agents[0]!;
    const { createIssue } = await co.board.ok(Ops.CreateIssueDocument, {
      input: { title: "After the board key rotation", assigneeAgentId: agent.id, priority: "LOW" },
    });
    await page.getByRole("tab", { name: "Issues" }).click();
    await expect.poll(() => cell("After the board key rotation", 0).innerText(), { timeout: 5000 }).toBe("OPEN");
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun.id;
    await agent.client.ok(Ops.ClaimIssueDocument, { runId: run, issueId: createIssue.id });
    await expect.poll(() => cell("After the board key rotation", 0).innerText(), { timeout: 5000 }).toBe("CLAIMED");
    expect(await page.locator("#live").innerText()).toBe("Live");
    expect(await page.locator("#sign-in-view").isVisible()).toBe(false);

    // The other board: signed out cleanly, saying its key was revoked or rotated, and its key forgotten.
    await expect.poll(() => other.locator("#sign-in-message").innerText(), { timeout: 15_000 }).toMatch(/^Signed out: .*revoked or rotated/);
    expect(await other.locator("#sign-in-view").isVisible()).toBe(true);
    expect(await other.evaluate(() => sessionStorage.getItem("baton.board"))).toBeNull();

    // This page, reloaded, is signed in by itself with the new key.
    await page.reload();
    await page.locator("#board[data-loaded]").waitFor();
    await expect.poll(() => page.locator("#live").innerText(), { timeout: 15_000 }).toBe("Live");
    expect(await page.locator("#sign-in-view").isVisible()).toBe(false);
  } finally {
    page.off("request", onRequest);
    await other.close();
  }
});

it("made no request outside the API's origin", () => {
  expect(external).toEqual([]);
});
