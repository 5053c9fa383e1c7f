// The `baton` CLI and the work graph (issue 29), against a real server:
// `baton work` hands COMMAND the payload and BATON_ISSUE_PARENT_ID, keeps
// what it writes to BATON_RESULT_FILE as the result, and reads exit 75 with a
// last stderr line `retry-after: N` as "not now"; `issue create` takes the
// graph's fields, `ready` lists what a claim may take, `issue block` and
// `unblock` edit the graph (a cycle refused in words), `issue show` shows it.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createCompany, Ops } from "../helpers/harness.js";
import type { Company, Harness } from "../helpers/harness.js";
import { assignedIssues, spawnBaton, useCliServer } from "../helpers/cli.js";
import type { Ran } from "../helpers/cli.js";

const cli = useCliServer("baton-graph-");
const { baton, ok, refused, scratch, children } = cli;
let h: Harness;
beforeAll(() => {
  h = cli.h;
});

interface Row {
  status: string;
  attempt_count: number;
  result: unknown;
  /** Seconds from the issue's last change (its release, on the database clock) to not_before; null when there is none. */
  delay: number | null;
}
const row = (id: string) =>
  h.one<Row>("SELECT status, attempt_count, result, round(extract(epoch FROM not_before - updated_at))::int AS delay FROM issues WHERE id = $1", [id]);

/** The person's view of `baton work`'s stderr: without the lines COMMAND wrote itself. */
const batonLines = (run: Ran) =>
  run
    .stderr()
    .trim()
    .split("\n")
    .filter((l) => l.startsWith("baton: "));

describe("baton work: input and output", () => {
  it("COMMAND gets the payload on stdin, BATON_ISSUE_PARENT_ID (empty for a top-level issue); the JSON it writes to BATON_RESULT_FILE is the result, whatever the exit", async () => {
    const co = await createCompany(h, 1);
    const payload = { repo: "acme/web", depth: 2 };
    const [parent] = await assignedIssues(co, 1, { title: "parent", status: "BACKLOG" });
    const [top] = await assignedIssues(co, 1, { payload });
    const [child] = await assignedIssues(co, 1, { payload, parentId: parent });
    const [failing] = await assignedIssues(co, 1, { title: "failing", payload });
    const seen = path.join(scratch, "seen.jsonl");
    const command = [
      "sh",
      "-c",
      // stdin, the parent, and a result that names the issue and where its result file was.
      `printf '{"parent":"%s","file":"%s","stdin":%s}\\n' "$BATON_ISSUE_PARENT_ID" "$BATON_RESULT_FILE" "$(cat)" >> ${seen}; ` +
        `printf '{"pr":"https://example.test/%s"}' "$BATON_ISSUE_ID" > "$BATON_RESULT_FILE"; ` +
        `[ "$BATON_ISSUE_TITLE" = failing ] && { echo "tests failed" >&2; exit 3; }; exit 0`,
    ];
    const worker = baton(["work", "--once", "--", ...command], co.agents[0]!.client.token!);
    expect(await worker.exited, worker.stderr()).toBe(0);
    const lines = readFileSync(seen, "utf8").trim().split("\n");
    const byId = new Map(lines.map((l) => JSON.parse(l) as { parent: string; file: string; stdin: { id: string } }).map((s) => [s.stdin.id, s]));
    expect(byId.get(top!)).toMatchObject({ parent: "", stdin: { payload: { repo: "acme/web", depth: 2 }, parentId: null, blockedBy: [], notBefore: null } });
    expect(byId.get(child!)).toMatchObject({ parent, stdin: { parentId: parent, payload: { repo: "acme/web", depth: 2 } } });
    // A fresh file for each command, in a directory removed once the command has exited.
    const files = [...byId.values()].map((s) => s.file);
    expect(new Set(files).size).toBe(3);
    for (const file of files) expect(existsSync(path.dirname(file))).toBe(false);
    expect(await row(top!)).toMatchObject({ status: "DONE", result: { pr: `https://example.test/${top}` } });
    expect(await row(child!)).toMatchObject({ status: "DONE", result: { pr: `https://example.test/${child}` } });
    // FAILED keeps its result too (three attempts, the last one's result kept).
    expect(await row(failing!)).toMatchObject({ status: "ESCALATED", attempt_count: 3, result: { pr: `https://example.test/${failing}` } });
  });

  it("a result file that is not JSON, or over 64 KB: one line says so, the issue is DONE without a result, exit 0", async () => {
    const co = await createCompany(h, 1);
    const [notJson] = await assignedIssues(co, 1, { title: "not json", priority: "HIGH" });
    const [big] = await assignedIssues(co, 1, { title: "big" });
    const command = [
      "sh",
      "-c",
      `if [ "$BATON_ISSUE_TITLE" = big ]; then head -c 70000 /dev/zero | tr '\\0' 1 > "$BATON_RESULT_FILE"; else echo 'PR #7 opened' > "$BATON_RESULT_FILE"; fi`,
    ];
    const worker = baton(["work", "--once", "--", ...command], co.agents[0]!.client.token!);
    expect(await worker.exited).toBe(0);
    expect(batonLines(worker)).toEqual([
      expect.stringMatching(new RegExp(`^baton: result not kept \\[${notJson}\\]: BATON_RESULT_FILE is not JSON \\(.+\\); the issue is released without it$`)),
      expect.stringMatching(new RegExp(`^baton: DONE .* not json \\[${notJson}\\]$`)),
      `baton: result not kept [${big}]: BATON_RESULT_FILE is 70000 bytes, over the 65536 a result may be; the issue is released without it`,
      expect.stringMatching(new RegExp(`^baton: DONE .* big \\[${big}\\]$`)),
      expect.stringMatching(/^baton: 2 done, 0 requeued, 0 failed, 0 blocked in /),
    ]);
    for (const id of [notJson!, big!]) expect(await row(id)).toMatchObject({ status: "DONE", result: null });
  });

  it("exit 75 with a last stderr line `retry-after: N`: not claimable for N s (a day at most), the attempt given back; without it, a plain REQUEUE", async () => {
    const co = await createCompany(h, 1);
    const [hinted] = await assignedIssues(co, 1, { title: "hinted", priority: "CRITICAL" });
    const [huge] = await assignedIssues(co, 1, { title: "huge", priority: "HIGH" });
    const [plain] = await assignedIssues(co, 1, { title: "plain", maxAttempts: 1 });
    const command = [
      "sh",
      "-c",
      'case "$BATON_ISSUE_TITLE" in ' +
        "hinted) echo 'rate limited by the provider' >&2; printf 'Retry-After: 60\\n\\n' >&2;; " +
        "huge) echo 'retry-after: 999999' >&2;; " +
        "plain) echo 'retry-after: soon' >&2;; " +
        "esac; exit 75",
    ];
    const worker = baton(["work", "--once", "--", ...command], co.agents[0]!.client.token!);
    expect(await worker.exited).toBe(0);
    expect(await row(hinted!)).toEqual({ status: "OPEN", attempt_count: 0, result: null, delay: 60 });
    expect(await row(huge!)).toEqual({ status: "OPEN", attempt_count: 0, result: null, delay: 86_400 });
    // No hint it can read: REQUEUE as before, the attempt counted (its only one: ESCALATED).
    expect(await row(plain!)).toEqual({ status: "ESCALATED", attempt_count: 1, result: null, delay: null });
    const lines = batonLines(worker);
    expect(lines.find((l) => l.includes(`[${hinted}]`))).toMatch(/^baton: REQUEUE .* hinted \[\S+\]: exit 75: rate limited by the provider … Retry-After: 60$/);
    expect(lines.at(-1)).toMatch(/^baton: 0 done, 3 requeued, 0 failed, 0 blocked in /);
  });
});

describe("issue create, show, ready, block and unblock", () => {
  /** `baton issue create … --json` with the board key: the issue. */
  const create = async (co: Company, args: string[]) =>
    JSON.parse(await ok(["issue", "create", "--json", ...args], co.board.token!)) as Record<string, unknown> & { id: string };

  it("create takes the graph's fields; the same --idempotency-key answers the same issue; show prints parent, blockers, waits, notBefore, payload, result, sub-issues", async () => {
    const co = await createCompany(h, 1);
    const a = await create(co, ["--title", "write the migration"]);
    const b = await create(co, ["--title", "review it"]);
    const payloadFile = path.join(scratch, "payload.json");
    writeFileSync(payloadFile, JSON.stringify({ table: "invoices", rows: 1_000_000 }));
    const args = [
      "--title",
      "run the backfill",
      "--blocked-by",
      a.id,
      "--blocked-by",
      b.id,
      "--parent",
      a.id,
      "--not-before",
      "+10m",
      "--retry-delay",
      "30",
      "--max-execution",
      "3600",
      "--idempotency-key",
      "backfill-invoices",
      "--payload",
      `@${payloadFile}`,
    ];
    const c = await create(co, args);
    expect(c).toMatchObject({ parentId: a.id, blockedBy: [a.id, b.id], waitingOn: [a.id, b.id], ready: false });
    const { delay } = await h.one<{ delay: number }>("SELECT round(extract(epoch FROM not_before - created_at))::int AS delay FROM issues WHERE id = $1", [
      c.id,
    ]);
    expect(delay).toBeGreaterThanOrEqual(595); // ten minutes from this machine's clock, give or take the trip
    expect(delay).toBeLessThanOrEqual(605);
    expect(await create(co, [...args.slice(0, 1), "another title", ...args.slice(2)])).toMatchObject({ id: c.id, title: "run the backfill" });
    expect(await h.one<{ n: number }>("SELECT count(*)::int AS n FROM issues WHERE company_id = $1", [co.id])).toEqual({ n: 3 });

    await h.sql("UPDATE issues SET status = 'DONE', result = '{\"rows\": 3}' WHERE id = $1", [b.id]);
    const shown = await ok(["issue", "show", c.id], co.board.token!);
    const field = (name: string) => new RegExp(`^${name} +(.*)$`, "m").exec(shown)?.[1] ?? "";
    expect(field("parentId")).toBe(a.id);
    expect(field("blockedBy")).toBe(`${a.id}, ${b.id}`);
    expect(field("waitingOn")).toBe(a.id);
    expect(field("ready")).toBe("false");
    expect(Date.parse(field("notBefore"))).not.toBeNaN();
    expect(field("retryDelaySeconds")).toBe("30");
    expect(field("maxExecutionSeconds")).toBe("3600");
    expect(field("idempotencyKey")).toBe("backfill-invoices");
    expect(JSON.parse(field("payload"))).toEqual({ table: "invoices", rows: 1_000_000 }); // one line of JSON
    expect(shown).toMatch(/^result$/m); // none yet
    expect(field("subIssues")).toBe("");
    expect((await ok(["issue", "show", b.id], co.board.token!)).match(/^result +(.*)$/m)?.[1]).toBe('{"rows":3}');
    expect((await ok(["issue", "show", a.id], co.board.token!)).match(/^subIssues +(.*)$/m)?.[1]).toBe(c.id);
    expect(JSON.parse(await ok(["issue", "show", c.id, "--json"], co.board.token!))).toMatchObject({
      payload: { table: "invoices", rows: 1_000_000 },
      subIssues: { edges: [] },
    });
  });

  it("create --from FILE: each line may carry the graph's fields, checked before anything is sent", async () => {
    const co = await createCompany(h, 1);
    const board = co.board.token!;
    const first = await create(co, ["--title", "first"]);
    const lines = [
      { title: "second", blockedBy: [first.id], parentId: first.id, retryDelaySeconds: 10, maxExecutionSeconds: 60, payload: { step: 2 } },
      { title: "delayed", notBefore: "2099-01-01T00:00:00Z", idempotencyKey: "delayed-1" },
      { title: "delayed again", idempotencyKey: "delayed-1" },
    ];
    const made = JSON.parse(
      await ok(
        [
          "issue",
          "create",
          "--from",
          writeLines(
            "graph.jsonl",
            lines.map((l) => JSON.stringify(l)),
          ),
          "--json",
        ],
        board,
      ),
    ) as Record<string, unknown>[];
    expect(made[0]).toMatchObject({ title: "second", parentId: first.id, ready: false });
    expect(made[1]).toMatchObject({ title: "delayed", notBefore: "2099-01-01T00:00:00.000Z", ready: false });
    expect(made[2]).toMatchObject({ id: made[1]!.id, title: "delayed" }); // the key's issue, created once
    expect(JSON.parse(await ok(["issue", "show", made[0]!.id as string, "--json"], board))).toMatchObject({
      blockedBy: [first.id],
      waitingOn: [first.id],
      retryDelaySeconds: 10,
      maxExecutionSeconds: 60,
      payload: { step: 2 },
    });
    await refused(
      ["issue", "create", "--from", writeLines("bad-graph.jsonl", ['{"title": "ok"}', `{"title": "bad", "blockedBy": "${first.id}"}`])],
      board,
      2,
      /^baton: \S+bad-graph\.jsonl, line 2: blockedBy must be a list of at most 100 issue ids; nothing was created/,
    );
  });

  it("refusals before any request, in one line: a bad --not-before, --payload, --retry-delay or --max-execution, --from with them", async () => {
    const offline = async (args: string[], line: RegExp) => {
      const run = spawnBaton("http://127.0.0.1:9/graphql", ["issue", "create", "--title", "t", ...args], "token");
      children.push(run.child);
      expect(await run.exited, run.stderr()).toBe(2);
      expect(run.stderr().trim().split("\n")).toEqual([expect.stringMatching(line)]);
    };
    await offline(["--not-before", "tomorrow"], /^baton: --not-before must be an ISO 8601 instant \(2026-12-24T09:00:00Z\) or a time from now \(\+90s, \+10m/);
    await offline(["--not-before", "+10 minutes"], /^baton: --not-before must be/);
    await offline(["--payload", "{repo: acme}"], /^baton: --payload is not JSON \(.*\): give a JSON value, such as '\{"repo": "acme\/web"\}', or @FILE/);
    await offline(["--payload", "@/no/such/file.json"], /^baton: --payload @\/no\/such\/file\.json: no such file/);
    await offline(["--payload", JSON.stringify({ text: "x".repeat(70_000) })], /^baton: --payload is 70011 bytes of JSON; at most 65536/);
    await offline(["--retry-delay", "86401"], /^baton: --retry-delay must be a whole number from 0 to 86400, not "86401"/);
    await offline(["--max-execution", "0"], /^baton: --max-execution must be a whole number from 1 to 604800, not "0"/);
    await offline(["--from", "-", "--blocked-by", "x"], /^baton: --from takes each issue's fields from its line: leave out --title, --blocked-by/);
  });

  it("ready lists what a claim may take now: not an issue that waits on a blocker, nor one delayed; block and unblock move an issue out and back", async () => {
    const co = await createCompany(h, 1);
    const board = co.board.token!;
    const blocker = await create(co, ["--title", "blocker"]);
    const waiting = await create(co, ["--title", "waiting", "--blocked-by", blocker.id]);
    const later = await create(co, ["--title", "later", "--not-before", "+1h"]);
    const free = await create(co, ["--title", "free", "--priority", "high"]);
    const readyIds = async () => (JSON.parse(await ok(["ready", "--json"], board)) as { id: string }[]).map((i) => i.id);
    expect(await readyIds()).toEqual([blocker.id, free.id]);
    const table = (await ok(["ready"], board)).trim().split("\n");
    expect(table[0]!.split(/ {2,}/)).toEqual(["ID", "STATUS", "PRIORITY", "KEY", "ATTEMPTS", "EPOCH", "ASSIGNEE", "TITLE"]);
    expect(table.slice(1).map((l) => l.split(/ {2,}/).at(-1))).toEqual(["blocker", "free"]);

    expect((await ok(["issue", "block", free.id, "--on", later.id], board)).trim()).toBe(
      `${free.id} waits on ${later.id} until it is DONE. It is blocked by: ${later.id}; waiting on: ${later.id}; ready: no`,
    );
    expect(await readyIds()).toEqual([blocker.id]);
    expect(JSON.parse(await ok(["issue", "unblock", free.id, "--on", later.id, "--json"], board))).toMatchObject({ id: free.id, blockedBy: [], ready: true });
    expect((await ok(["issue", "unblock", waiting.id, "--on", blocker.id], board)).trim()).toBe(
      `${waiting.id} does not wait on ${blocker.id}. It is blocked by: none; waiting on: none; ready: yes`,
    );
    expect(await readyIds()).toEqual([blocker.id, waiting.id, free.id]);
    // The agent's own view: `ready --agent ID`.
    await h.sql("UPDATE issues SET assignee_agent_id = $1 WHERE id = $2", [co.agents[0]!.id, free.id]);
    expect((JSON.parse(await ok(["ready", "--agent", co.agents[0]!.id, "--json"], board)) as { id: string }[]).map((i) => i.id)).toEqual([free.id]);
  });

  it("a dependency that would close a cycle is refused with the cycle in words, exit 1, nothing changed; so is an issue waiting on itself", async () => {
    const co = await createCompany(h, 1);
    const board = co.board.token!;
    const [a, b, c] = await Promise.all(["migrate", "backfill", "verify"].map((t) => create(co, ["--title", t])));
    await ok(["issue", "block", b!.id, "--on", a!.id], board); // backfill waits on migrate
    await ok(["issue", "block", c!.id, "--on", b!.id], board); // verify waits on backfill
    await refused(
      ["issue", "block", a!.id, "--on", c!.id],
      board,
      1,
      new RegExp(
        `^baton: DependencyCycle: migrate \\[${a!.id}\\] cannot wait on verify \\[${c!.id}\\]: that would close a cycle, ` +
          `as verify \\[${c!.id}\\] waits on backfill \\[${b!.id}\\], which waits on migrate \\[${a!.id}\\]; nothing changed$`,
      ),
    );
    await refused(
      ["issue", "block", a!.id, "--on", a!.id],
      board,
      1,
      new RegExp(`^baton: DependencyCycle: migrate \\[${a!.id}\\] cannot wait on itself; nothing changed$`),
    );
    expect((await co.board.ok(Ops.IssueGraphDocument, { id: a!.id })).issue?.blockedBy).toEqual([]);
    // Other refusals, in the CLI's usual words and codes.
    await refused(["issue", "block", a!.id], board, 2, /^baton: --on is required: baton issue block ID --on BLOCKER_ID/);
    await refused(["issue", "block", a!.id, "--on", "00000000-0000-4000-8000-000000000000"], board, 1, /^baton: IssueNotFound: /);
  });

  it("--help for ready, issue block and unblock, and create's new options; audit shows miscountedWaits and waitingOnCancelled", async () => {
    const top = await ok(["--help"], null);
    for (const name of ["ready", "issue block", "issue unblock"]) expect(top).toContain(`  ${name} `);
    expect(await ok(["ready", "--help"], null)).toMatch(/^Usage: baton ready \[--agent ID\] \[--limit N\] \[--company ID\]/);
    expect(await ok(["issue", "block", "--help"], null)).toMatch(/--on BLOCKER_ID +the issue to wait on[\s\S]*cycle in words: exit 1/);
    expect(await ok(["help", "issue", "unblock"], null)).toMatch(/^Usage: baton issue unblock ID --on BLOCKER_ID/);
    const createHelp = await ok(["issue", "create", "--help"], null);
    for (const flag of [
      "--blocked-by ID",
      "--parent ID",
      "--not-before T",
      "--retry-delay S",
      "--max-execution S",
      "--idempotency-key K",
      "--payload JSON|@FILE",
    ]) {
      expect(createHelp).toContain(`  ${flag} `);
    }
    const work = await ok(["work", "--help"], null);
    for (const text of [/BATON_ISSUE_PARENT_ID/, /BATON_RESULT_FILE/, /retry-after: N/]) expect(work).toMatch(text);

    const co = await createCompany(h, 1);
    const blocker = await create_(co, "cancelled blocker");
    await ok(["issue", "create", "--title", "stuck", "--blocked-by", blocker], co.board.token!);
    await ok(["issue", "cancel", blocker], co.board.token!);
    const audit = await ok(["audit"], co.board.token!);
    expect(audit).toMatch(/^miscountedWaits +0$/m);
    expect(audit).toMatch(/^waitingOnCancelled +1$/m);
  });
});

/** A file of `lines` in the scratch directory: its path. */
function writeLines(name: string, lines: string[]): string {
  const file = path.join(scratch, name);
  writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

/** An issue made through the API (the board's key): its id. */
async function create_(co: Company, title: string): Promise<string> {
  return (await co.board.ok(Ops.CreateIssueDocument, { input: { title } })).createIssue.id;
}
