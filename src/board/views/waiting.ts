// What an OPEN issue that is not ready waits on, in words, as the issues list
// and the issue panel say it: its blockers not DONE (by title, with their
// status; a CANCELLED one called out, since it will never be DONE), and the
// server's instant its delay ends, in this page's time zone.
import { clockTime } from "../clock.js";
import type { Store, Waiting } from "../store.js";

/** A blocker in a sentence: its title and status; a CANCELLED one says what that means. */
export function blockerWords(store: Store, blocker: Waiting["on"][number], long = false): string {
  const name = store.issueName(blocker.id);
  if (!blocker.issue) return name;
  if (blocker.issue.status !== "CANCELLED") return `${name} (${blocker.issue.status})`;
  return long ? `${name} (CANCELLED: it will never be DONE, so this issue waits until the dependency is removed)` : `${name} (CANCELLED: never DONE)`;
}

/** "waiting on “A” (CLAIMED), “B” (CANCELLED: never DONE); until 14:03:22": the first `most` blockers named, the rest counted. */
export function waitingWords(store: Store, waiting: Waiting, serverNow: number, most = 3): string {
  const parts: string[] = [];
  if (waiting.on.length > 0) {
    const named = waiting.on.slice(0, most).map((b) => blockerWords(store, b));
    const more = waiting.on.length - named.length;
    parts.push(`on ${named.join(", ")}${more > 0 ? ` and ${more} more` : ""}`);
  }
  if (waiting.until) parts.push(`until ${clockTime(waiting.until, serverNow)}`);
  if (waiting.exhausted) parts.push("no attempt left (raise max attempts)");
  return `waiting ${parts.join("; ")}`;
}

/** Whether one of the blockers waited on is CANCELLED: the issue will never be ready as it stands. */
export function waitsOnCancelled(waiting: Waiting): boolean {
  return waiting.on.some((b) => b.issue?.status === "CANCELLED");
}
