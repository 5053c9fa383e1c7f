// The watchdog of `baton work`: a process of its own (its own session, so no
// terminal signal reaches it) that ends the commands of a worker that died.
// Node has no way to have the kernel signal a child when its parent dies
// (PR_SET_PDEATHSIG), and each command leads a process group of its own, out
// of reach of whatever kills the worker's group.
//
// stdin, from the worker: `+PGID` when a command starts, `-PGID` when it has
// exited. The end of stdin is the worker gone (the kernel closes its end of
// the pipe however it died): every group still listed gets SIGTERM, and
// SIGKILL after KILL_AFTER_MS if any of it is still there; then it exits.
import { createInterface } from "node:readline";

const KILL_AFTER_MS = 10_000;
const POLL_MS = 100;

const groups = new Set<number>();

/** Sends `signal` to the group; false when no process of it is left. */
function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const pgid = Number(line.slice(1));
  if (!Number.isInteger(pgid) || pgid <= 1) return;
  if (line.startsWith("+")) groups.add(pgid);
  else if (line.startsWith("-")) groups.delete(pgid);
});
lines.on("close", () => {
  for (const pgid of groups) if (!signalGroup(pgid, "SIGTERM")) groups.delete(pgid);
  const deadline = Date.now() + KILL_AFTER_MS;
  const poll = setInterval(() => {
    for (const pgid of groups) if (!signalGroup(pgid, 0)) groups.delete(pgid);
    if (groups.size > 0 && Date.now() < deadline) return;
    for (const pgid of groups) signalGroup(pgid, "SIGKILL");
    clearInterval(poll);
  }, POLL_MS);
});
