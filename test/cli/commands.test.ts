// The `baton` CLI's everyday surface against a real server (node
// dist/cli/main.js): setting up without curl (company create, agent create,
// agents), issue update and issue create --from, names beside ids in the
// tables, --help for every command, errors in our words, and what `baton work`
// says as it works.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createCompany, Ops } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { assignedIssues, spawnBaton, useCliServer } from "../helpers/cli.js";

const cli = useCliServer("baton-commands-");
const { baton, ok, refused, scratch, children } = cli;
let h: Harness;
beforeAll(() => {
  h = cli.h;
});
const ROOT = path.resolve(import.meta.dirname, "../..");

/** A table's rows as cells: columns are separated by two or more spaces. */
const rows = (out: string) =>
  out
    .trim()
    .split("\n")
    .map((l) => l.split(/ {2,}/));

const file = (name: string, lines: string[]) => {
  const at = path.join(scratch, name);
  writeFileSync(at, `${lines.join("\n")}\n`);
  return at;
};

const count = async (companyId: string) => (await h.one<{ n: number }>("SELECT count(*)::int AS n FROM issues WHERE company_id = $1", [companyId])).n;

describe("setting up from the CLI: company create, agent create, agents", () => {
  it("the admin creates a company (its id and board key, once), the board an agent (its id and key, once); agents lists it, disabled too", async () => {
    const company = baton(["company", "create", "Acme CLI"], ADMIN_TOKEN);
    expect(await company.exited).toBe(0);
    const [companyId, boardKey, end] = company.stdout().split("\n");
    expect(end).toBe("");
    expect(boardKey).toMatch(/^baton_board_[A-Za-z0-9_-]{43}$/);
    expect(company.stderr()).toMatch(/^baton: company "Acme CLI" created: its id, then its board key, shown once/);
    expect(company.stderr()).not.toContain(boardKey!);
    expect(JSON.parse(await ok(["whoami", "--json"], boardKey!))).toEqual({ role: "BOARD", companyId, agentId: null });

    const agent = baton(["agent", "create", "Worker 1"], boardKey!);
    expect(await agent.exited).toBe(0);
    const [agentId, agentKey] = agent.stdout().trim().split("\n");
    expect(agentKey).toMatch(/^baton_agent_[A-Za-z0-9_-]{43}$/);
    expect(JSON.parse(await ok(["whoami", "--json"], agentKey!))).toEqual({ role: "AGENT", companyId, agentId });
    const second = JSON.parse(await ok(["agent", "create", "Worker 2", "--json"], boardKey!)) as { agentId: string; name: string; apiKey: string };
    expect(second).toEqual({ agentId: expect.any(String), name: "Worker 2", apiKey: expect.stringMatching(/^baton_agent_/) });
    await ok(["agent", "disable", second.agentId, "--reason", "left the team"], boardKey!);

    expect(rows(await ok(["agents"], boardKey!))).toEqual([
      ["NAME", "ID", "STATE", "DISABLED REASON"],
      ["Worker 1", agentId, "enabled"],
      ["Worker 2", second.agentId, "disabled", "left the team"],
    ]);
    expect(rows(await ok(["agents", "--company", companyId!], ADMIN_TOKEN))).toHaveLength(3);
    expect(JSON.parse(await ok(["company", "create", "Beta", "--json"], ADMIN_TOKEN))).toEqual({
      companyId: expect.any(String),
      name: "Beta",
      boardKey: expect.stringMatching(/^baton_board_/),
    });

    // Who may not: a board key creates no company, an agent key no agent (exit 3); a name is required (exit 2).
    await refused(["company", "create", "Hostile"], boardKey!, 3, /^baton: FORBIDDEN: /);
    await refused(["agent", "create", "Sneaky"], agentKey!, 3, /^baton: FORBIDDEN: /);
    await refused(["agent", "create"], boardKey!, 2, /^baton: expected: baton agent create NAME/);
    expect((await h.one<{ n: number }>("SELECT count(*)::int AS n FROM agents WHERE company_id = $1", [companyId])).n).toBe(2);
  });
});

describe("issue update", () => {
  it("changes only the fields given; --max-attempts reopens an exhausted issue, and requeue's refusal names the command", async () => {
    const co = await createCompany(h, 2);
    const board = co.board.token!;
    const [id] = await assignedIssues(co, 1, { maxAttempts: 1 });
    // Its one attempt used and failed: ESCALATED.
    const run = (await co.agents[0]!.client.ok(Ops.StartRunDocument)).startRun;
    await co.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: id! });
    await co.agents[0]!.client.ok(Ops.AcquireExecutionDocument, { runId: run.id, issueId: id! });
    await co.agents[0]!.client.ok(Ops.ReleaseIssueDocument, { runId: run.id, issueId: id!, outcome: "FAILED", reason: "broke" });
    const requeue = baton(["issue", "requeue", id!], board);
    expect(await requeue.exited).toBe(1);
    expect(requeue.stderr()).toMatch(/^baton: InvalidTransition: issue \S+ has used 1 of 1 attempts: raise them \(baton issue update \S+ --max-attempts N\)/);

    const updated = rows(await ok(["issue", "update", id!, "--max-attempts", "3", "--priority", "critical", "--assignee", co.agents[1]!.id], board));
    expect(updated[1]).toEqual([id, "ESCALATED", "CRITICAL", "-", "1/3", "1", co.agents[1]!.name, "job 0"]);
    await ok(["issue", "requeue", id!], board);
    const after = JSON.parse(await ok(["issue", "update", id!, "--unassign", "--title", "renamed", "--key", "repo-z", "--json"], board)) as Record<
      string,
      unknown
    >;
    expect(after).toMatchObject({ status: "OPEN", priority: "CRITICAL", maxAttempts: 3, assigneeAgentId: null, title: "renamed", concurrencyKey: "repo-z" });
    expect(JSON.parse(await ok(["issue", "update", id!, "--no-key", "--description", "d", "--json"], board))).toMatchObject({ concurrencyKey: null });

    // Bad usage, checked before any request: nothing changes.
    const before = await h.one("SELECT * FROM issues WHERE id = $1", [id]);
    await refused(["issue", "update", id!], board, 2, /^baton: nothing to change: baton issue update ID /);
    await refused(["issue", "update", id!, "--max-attempts", "0"], board, 2, /^baton: --max-attempts must be a whole number from 1 to 100, not "0"/);
    await refused(["issue", "update", id!, "--priority", "urgent"], board, 2, /^baton: --priority "urgent" is not one of CRITICAL, HIGH, MEDIUM, LOW/);
    await refused(["issue", "update", id!, "--assignee", co.agents[0]!.id, "--unassign"], board, 2, /^baton: --assignee and --unassign contradict/);
    expect(await h.one("SELECT * FROM issues WHERE id = $1", [id])).toEqual(before);
  });
});

describe("issue create --from FILE", () => {
  it("1,001 lines: two createIssues calls, every issue created with its fields; stdin with -", async () => {
    const co = await createCompany(h, 1);
    const lines = Array.from({ length: 1001 }, (_, i) => JSON.stringify({ title: `bulk ${i}`, priority: i === 0 ? "high" : "LOW" }));
    lines.splice(500, 0, ""); // a blank line is skipped
    const out = await ok(["issue", "create", "--from", file("bulk.jsonl", lines)], co.board.token!);
    expect(out).toBe("created 1001 issues (2 createIssues calls)\n");
    expect(await count(co.id)).toBe(1001);
    expect(await h.one("SELECT priority FROM issues WHERE company_id = $1 AND title = 'bulk 0'", [co.id])).toEqual({ priority: "HIGH" });

    const piped = spawn(process.execPath, ["dist/cli/main.js", "issue", "create", "--from", "-", "--json"], {
      cwd: ROOT,
      env: { ...process.env, BATON_URL: h.url, BATON_TOKEN: co.board.token! },
      stdio: ["pipe", "pipe", "pipe"],
    });
    children.push(piped);
    let stdout = "";
    piped.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    piped.stdin.end(`${JSON.stringify({ title: "from stdin", assigneeAgentId: co.agents[0]!.id, concurrencyKey: "k", maxAttempts: 5 })}\n`);
    expect(await new Promise((resolve) => piped.once("exit", resolve))).toBe(0);
    expect(JSON.parse(stdout)).toEqual([
      expect.objectContaining({ title: "from stdin", assigneeAgentId: co.agents[0]!.id, concurrencyKey: "k", maxAttempts: 5 }),
    ]);
  });

  it.each([
    ["not JSON", '{"title": "a"', /line 3: not JSON/],
    ["not an object", '["a"]', /line 3: not a JSON object/],
    ["an unknown field", '{"titel": "a"}', /line 3: unknown field "titel" \(the fields are title, /],
    ["no title", '{"priority": "HIGH"}', /line 3: title must be a text that is not empty/],
    ["a bad priority", '{"title": "a", "priority": "urgent"}', /line 3: priority must be one of CRITICAL, HIGH, MEDIUM, LOW/],
    ["a bad maxAttempts", '{"title": "a", "maxAttempts": 0}', /line 3: maxAttempts must be a whole number from 1 to 100/],
  ])("a bad line (%s) past the first batch: one line naming it, exit 2, nothing created", async (_what, bad, line) => {
    const co = await createCompany(h, 0);
    const good = JSON.stringify({ title: "fine" });
    const lines = [good, good, bad, ...Array.from({ length: 1200 }, () => good)];
    await refused(["issue", "create", "--from", file(`bad-${_what.replaceAll(" ", "-")}.jsonl`, lines)], co.board.token!, 2, line);
    expect(await count(co.id)).toBe(0);
  });

  it("a line the server refuses (another company's agent) names its line; a missing file says so", async () => {
    const co = await createCompany(h, 0);
    const other = await createCompany(h, 1);
    const lines = [JSON.stringify({ title: "a" }), JSON.stringify({ title: "b", assigneeAgentId: other.agents[0]!.id })];
    await refused(
      ["issue", "create", "--from", file("foreign.jsonl", lines)],
      co.board.token!,
      2,
      /^baton: \S+foreign\.jsonl, lines 1–2: .*no such agent.*; nothing was created/,
    );
    await refused(
      ["issue", "create", "--from", path.join(scratch, "missing.jsonl")],
      co.board.token!,
      2,
      /^baton: --from \S+missing\.jsonl: no such file; nothing was created/,
    );
    expect(await count(co.id)).toBe(0);
  });
});

describe("names beside ids: events, runs, issues", () => {
  it("events has a header and each issue's title and agent's name; runs the agent's name; --json keeps ids only", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    const [id] = await assignedIssues(co, 1, { title: "Fix the login page" });
    const run = (await agent.client.ok(Ops.StartRunDocument)).startRun;
    await agent.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: id! });
    await h.settled(co.id);
    const board = co.board.token!;
    const table = rows(await ok(["events"], board));
    expect(table[0]).toEqual(["SEQ", "AT", "KIND", "STATUS", "ISSUE", "TITLE", "AGENT", "REASON"]);
    expect(table[1]).toEqual([expect.stringMatching(/^\d+$/), expect.any(String), "CLAIMED", "CLAIMED", id, "Fix the login page", agent.name]);
    const json = JSON.parse((await ok(["events", "--json"], board)).trim()) as Record<string, unknown>;
    expect(Object.keys(json).sort()).toEqual(["agentId", "at", "issueId", "kind", "reason", "seq", "status"]);

    expect(rows(await ok(["runs"], board))).toEqual([
      ["ID", "AGENT", "AGENT ID", "STATUS", "LEASE LEFT"],
      [run.id, agent.name, agent.id, "RUNNING", expect.stringMatching(/^\d+ s$/)],
    ]);
    // An agent key may not list agents: its tables keep the ids.
    expect(rows(await ok(["runs"], agent.client.token!))[1]).toEqual([run.id, agent.id, "RUNNING", expect.stringMatching(/^\d+ s$/)]);
    expect(rows(await ok(["issues"], board))[1]).toEqual([id, "CLAIMED", "MEDIUM", "-", "0/3", "1", agent.name, "Fix the login page"]);
  });
});

describe("--help for every command and subcommand", () => {
  it("each says what it does and lists its options; work's names the exit codes, the environment, --once and how to stop it", async () => {
    const top = await ok(["--help"], null);
    for (const name of ["company create", "agent create", "agents", "issue update", "issue create", "events", "work"]) expect(top).toContain(`  ${name} `);
    const work = await ok(["work", "--help"], null);
    for (const text of [
      /^Usage: baton work /,
      /--concurrency N +issues run at once, 1 to 1000 \(default 1\)/,
      /--drain-timeout S .*\(default 30\)/,
      /--once +drain: stop once nothing is claimable .*graphile-worker's --once/,
      /^ {2}0 +DONE$/m,
      /^ {2}75 +REQUEUE/m,
      /^ {2}other +FAILED/m,
      /BATON_ISSUE_ID/,
      /BATON_LOCK_EPOCH/,
      /BATON_ISSUE_CONCURRENCY_KEY/,
      /never BATON_TOKEN/,
      /Ctrl-C .* A second Ctrl-C stops the commands at once/s,
    ]) {
      expect(work).toMatch(text);
    }
    expect(await ok(["issue", "update", "--help"], null)).toMatch(/^Usage: baton issue update ID [\s\S]*--max-attempts N +1 to 100/);
    expect(await ok(["help", "issue", "create"], null)).toMatch(/--from FILE +one CreateIssueInput per line/);
    expect(await ok(["issue", "--help"], null)).toMatch(/baton issue update ID/);
    expect(await ok(["events", "--help"], null)).toMatch(/--follow +after the history/);
    expect(await ok(["agents", "-h"], null)).toMatch(/--company ID +the company to read \(default: the token's own/);
  });
});

describe("errors in our words, checked before any request", () => {
  it("a misspelled status, a bad --limit, a missing value, an unexpected argument", async () => {
    // No server: each is refused before any request (one would be exit 4).
    const offline = (args: string[]) => {
      const ran = spawnBaton("http://127.0.0.1:9/graphql", args, "token");
      children.push(ran.child);
      return ran;
    };
    for (const [args, line] of [
      [["issues", "--status", "OPNE"], /^baton: --status "OPNE" is not one of BACKLOG, OPEN, CLAIMED, IN_PROGRESS, BLOCKED, DONE, CANCELLED, ESCALATED/],
      [["runs", "--status", "open"], /^baton: --status "open" is not one of RUNNING, SUCCEEDED, FAILED, CANCELLED, TIMED_OUT/],
      [["issues", "--limit", "ten"], /^baton: --limit must be a whole number from 1 to 1000000, not "ten"/],
      [["issues", "--limit"], /^baton: --limit needs a value \(baton issues --help\)$/],
      [["issue", "create", "--title", "t", "--priority", "urgent"], /^baton: --priority "urgent" is not one of CRITICAL, HIGH, MEDIUM, LOW/],
      [["work", "--once", "extra", "--", "true"], /^baton: unexpected argument 'extra': expected baton work /],
      [["work", "--concurrency", "0", "--", "true"], /^baton: --concurrency must be a whole number from 1 to 1000, not "0"/],
    ] as const) {
      const run = offline([...args]);
      expect(await run.exited, run.stderr()).toBe(2);
      expect(run.stderr().trim().split("\n")).toEqual([expect.stringMatching(line)]);
      expect(run.stderr()).not.toMatch(/Variable|ERR_PARSE|To specify a positional/);
    }
  });

  it("work with a board key: exit 3, the agent key it needs and how to make one; nothing claimed", async () => {
    const co = await createCompany(h, 1);
    const ids = await assignedIssues(co, 1);
    await refused(
      ["work", "--once", "--", "true"],
      co.board.token!,
      3,
      /^baton: baton work needs an agent key, and this is a board key: `baton agent create NAME` with the board key makes an agent and prints its key$/,
    );
    expect(await h.one("SELECT status FROM issues WHERE id = $1", [ids[0]])).toEqual({ status: "OPEN" });
  });
});

describe("baton work says what it did", () => {
  it("one readable line per issue (outcome, time, title, id, the reason when not DONE) and a summary", async () => {
    const co = await createCompany(h, 1);
    const [failing] = await assignedIssues(co, 1, { title: "breaks", priority: "CRITICAL" });
    const [requeued] = await assignedIssues(co, 1, { title: "later", priority: "HIGH" });
    const [done] = await assignedIssues(co, 1, { title: "Fix the login page" });
    const command = ["sh", "-c", `case "$BATON_ISSUE_TITLE" in breaks) echo "disk full" >&2; exit 3;; later) exit 75;; esac`];
    const worker = baton(["work", "--once", "--", ...command], co.agents[0]!.client.token!);
    expect(await worker.exited).toBe(0);
    // COMMAND's own stderr passes through, between baton's lines.
    const lines = worker
      .stderr()
      .trim()
      .split("\n")
      .filter((l) => l !== "disk full");
    const lineOf = (id: string) => lines.find((l) => l.includes(`[${id}]`));
    expect(lineOf(failing!)).toMatch(new RegExp(`^baton: FAILED +\\d+\\.\\d s {2}breaks \\[${failing}\\]: exit 3: disk full$`));
    expect(lineOf(done!)).toMatch(new RegExp(`^baton: DONE +\\d+\\.\\d s {2}Fix the login page \\[${done}\\]$`));
    // Requeued until its attempts ran out: a line each time.
    expect(lines.filter((l) => l.includes(`[${requeued}]`))).toEqual(Array(3).fill(expect.stringMatching(/^baton: REQUEUE .* later \[\S+\]: exit 75$/)));
    expect(lines.filter((l) => l.includes(`[${failing}]`))).toHaveLength(3); // FAILED with attempts left is OPEN again
    expect(lines.at(-1)).toMatch(/^baton: 1 done, 3 requeued, 3 failed, 0 blocked in \d+\.\d s$/);
    expect(lines).toHaveLength(8);
  });

  it("--json: one JSON object per line on stderr, the issue's and the summary's", async () => {
    const co = await createCompany(h, 1);
    const [id] = await assignedIssues(co, 1, { title: "quick" });
    const worker = baton(["work", "--once", "--json", "--", "true"], co.agents[0]!.client.token!);
    expect(await worker.exited).toBe(0);
    const events = worker
      .stderr()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(events.find((e) => e.event === "issue")).toEqual({
      event: "issue",
      outcome: "DONE",
      issueId: id,
      title: "quick",
      seconds: expect.any(Number),
      reason: null,
    });
    expect(events.at(-1)).toEqual({ event: "summary", done: 1, requeued: 0, failed: 0, blocked: 0, lost: 0, seconds: expect.any(Number) });
  });
});
