// The `baton` CLI as users run it (node dist/cli/main.js, what `npx baton`
// runs), against a real server: its exit codes, its commands, and
// `baton work -- COMMAND` turning a shell command into a worker.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweep } from "../../src/locks/recovery/sweep.js";
import { ADMIN_TOKEN, claimingAgent, createCompany, Ops, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";
import { assignedIssues, killGroups, spawnBaton } from "../helpers/cli.js";
import type { Ran } from "../helpers/cli.js";

let h: Harness;
const scratch = mkdtempSync(path.join(tmpdir(), "baton-cli-"));
const children: ChildProcess[] = [];

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  killGroups(children.map((c) => c.pid!)); // the CLI and any command it started
  rmSync(scratch, { recursive: true, force: true });
  await h?.close();
});

function baton(args: string[], token: string | null, env: Record<string, string> = {}): Ran {
  const ran = spawnBaton(h.url, args, token, { env });
  children.push(ran.child);
  return ran;
}

async function ok(args: string[], token: string | null): Promise<string> {
  const run = baton(args, token);
  const code = await run.exited;
  if (code !== 0) throw new Error(`baton ${args.join(" ")} exited ${code}: ${run.stderr()}`);
  return run.stdout();
}

const issues = assignedIssues;

const statusOf = async (id: string) => (await h.one<{ status: string }>("SELECT status FROM issues WHERE id = $1", [id])).status;

describe("usage and errors: one line, the documented exit code, never a stack", () => {
  it.each([
    ["an unknown command", ["frobnicate"], "token", 2, /unknown command 'frobnicate'/],
    ["an unknown flag", ["issues", "--colour"], "token", 2, /^baton: unknown option --colour \(baton issues --help lists the options\)$/],
    ["no token", ["whoami"], null, 3, /no token/],
    ["a wrong key", ["whoami"], `baton_agent_${"x".repeat(43)}`, 3, /UNAUTHENTICATED/],
    ["work without a command", ["work", "--once"], "token", 2, /no command to run/],
  ])("%s", async (_what, args, token, code, line) => {
    const run = baton(args as string[], token as string | null);
    expect(await run.exited).toBe(code);
    expect(run.stderr().trim().split("\n")).toEqual([expect.stringMatching(line as RegExp)]);
  });

  it("an unreachable server is exit 4", async () => {
    const run = baton(["whoami"], "token", { BATON_URL: "http://127.0.0.1:9/graphql" });
    expect(await run.exited).toBe(4);
    expect(run.stderr()).toMatch(/^baton: cannot reach http:\/\/127\.0\.0\.1:9\/graphql/);
    expect(run.stderr()).not.toMatch(/\n\s+at /);
  });
});

describe("commands", () => {
  it("whoami, issue create, issues, issue show, issue requeue and cancel, events, audit", async () => {
    const co = await createCompany(h, 1);
    const board = co.board.token!;
    expect(JSON.parse(await ok(["whoami", "--json"], board))).toMatchObject({ role: "BOARD", companyId: co.id });
    const created = JSON.parse(await ok(["issue", "create", "--title", "from the CLI", "--priority", "high", "--json"], board)) as {
      id: string;
      status: string;
    };
    expect(created).toMatchObject({ status: "OPEN", priority: "HIGH" });
    expect((await ok(["issues"], board)).split("\n")[1]).toContain(created.id);
    expect(JSON.parse(await ok(["issue", "show", created.id, "--json"], board))).toMatchObject({ id: created.id, title: "from the CLI" });
    const cancelled = baton(["issue", "cancel", created.id], board);
    expect(await cancelled.exited).toBe(0);
    const again = baton(["issue", "requeue", created.id], board); // CANCELLED → OPEN is not a board move: a Problem
    expect(await again.exited).toBe(1);
    expect(again.stderr()).toMatch(/^baton: InvalidTransition: /);
    const events = (await ok(["events", "--json"], board))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { kind: string; issueId: string });
    expect(events.at(-1)).toMatchObject({ kind: "STATUS_CHANGED", issueId: created.id });
    expect(await ok(["audit"], board)).toMatch(/doubleClaims\s+0/);
  });
});

describe("concurrency keys", () => {
  /** A table's rows as cells: columns are separated by two or more spaces. */
  const rows = (out: string) =>
    out
      .trim()
      .split("\n")
      .map((l) => l.split(/ {2,}/));

  it("issue create --key, a KEY column in issues (- for the unkeyed pool), limits and limit set/remove, clean refusals", async () => {
    const co = await createCompany(h, 1);
    const board = co.board.token!;
    const keyed = JSON.parse(await ok(["issue", "create", "--title", "keyed", "--key", "repo-a", "--assignee", co.agents[0]!.id, "--json"], board)) as {
      id: string;
      concurrencyKey: string | null;
    };
    expect(keyed.concurrencyKey).toBe("repo-a");
    const plain = JSON.parse(await ok(["issue", "create", "--title", "plain", "--json"], board)) as { id: string; concurrencyKey: string | null };
    expect(plain.concurrencyKey).toBeNull();
    const table = rows(await ok(["issues"], board));
    expect(table[0]).toEqual(["ID", "STATUS", "PRIORITY", "KEY", "ATTEMPTS", "EPOCH", "ASSIGNEE", "TITLE"]);
    expect(table.find((r) => r[0] === keyed.id)).toEqual([keyed.id, "OPEN", "MEDIUM", "repo-a", "0/3", "0", co.agents[0]!.name, "keyed"]);
    expect(table.find((r) => r[0] === plain.id)?.[3]).toBe("-");
    expect(JSON.parse(await ok(["issues", "--json"], board))).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: keyed.id, concurrencyKey: "repo-a" }),
        expect.objectContaining({ id: plain.id, concurrencyKey: null }),
      ]),
    );
    expect(await ok(["issue", "show", keyed.id], board)).toMatch(/^concurrencyKey\s+repo-a$/m);

    expect(rows(await ok(["limit", "set", "repo-a", "1"], board))).toEqual([
      ["KEY", "ACTIVE", "MAX", "STATE"],
      ["repo-a", "0", "1"],
    ]);
    const run = (await co.agents[0]!.client.ok(Ops.StartRunDocument)).startRun;
    expect((await co.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: keyed.id })).claimIssue.__typename).toBe("IssueClaimed");
    expect(rows(await ok(["limits"], board))).toEqual([
      ["KEY", "ACTIVE", "MAX", "STATE"],
      ["repo-a", "1", "1", "at limit"],
    ]);
    expect(JSON.parse(await ok(["limits", "--json"], board))).toEqual([{ key: "repo-a", maxActive: 1, active: 1 }]);
    expect(rows(await ok(["issues", "--status", "CLAIMED"], board))[1]).toEqual([
      keyed.id,
      "CLAIMED",
      "MEDIUM",
      "repo-a",
      "0/3",
      "1",
      co.agents[0]!.name,
      "keyed",
    ]);

    // Refusals: one line each, the documented exit code.
    const refusals = [
      [["limit", "set", "repo-a", "0"], board, 2, /^baton: N must be a whole number from 1 to 10000/],
      [["limit", "set", "repo-a"], board, 2, /^baton: expected: baton limit set KEY N/],
      [["limit", "raise", "repo-a"], board, 2, /^baton: limit raise: expected set or remove/],
      [["limit", "set", "repo-a", "2"], co.agents[0]!.client.token!, 3, /^baton: FORBIDDEN: /],
      [["issue", "create", "--title", "empty key", "--key", ""], board, 2, /^baton: .*must not be empty/],
    ] as const;
    const ran = refusals.map(([args, token]) => baton([...args], token));
    for (const [i, [, , code, line]] of refusals.entries()) {
      expect(await ran[i]!.exited).toBe(code);
      expect(ran[i]!.stderr().trim().split("\n")).toEqual([expect.stringMatching(line)]);
    }

    expect(JSON.parse(await ok(["limit", "remove", "repo-a", "--json"], board))).toEqual({ key: "repo-a", maxActive: null });
    expect(JSON.parse(await ok(["limits", "--json"], board))).toEqual([]);
    expect(await ok(["limits"], board)).toBe("KEY  ACTIVE  MAX  STATE\n");
  });

  it("baton work gives COMMAND the issue's key, on stdin and as BATON_ISSUE_CONCURRENCY_KEY", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issues(co, 1, { concurrencyKey: "repo-b" });
    const worker = baton(["work", "--once", "--", "sh", "-c", `echo "key=$BATON_ISSUE_CONCURRENCY_KEY"; cat`], co.agents[0]!.client.token, {
      BATON_ISSUE_CONCURRENCY_KEY: "inherited",
    });
    expect(await worker.exited).toBe(0);
    const [line, stdin] = worker.stdout().split("\n");
    expect(line).toBe("key=repo-b");
    expect(JSON.parse(stdin!)).toMatchObject({ id, concurrencyKey: "repo-b" });
  });
});

describe("baton work -- COMMAND", () => {
  it("two workers of concurrency 4 drain the queue: every issue's command runs once, every issue ends DONE, the audit is clean", async () => {
    const co = await createCompany(h, 1);
    const ids = await issues(co, 40);
    const ledger = path.join(scratch, "ran.txt");
    const command = ["sh", "-c", `echo "$BATON_ISSUE_ID $BATON_LOCK_EPOCH \${BATON_TOKEN:-no-token} $(cat | head -c 20)" >> ${ledger}`];
    const workers = [0, 1].map(() => baton(["work", "--once", "--concurrency", "4", "--", ...command], co.agents[0]!.client.token));
    expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0]);
    const ran = readFileSync(ledger, "utf8").trim().split("\n");
    expect(ran.map((l) => l.split(" ")[0]).sort()).toEqual([...ids].sort());
    expect(ran.every((l) => / 1 no-token \{"id":"/.test(l))).toBe(true); // epoch 1, never the token, and the issue on stdin
    for (const id of ids) expect(await statusOf(id)).toBe("DONE");
    expect(await baton(["audit"], co.board.token).exited).toBe(0);
  });

  it("exit 75 requeues, any other exit fails with the last lines of stderr as the reason", async () => {
    const co = await createCompany(h, 1);
    const [requeued] = await issues(co, 1, { maxAttempts: 1, priority: "CRITICAL" });
    const [failed] = await issues(co, 1, { maxAttempts: 1 });
    const command = ["sh", "-c", `if [ "$BATON_ISSUE_ID" = "${requeued}" ]; then exit 75; fi; echo "disk full" >&2; exit 3`];
    const worker = baton(["work", "--once", "--", ...command], co.agents[0]!.client.token);
    expect(await worker.exited).toBe(0);
    // With no attempt left, REQUEUE and FAILED both end ESCALATED: the reasons tell them apart.
    const reasons = await h.sql<{ issue_id: string; reason: string }>(
      "SELECT issue_id, reason FROM lock_events WHERE kind IN ('RELEASED', 'ESCALATED') AND reason IS NOT NULL AND issue_id = ANY($1)",
      [[requeued, failed]],
    );
    expect(reasons.find((r) => r.issue_id === requeued)?.reason).toMatch(/REQUEUE: exit 75/);
    expect(reasons.find((r) => r.issue_id === failed)?.reason).toMatch(/FAILED: exit 3: disk full/);
  });

  it("a force-release sends the running command SIGTERM, and the worker does not release the issue again", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issues(co, 1);
    const marker = path.join(scratch, "terminated.txt");
    // The first checkout (epoch 1) runs until stopped; the worker takes the issue again after the
    // force-release (it is OPEN), and that second command (epoch 2) is done at once.
    const command = [
      "sh",
      "-c",
      `[ "$BATON_LOCK_EPOCH" = 1 ] || exit 0; trap 'echo TERM > ${marker}; exit 143' TERM; echo started; while :; do sleep 0.05; done`,
    ];
    const worker = baton(["work", "--", ...command], co.agents[0]!.client.token);
    await eventually(() => (worker.stdout().includes("started") ? true : undefined), "the command to start", 20_000);
    expect((await co.board.ok(Ops.ForceReleaseDocument, { issueId: id!, reason: "the board takes it back" })).forceReleaseIssue.__typename).toBe(
      "IssueReleased",
    );
    await eventually(
      () => {
        try {
          return readFileSync(marker, "utf8").includes("TERM") ? true : undefined;
        } catch {
          return undefined;
        }
      },
      "the command to get SIGTERM",
      20_000,
    );
    await eventually(async () => ((await statusOf(id!)) === "DONE" ? true : undefined), "the second checkout to be done", 20_000);
    worker.child.kill("SIGTERM");
    expect(await worker.exited).toBe(0);
    // The first checkout ends with the board's FORCE_RELEASED alone: the worker released only the second.
    const kinds = await h.sql<{ kind: string }>("SELECT kind FROM lock_events WHERE issue_id = $1 ORDER BY seq", [id]);
    expect(kinds.map((k) => k.kind)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "FORCE_RELEASED", "CLAIMED", "EXECUTION_ACQUIRED", "RELEASED"]);
  });

  it("SIGTERM drains: the running command finishes and is released, the run is finished, exit 0", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issues(co, 1);
    const command = ["sh", "-c", `echo started; sleep 1; echo finished`];
    const worker = baton(["work", "--", ...command], co.agents[0]!.client.token);
    await eventually(() => (worker.stdout().includes("started") ? true : undefined), "the command to start", 20_000);
    worker.child.kill("SIGTERM");
    expect(await worker.exited).toBe(0);
    expect(worker.stdout()).toContain("finished");
    expect(await statusOf(id!)).toBe("DONE");
    const runs = await h.sql<{ status: string }>("SELECT status FROM heartbeat_runs WHERE agent_id = $1", [co.agents[0]!.id]);
    expect(runs.map((r) => r.status)).toEqual(["SUCCEEDED"]);
  });

  it("four workers on two API instances drain 500 issues: each command runs once, every issue DONE, the audit clean", async () => {
    const co = await createCompany(h, 1);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(...(await issues(co, 100)));
    const second = await h.startInstance();
    const ledger = path.join(scratch, "ran-500.txt");
    const command = ["sh", "-c", `echo "$BATON_ISSUE_ID" >> ${ledger}`];
    const workers = [h.url, h.url, second.url, second.url].map((url) =>
      baton(["work", "--once", "--concurrency", "4", "--", ...command], co.agents[0]!.client.token, { BATON_URL: url }),
    );
    expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0, 0, 0]);
    const ran = readFileSync(ledger, "utf8").trim().split("\n");
    expect(ran).toHaveLength(500);
    expect(new Set(ran)).toEqual(new Set(ids));
    const done = await h.one<{ n: number }>("SELECT count(*)::int AS n FROM issues WHERE id = ANY($1) AND status = 'DONE'", [ids]);
    expect(done.n).toBe(500);
    expect(await baton(["audit"], co.board.token).exited).toBe(0);
  }, 120_000);

  it("a worker killed with SIGKILL mid-command: after its lease and a sweep, another worker runs the issue (a second attempt); the first never releases it", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issues(co, 1);
    const first = baton(["work", "--", "sh", "-c", "echo started; exec sleep 30"], co.agents[0]!.client.token);
    await eventually(() => (first.stdout().includes("started") ? true : undefined), "the first command to start", 20_000);
    const firstRun = (await h.one<{ id: string }>("SELECT checkout_run_id AS id FROM issues WHERE id = $1", [id])).id;
    process.kill(-first.child.pid!, "SIGKILL"); // the worker dies (its watchdog then ends the command, in a group of its own)
    await first.exited;
    // Its lease runs out (backdated here rather than waited for), and recovery frees the issue.
    await h.sql("UPDATE heartbeat_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [firstRun]);
    await sweep(h.db.prisma, h.bus);
    const second = baton(["work", "--once", "--", "sh", "-c", "echo second"], co.agents[0]!.client.token);
    expect(await second.exited).toBe(0);
    expect(await h.one("SELECT status, attempt_count FROM issues WHERE id = $1", [id])).toEqual({ status: "DONE", attempt_count: 2 });
    const released = await h.sql<{ run_id: string }>("SELECT run_id FROM lock_events WHERE issue_id = $1 AND kind = 'RELEASED'", [id]);
    expect(released).toHaveLength(1);
    expect(released[0]!.run_id).not.toBe(firstRun);
  });

  it("SIGTERM with commands still running past --drain-timeout: they are stopped, their issues back to OPEN, the run finished, exit 0", async () => {
    const co = await createCompany(h, 1);
    const ids = await issues(co, 3);
    const worker = baton(["work", "--concurrency", "3", "--drain-timeout", "1", "--", "sh", "-c", "echo started; exec sleep 30"], co.agents[0]!.client.token);
    await eventually(() => (worker.stdout().split("started").length - 1 === 3 ? true : undefined), "three commands to start", 20_000);
    worker.child.kill("SIGTERM");
    expect(await worker.exited).toBe(0);
    const rows = await h.sql<{ status: string; checkout_run_id: string | null }>("SELECT status, checkout_run_id FROM issues WHERE id = ANY($1)", [ids]);
    expect(rows.map((r) => [r.status, r.checkout_run_id])).toEqual(Array(3).fill(["OPEN", null]));
    const runs = await h.sql<{ status: string }>("SELECT status FROM heartbeat_runs WHERE agent_id = $1", [co.agents[0]!.id]);
    expect(runs.map((r) => r.status)).toEqual(["SUCCEEDED"]);
  });

  it("events --follow tails the ledger live, one JSON object per line, and stops on SIGTERM", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issues(co, 1);
    const tail = baton(["events", "--follow", "--json"], co.board.token);
    const run = (await co.agents[0]!.client.ok(Ops.StartRunDocument)).startRun;
    await eventually(
      async () => {
        if (!tail.stdout().includes('"CLAIMED"')) await co.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: run.id, issueId: id! });
        return tail.stdout().includes('"CLAIMED"') ? true : undefined;
      },
      "the claim to be printed",
      20_000,
    );
    const lines = tail
      .stdout()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { seq: string; kind: string; issueId: string });
    expect(lines.find((l) => l.kind === "CLAIMED")).toMatchObject({ issueId: id });
    expect(new Set(lines.map((l) => l.seq)).size).toBe(lines.length);
    tail.child.kill("SIGTERM");
    expect(await tail.exited).toBe(0);
  });
});

describe("keys and agents: rotate-key, disable, enable", () => {
  const KEY = /^baton_agent_[A-Za-z0-9_-]{43}$/;
  const BOARD_KEY = /^baton_board_[A-Za-z0-9_-]{43}$/;
  /** One line on stderr, the documented exit code. */
  async function refused(args: string[], token: string | null, code: number, line: RegExp): Promise<void> {
    const run = baton(args, token);
    expect(await run.exited).toBe(code);
    expect(run.stderr().trim().split("\n")).toEqual([expect.stringMatching(line)]);
    expect(run.stdout()).toBe("");
  }

  it("agent rotate-key prints the new key alone on stdout (shown once, said on stderr): it works, the old key gets exit 3; --json is {apiKey}", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    const old = agent.client.token!;
    const run = baton(["agent", "rotate-key", agent.id], co.board.token);
    expect(await run.exited).toBe(0);
    const lines = run.stdout().split("\n");
    expect(lines).toEqual([expect.stringMatching(KEY), ""]);
    const fresh = lines[0]!;
    expect(run.stderr()).toMatch(/^baton: the new key for agent \S+, shown once: keep it now\. The key it replaces no longer works\.\n$/);
    expect(run.stderr()).not.toContain(fresh);
    expect(JSON.parse(await ok(["whoami", "--json"], fresh))).toEqual({ role: "AGENT", companyId: co.id, agentId: agent.id });
    await refused(["whoami"], old, 3, /^baton: UNAUTHENTICATED: /);

    const json = baton(["agent", "rotate-key", agent.id, "--json"], co.board.token);
    expect(await json.exited).toBe(0);
    const parsed = JSON.parse(json.stdout()) as { apiKey: string };
    expect(Object.keys(parsed)).toEqual(["apiKey"]);
    expect(parsed.apiKey).toMatch(KEY);
    expect(json.stderr()).toBe("");
    expect(json.stdout().trim().split("\n")).toHaveLength(1);
    expect(JSON.parse(await ok(["whoami", "--json"], parsed.apiKey))).toMatchObject({ agentId: agent.id });
    await refused(["whoami"], fresh, 3, /^baton: UNAUTHENTICATED: /); // the key before it stopped working

    // Who may not: an agent key (FORBIDDEN, 3), and bad usage (2).
    await refused(["agent", "rotate-key", agent.id], parsed.apiKey, 3, /^baton: FORBIDDEN: /);
    await refused(["agent", "rotate-key"], co.board.token, 2, /^baton: expected: baton agent rotate-key ID/);
    await refused(
      ["agent", "rekey", agent.id],
      co.board.token,
      2,
      /^baton: agent rekey: expected create, rotate-key, disable or enable \(baton agent --help\)$/,
    );
  });

  it("agent disable, then enable, then rotate-key: the agent printed each time; a disabled agent's key and rotation are refused", async () => {
    const co = await createCompany(h, 1);
    const agent = co.agents[0]!;
    const board = co.board.token!;
    await refused(["agent", "disable", agent.id], board, 2, /^baton: --reason is required/);

    const disabled = JSON.parse(await ok(["agent", "disable", agent.id, "--reason", "left the team", "--json"], board)) as Record<string, unknown>;
    expect(disabled).toMatchObject({ id: agent.id, companyId: co.id, name: agent.name, disabledReason: "left the team", disabledAt: expect.any(String) });
    expect(Date.parse(disabled.disabledAt as string)).not.toBeNaN();
    await refused(["whoami"], agent.client.token, 3, /^baton: UNAUTHENTICATED: /);
    // A disabled agent gets no key: the server's BAD_USER_INPUT, which the CLI reports as bad usage.
    await refused(["agent", "rotate-key", agent.id], board, 2, /^baton: .*disabled/);

    const enabled = await ok(["agent", "enable", agent.id], board);
    expect(enabled).toMatch(new RegExp(`^id\\s+${agent.id}$`, "m"));
    expect(enabled).toMatch(/^disabledAt\s*$/m);
    expect(enabled).toMatch(/^disabledReason\s*$/m);
    expect(JSON.parse(await ok(["agent", "enable", agent.id, "--json"], board))).toMatchObject({ id: agent.id, disabledAt: null, disabledReason: null });
    await refused(["whoami"], agent.client.token, 3, /^baton: UNAUTHENTICATED: /); // its old keys stay revoked

    const key = (await ok(["agent", "rotate-key", agent.id], board)).trim();
    expect(key).toMatch(KEY);
    expect(JSON.parse(await ok(["whoami", "--json"], key))).toMatchObject({ role: "AGENT", agentId: agent.id });
    // The human form of disable names the time and the reason.
    const again = await ok(["agent", "disable", agent.id, "--reason", "again"], board);
    expect(again).toMatch(/^disabledAt\s+\S+/m);
    expect(again).toMatch(/^disabledReason\s+again$/m);
  });

  it("another company's board key: agent disable, enable and rotate-key of this company's agent are NOT_FOUND (exit 1), and change nothing", async () => {
    const co = await createCompany(h, 1);
    const other = await createCompany(h, 0);
    const agent = co.agents[0]!;
    await refused(["agent", "disable", agent.id, "--reason", "hostile"], other.board.token, 1, /^baton: NOT_FOUND: /);
    await refused(["agent", "enable", agent.id], other.board.token, 1, /^baton: NOT_FOUND: /);
    await refused(["agent", "rotate-key", agent.id], other.board.token, 1, /^baton: NOT_FOUND: /);
    await refused(["agent", "disable", "00000000-0000-4000-8000-000000000000", "--reason", "nobody"], co.board.token, 1, /^baton: NOT_FOUND: /);
    expect(JSON.parse(await ok(["whoami", "--json"], agent.client.token))).toMatchObject({ role: "AGENT", agentId: agent.id });
    expect(await h.one("SELECT disabled_at FROM agents WHERE id = $1", [agent.id])).toEqual({ disabled_at: null });
  });

  it("board rotate-key: a board key rotates its own, the admin token names the company; the old key gets exit 3, a live events --follow with it exits 3", async () => {
    const co = await createCompany(h, 1);
    const old = co.board.token!;
    // A tail with the old key, live: it has printed a claim made after it started.
    const [id] = await issues(co, 1);
    const tail = baton(["events", "--follow", "--json"], old);
    const agentRun = (await co.agents[0]!.client.ok(Ops.StartRunDocument)).startRun;
    await eventually(
      async () => {
        if (!tail.stdout().includes('"CLAIMED"')) await co.agents[0]!.client.ok(Ops.ClaimIssueDocument, { runId: agentRun.id, issueId: id! });
        return tail.stdout().includes('"CLAIMED"') ? true : undefined;
      },
      "the claim to be printed",
      20_000,
    );
    const run = baton(["board", "rotate-key"], old);
    expect(await run.exited).toBe(0);
    const fresh = run.stdout().trim();
    expect(run.stdout()).toBe(`${fresh}\n`);
    expect(fresh).toMatch(BOARD_KEY);
    expect(run.stderr()).toMatch(/^baton: the new key for company \S+, shown once/);
    expect(JSON.parse(await ok(["whoami", "--json"], fresh))).toEqual({ role: "BOARD", companyId: co.id, agentId: null });
    await refused(["whoami"], old, 3, /^baton: UNAUTHENTICATED: /);
    // The tail opened with the old key ends: its stream ended UNAUTHENTICATED, which is final (no reconnecting).
    let timer: NodeJS.Timeout | undefined;
    expect(await Promise.race([tail.exited, new Promise((resolve) => (timer = setTimeout(() => resolve("still following after 10 s"), 10_000)))])).toBe(3);
    clearTimeout(timer);
    expect(tail.stderr().trim().split("\n")).toEqual([expect.stringMatching(/^baton: UNAUTHENTICATED: /)]);

    await refused(["board", "rotate-key"], ADMIN_TOKEN, 2, /^baton: the admin token belongs to no company: pass --company ID/);
    const json = baton(["board", "rotate-key", "--company", co.id, "--json"], ADMIN_TOKEN);
    expect(await json.exited).toBe(0);
    const parsed = JSON.parse(json.stdout()) as { apiKey: string };
    expect(Object.keys(parsed)).toEqual(["apiKey"]);
    expect(parsed.apiKey).toMatch(BOARD_KEY);
    expect(JSON.parse(await ok(["whoami", "--json"], parsed.apiKey))).toMatchObject({ role: "BOARD", companyId: co.id });
    await refused(["whoami"], fresh, 3, /^baton: UNAUTHENTICATED: /);
    await refused(["board", "rekey"], parsed.apiKey, 2, /^baton: board rekey: expected rotate-key/);
  });

  it("baton work: the agent disabled mid-command: COMMAND gets SIGTERM, baton waits for it, releases nothing and exits 3 with one line saying the key is no longer accepted", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issues(co, 1);
    const marker = path.join(scratch, "revoked.txt");
    const command = ["sh", "-c", `trap 'echo TERM >> ${marker}; sleep 0.3; echo EXIT >> ${marker}; exit 143' TERM; echo started; while :; do sleep 0.05; done`];
    const worker = baton(["work", "--", ...command], co.agents[0]!.client.token);
    await eventually(() => (worker.stdout().includes("started") ? true : undefined), "the command to start", 20_000);
    const disabled = await co.board.raw(`mutation($a: ID!) { disableAgent(agentId: $a, reason: "compromised") { disabledAt } }`, { a: co.agents[0]!.id });
    expect(disabled.errors).toBeUndefined();
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([worker.exited, new Promise((resolve) => (timer = setTimeout(() => resolve("still running after 15 s"), 15_000)))]);
    clearTimeout(timer);
    expect(code).toBe(3);
    // SIGTERM at once, and baton exited only once the command had (its trap takes 0.3 s).
    expect(readFileSync(marker, "utf8")).toBe("TERM\nEXIT\n");
    const stderr = worker.stderr().trim().split("\n");
    expect(stderr.at(-1)).toMatch(
      /^baton: UNAUTHENTICATED: the agent key is no longer accepted \(revoked: rotated, or its agent disabled\); the worker stopped$/,
    );
    expect(worker.stderr()).not.toMatch(/\n\s+at /);
    expect(worker.stderr()).not.toContain(co.agents[0]!.client.token!);
    // The disable took the issue back; baton released nothing.
    const kinds = await h.sql<{ kind: string; reason: string | null }>("SELECT kind, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq", [id]);
    expect(kinds.map((k) => `${k.kind}${k.reason ? ` ${k.reason}` : ""}`)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "RECOVERED AGENT_DISABLED"]);
  });
});

describe("ledger retention: history that was pruned", () => {
  /** Retention's work for a company: events through `throughSeq` dropped, and the mark readers are refused by. */
  async function prune(companyId: string, throughSeq: string): Promise<void> {
    await h.sql("DELETE FROM lock_events WHERE company_id = $1 AND seq <= $2", [companyId, throughSeq]);
    await h.sql(
      "INSERT INTO lock_events_pruned (company_id, through_seq) VALUES ($1, $2) ON CONFLICT (company_id) DO UPDATE SET through_seq = excluded.through_seq, pruned_at = now()",
      [companyId, throughSeq],
    );
  }
  const seqsOf = (out: string) =>
    out
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { seq: string }).seq);

  it("events --after-seq S in pruned history: one line naming the --after-seq that continues, exit 5; without --after-seq it starts at the oldest kept", async () => {
    const { co, claim } = await claimingAgent(h, 4);
    await claim(4);
    await h.settled(co.id);
    const seqs = await h.ledgerSeqs(co.id);
    await prune(co.id, seqs[1]!);
    const board = co.board.token!;
    const line = new RegExp(
      `^baton: EVENTS_PRUNED: history up to seq ${seqs[1]} was pruned by retention, so the events after seq ${seqs[0]} are no longer all kept; ` +
        `to continue with what is kept, run again with --after-seq ${seqs[1]} \\(the oldest event kept is ${seqs[2]}\\)$`,
    );
    const ran = [baton(["events", "--after-seq", seqs[0]!], board), baton(["events", "--after-seq", seqs[0]!, "--follow", "--json"], board)];
    for (const run of ran) {
      expect(await run.exited).toBe(5);
      expect(run.stderr().trim().split("\n")).toEqual([expect.stringMatching(line)]);
      expect(run.stdout()).toBe("");
    }
    expect(seqsOf(await ok(["events", "--after-seq", seqs[1]!, "--json"], board))).toEqual(seqs.slice(2));
    expect(seqsOf(await ok(["events", "--json"], board))).toEqual(seqs.slice(2));
    expect(await ok(["--help"], null)).toMatch(/5 the ledger history asked for was pruned by retention/);
  });

  it("events --follow: with nothing kept it follows from where the kept history begins; a stream whose place is then pruned says so and exits 5", async () => {
    const { co, claim } = await claimingAgent(h, 3);
    await claim(1);
    await h.settled(co.id);
    await prune(co.id, (await h.ledgerSeqs(co.id)).at(-1)!); // every event pruned
    const tail = baton(["events", "--follow", "--json"], co.board.token);
    await claim(1);
    await eventually(() => (seqsOf(tail.stdout()).length === 1 ? true : undefined), "the new claim to be printed", 20_000);
    expect(seqsOf(tail.stdout())).toEqual(await h.ledgerSeqs(co.id));
    expect(tail.stderr()).toBe("");
    // Retention passes the tail's place (as if it had stood still for the whole window); the next event ends it.
    const through = (BigInt(seqsOf(tail.stdout())[0]!) + 1n).toString();
    await h.sql("UPDATE lock_events_pruned SET through_seq = $2 WHERE company_id = $1", [co.id, through]);
    await claim(1);
    expect(await tail.exited).toBe(5);
    expect(tail.stderr().trim().split("\n")).toEqual([
      expect.stringMatching(
        new RegExp(`^baton: EVENTS_PRUNED: history up to seq ${through} was pruned by retention, .* run again with --after-seq ${through} \\(`),
      ),
    ]);
    expect(tail.stderr()).not.toMatch(/\n\s+at /);
    expect(seqsOf(tail.stdout())).toHaveLength(1); // the event after the gap is not printed as if it followed on
  });
});

describe("a --after-seq ahead of the server's ledger (a restore, a failover)", () => {
  it("events --after-seq S above every seq the database has made: one SEQ_AHEAD line, exit 6, with or without --follow; nothing printed", async () => {
    const co = await createCompany(h, 1);
    const ceiling = BigInt((await h.one<{ c: string }>("SELECT baton_event_ceiling()::text AS c")).c);
    const ahead = (ceiling + (1000n << 20n)).toString();
    for (const run of [
      baton(["events", "--after-seq", ahead], co.board.token),
      baton(["events", "--after-seq", ahead, "--follow", "--json"], co.board.token),
    ]) {
      expect(await run.exited).toBe(6);
      expect(run.stderr().trim().split("\n")).toEqual([
        expect.stringMatching(
          new RegExp(`^baton: SEQ_AHEAD: afterSeq ${ahead} is ahead of every seq this database has made \\(all are below \\d+\\): .* from "0"$`),
        ),
      ]);
      expect(run.stdout()).toBe("");
    }
    expect(await ok(["--help"], null)).toMatch(/6 the --after-seq is ahead of every seq the server's database has made/);
  });
});
