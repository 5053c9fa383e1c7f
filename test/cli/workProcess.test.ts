// `baton work -- COMMAND` and the command's process: a command that cannot
// start is the worker's fault, not the issue's; Ctrl-C in a terminal (SIGINT
// to the whole foreground process group, sent again by npm under `npx`)
// drains, letting the command finish; and a worker that dies takes its
// commands with it. Each `baton` here leads a process group of its own, as a
// terminal's foreground job does.
import type { ChildProcess } from "node:child_process";
import { chmodSync, closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCompany, startHarness } from "../helpers/harness.js";
import type { Harness } from "../helpers/harness.js";
import { eventually } from "../helpers/race.js";
import { assignedIssues, killGroups, spawnBaton } from "../helpers/cli.js";
import type { Ran } from "../helpers/cli.js";

let h: Harness;
const scratch = mkdtempSync(path.join(tmpdir(), "baton-work-"));
const children: ChildProcess[] = [];
const commandPids: number[] = [];

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  killGroups([...children.map((c) => c.pid!), ...commandPids]);
  rmSync(scratch, { recursive: true, force: true });
  await h?.close();
});

/** `baton ARGS` as the leader of its own process group; `npx` runs it as a user types `npx baton …`. */
function baton(args: string[], token: string, options: { npx?: boolean } = {}): Ran {
  const ran = spawnBaton(h.url, args, token, options);
  children.push(ran.child);
  return ran;
}

const issues = assignedIssues;

const rows = (ids: string[]) =>
  h.sql<{ status: string; attempt_count: number }>("SELECT status, attempt_count FROM issues WHERE id = ANY($1) ORDER BY id", [ids]);
const reasons = (id: string) =>
  h
    .sql<{ kind: string; reason: string | null }>("SELECT kind, reason FROM lock_events WHERE issue_id = $1 ORDER BY seq", [id])
    .then((r) => r.map((e) => `${e.kind}${e.reason ? ` ${e.reason}` : ""}`));

/** Whether the process runs (a zombie, waiting for its parent to reap it, does not). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Whether any process of the process group runs. */
function groupRunning(pgid: number): boolean {
  return readdirSync("/proc").some((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    try {
      // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses, so read after its last ")".
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return Number(pgrp) === pgid && state !== "Z";
    } catch {
      return false;
    }
  });
}

/** The person's view: stderr without the worker's progress (a line per issue, the summary) and its retried claims. */
const said = (run: Ran) =>
  run
    .stderr()
    .trim()
    .split("\n")
    .filter((l) => !/^baton: ((DONE|REQUEUE|FAILED|BLOCKED|LOST) +\d|\d+ done, |claim failed )/.test(l));

describe("a command that cannot be started: nothing is claimed, one line, exit 2", () => {
  const script = (name: string, text: string, mode: number) => {
    const file = path.join(scratch, name);
    writeFileSync(file, text);
    chmodSync(file, mode);
    return file;
  };
  it.each([
    ["a mistyped path", () => "./run-agnet.sh", /^baton: cannot run \.\/run-agnet\.sh: no such file; nothing was claimed$/],
    ["a name not on PATH", () => "run-agnet", /^baton: cannot run run-agnet: not found on PATH; nothing was claimed$/],
    [
      "a file that is not executable",
      () => script("plain.sh", "echo hi\n", 0o644),
      /^baton: cannot run \S+plain\.sh: not executable \(chmod \+x\); nothing was claimed$/,
    ],
    ["a directory", () => scratch, /^baton: cannot run \S+: a directory; nothing was claimed$/],
    [
      "a script whose #! interpreter is missing",
      () => script("bad-shebang.sh", "#!/no/such/sh\necho hi\n", 0o755),
      /^baton: cannot run \S+bad-shebang\.sh: its interpreter \/no\/such\/sh \(#!\) cannot run: no such file; nothing was claimed$/,
    ],
    [
      "a script whose env interpreter is not on PATH",
      () => script("bad-env.sh", "#!/usr/bin/env run-agnet-interpreter\necho hi\n", 0o755),
      /^baton: cannot run \S+bad-env\.sh: its interpreter run-agnet-interpreter \(#!\/usr\/bin\/env\) cannot run: not found on PATH; nothing was claimed$/,
    ],
  ])("%s", async (_what, command, line) => {
    const co = await createCompany(h, 1);
    const ids = await issues(co, 3);
    const worker = baton(["work", "--once", "--", command()], co.agents[0]!.client.token!);
    expect(await worker.exited).toBe(2);
    expect(worker.stderr().trim().split("\n")).toEqual([expect.stringMatching(line)]);
    expect(await rows(ids)).toEqual(Array(3).fill({ status: "OPEN", attempt_count: 0 }));
    expect((await h.one<{ n: number }>("SELECT count(*)::int AS n FROM heartbeat_runs WHERE agent_id = $1", [co.agents[0]!.id])).n).toBe(0);
  });

  it("one deleted while the worker runs (here by its own first run): checked again before each claim, so nothing more is claimed; exit 2", async () => {
    const co = await createCompany(h, 1);
    const ids = await issues(co, 3);
    const file = script("vanishing.sh", '#!/bin/sh\nrm "$0"\n', 0o755);
    const worker = baton(["work", "--", file], co.agents[0]!.client.token!);
    expect(await worker.exited).toBe(2);
    expect(said(worker), worker.stderr()).toEqual([
      expect.stringMatching(/^baton: cannot run \S+vanishing\.sh: no such file; the worker stopped before claiming more$/),
    ]);
    const after = await rows(ids);
    expect(after.filter((r) => r.status === "DONE")).toEqual([{ status: "DONE", attempt_count: 1 }]);
    expect(after.filter((r) => r.status !== "DONE")).toEqual(Array(2).fill({ status: "OPEN", attempt_count: 0 }));
  });

  it("one that passes the check and still cannot be spawned (open for writing: ETXTBSY): that one issue goes back to the queue, the worker stops, exit 2", async () => {
    const co = await createCompany(h, 1);
    const ids = await issues(co, 3);
    const file = script("busy.sh", "#!/bin/sh\necho hi\n", 0o755);
    const writer = openSync(file, "r+");
    try {
      const worker = baton(["work", "--once", "--", file], co.agents[0]!.client.token!);
      expect(await worker.exited).toBe(2);
      expect(said(worker), worker.stderr()).toEqual([
        expect.stringMatching(/^baton: could not start \S+busy\.sh: spawn ETXTBSY; its issue \S+ went back to the queue and the worker stopped$/),
      ]);
    } finally {
      closeSync(writer);
    }
    const after = await rows(ids);
    expect(after.every((r) => r.status === "OPEN")).toBe(true);
    // One issue was taken, and acquired (that attempt is counted: docs/lifecycle.md, Attempts); the others were not.
    expect(after.map((r) => r.attempt_count).sort()).toEqual([0, 0, 1]);
    const { id: touched } = await h.one<{ id: string }>("SELECT id FROM issues WHERE id = ANY($1) AND attempt_count = 1", [ids]);
    expect(await reasons(touched)).toEqual([
      "CLAIMED",
      "EXECUTION_ACQUIRED",
      expect.stringMatching(/^RELEASED REQUEUE: could not start \S+busy\.sh: spawn ETXTBSY$/),
    ]);
  });
});

describe("Ctrl-C: SIGINT to the worker's whole process group", () => {
  it.each([
    ["node dist/cli/main.js", false, false],
    ["npx baton", true, false],
    ["a wrapper that forwards the SIGINT it got to baton (as npm does to a script that execs)", false, true],
  ])("%s: one Ctrl-C drains: the command does not get it and finishes, its issue DONE, exit 0", async (_how, npx, forwarded) => {
    const co = await createCompany(h, 1);
    const [id] = await issues(co, 1);
    const worker = baton(["work", "--", "sh", "-c", "echo started; sleep 1; echo finished"], co.agents[0]!.client.token!, { npx });
    await eventually(() => (worker.stdout().includes("started") ? true : undefined), "the command to start", 20_000);
    process.kill(-worker.child.pid!, "SIGINT");
    if (forwarded) {
      // Once the first is handled (two pending at once are one to the kernel), within the second that makes it the same.
      await eventually(() => (worker.stderr().includes("stopping (draining") ? true : undefined), "the first to be handled");
      process.kill(worker.child.pid!, "SIGINT");
    }
    // npm itself ends as a shell expects of Ctrl-C, by the signal; it reports any other exit of baton but 0.
    expect(await worker.exited).toBe(npx ? null : 0);
    expect(worker.stderr()).not.toMatch(/npm error/);
    expect(worker.stdout()).toContain("finished");
    expect(worker.stderr()).not.toContain("second signal");
    expect(await reasons(id!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "RELEASED DONE"]);
  });

  it("a command still running when the drain times out is stopped by baton, and its issue is requeued, not failed", async () => {
    const co = await createCompany(h, 1);
    const [id] = await issues(co, 1);
    const worker = baton(["work", "--drain-timeout", "1", "--", "sh", "-c", "echo started; exec sleep 30"], co.agents[0]!.client.token!);
    await eventually(() => (worker.stdout().includes("started") ? true : undefined), "the command to start", 20_000);
    process.kill(-worker.child.pid!, "SIGINT");
    expect(await worker.exited).toBe(0);
    expect(await rows([id!])).toEqual([{ status: "OPEN", attempt_count: 1 }]);
    expect(await reasons(id!)).toEqual(["CLAIMED", "EXECUTION_ACQUIRED", "RELEASED RUN_FINISHED"]);
  });

  it("a second Ctrl-C, later, stops the commands at once and exits 1", async () => {
    const co = await createCompany(h, 1);
    await issues(co, 1);
    const worker = baton(["work", "--", "sh", "-c", 'echo "pid $$"; exec sleep 30'], co.agents[0]!.client.token!);
    const pid = Number(await eventually(() => /pid (\d+)/.exec(worker.stdout())?.[1], "the command to start", 20_000));
    commandPids.push(pid);
    process.kill(-worker.child.pid!, "SIGINT");
    await eventually(() => (worker.stderr().includes("stopping (draining") ? true : undefined), "the drain to begin");
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // past the window in which a repeat is the same Ctrl-C
    process.kill(-worker.child.pid!, "SIGINT");
    expect(await worker.exited).toBe(1);
    expect(worker.stderr()).toContain("second signal: stopping commands now");
    await eventually(() => (running(pid) ? undefined : true), "the command to be stopped", 5_000);
  });
});

describe("a worker killed with SIGKILL takes its commands with it", () => {
  it("the command's process group is gone within seconds, though the command would run for 30 s", async () => {
    const co = await createCompany(h, 1);
    await issues(co, 1);
    const worker = baton(["work", "--", "sh", "-c", 'echo "pid $$"; sleep 30 & wait'], co.agents[0]!.client.token!);
    const pid = Number(await eventually(() => /pid (\d+)/.exec(worker.stdout())?.[1], "the command to start", 20_000));
    commandPids.push(pid);
    process.kill(worker.child.pid!, "SIGKILL"); // the worker alone, as the OOM killer does
    await worker.exited;
    await eventually(() => (running(pid) ? undefined : true), "the command to end", 5_000);
    // Its child too: nothing of the command's process group is left running.
    await eventually(() => (groupRunning(pid) ? undefined : true), "the command's process group to end", 5_000);
  });
});
