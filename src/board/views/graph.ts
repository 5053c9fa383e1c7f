// The issue panel's part of the work graph: the parent (a link), the blockers
// (each with its status, and a button that removes the dependency), a form
// that adds one (an id, or an issue picked from the list), and the
// sub-issues with theirs. Statuses come from the store, so they change live;
// the blockers themselves from the issue's last read or the answer to the
// board's own change. What the page can check (an empty field, an issue that
// is not there, waiting on itself, an edge that is there already) it says
// before sending; the server's refusals are said in words, a cycle as the
// chain of issues it would close.
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, fill, h, keepFocus } from "../dom.js";
import { BoardAddDependencyDocument, BoardRemoveDependencyDocument } from "../generated/graphql.js";
import type { BoardIssueGraphFragment } from "../generated/graphql.js";
import { TERMINAL } from "../store.js";
import type { Issue, Store } from "../store.js";

/** The most blockers one issue may have (the API's MAX_BLOCKED_BY). */
const MAX_BLOCKED_BY = 100;
/** Issues offered in the "wait on" list: the newest not finished, at most this many. */
const CHOICES = 500;

export type IssueWithGraph = Issue & BoardIssueGraphFragment;

/** An answer of the API's graph mutations, as the board selects them. */
type EdgeAnswer = { __typename: string; issue?: IssueWithGraph; path?: string[]; issueId?: string; message?: string };

/** A refusal of the API (an error, not a Problem), in the board's words. */
export function refusalWords(err: unknown): string {
  if (!(err instanceof ApiError)) return "the request failed.";
  switch (err.code) {
    case "FORBIDDEN":
      return "the admin token may read this company but not change it: sign in with the company's board key.";
    case "UNAUTHENTICATED":
      return "this board's key no longer works: sign in again.";
    case "UNREACHABLE":
      return "the server did not answer: try again.";
    default:
      return `${err.message.replace(/\.$/, "")}.`;
  }
}

/**
 * A cycle the edge would close, in words: `path` runs from the blocker along
 * blockedBy edges to the issue (DependencyCycle.path), so each waits on the next.
 */
export function cycleWords(store: Store, path: readonly string[], issueId: string, blockedById: string): string {
  if (path.length <= 1) return "Not added: an issue cannot wait on itself.";
  const names = path.map((id) => store.issueName(id));
  const chain = names.slice(1).reduce((text, name, i) => `${text}${i === 0 ? " waits on " : ", which waits on "}${name}`, names[0]!);
  return `Not added: ${chain}, so ${store.issueName(issueId)} waiting on ${store.issueName(blockedById)} would close a cycle.`;
}

export class GraphPanel {
  private issueId: string | null = null;
  /** The open issue's blockers and settings, from its newest copy read (by updatedAt). */
  private current: IssueWithGraph | null = null;
  /** What each list was last drawn from: unchanged, it is not redrawn (a focused button stays focused). */
  private drawn = { parent: "", blockers: "", subs: "", choices: "" };

  constructor(
    private readonly api: Api,
    private readonly store: Store,
    private readonly open: (issueId: string) => void,
  ) {
    byId("dependency-form").addEventListener("submit", (e) => {
      e.preventDefault();
      void this.add();
    });
  }

  /** A newly opened issue: nothing known of its blockers until its read answers. */
  show(issueId: string): void {
    this.issueId = issueId;
    this.current = null;
    this.drawn = { parent: "", blockers: "", subs: "", choices: "" };
    byId<HTMLInputElement>("dependency-input").value = "";
    this.say("", "ok");
  }

  /** The open issue with its graph, as read or as a change answered it; an older copy than the one held is dropped. */
  set(issue: IssueWithGraph): void {
    if (issue.id !== this.issueId) return;
    if (this.current && Date.parse(this.current.updatedAt) > Date.parse(issue.updatedAt)) return;
    this.current = issue;
    this.store.putIssue(issue);
  }

  /** The open issue's graph fields, once read. */
  graph(): BoardIssueGraphFragment | null {
    return this.current;
  }

  private say(text: string, kind: "ok" | "problem") {
    const answer = byId("dependency-answer");
    answer.className = `answer answer-${kind}`;
    answer.textContent = text;
  }

  private link(id: string, focus: string) {
    return h(
      "button",
      { type: "button", class: "link", "data-focus": focus, onclick: () => this.open(id) },
      this.store.issues.get(id)?.title ?? `issue ${id.slice(0, 8)}`,
    );
  }

  private statusOf(id: string) {
    const status = this.store.issues.get(id)?.status;
    return status ? h("span", { class: `badge status-${status}` }, status) : null;
  }

  render(issue: Issue, serverNow: number): void {
    const editable = !TERMINAL.has(issue.status);
    byId("dependency-form").hidden = !editable;

    const parent = issue.parentId;
    const parentKey = parent ? `${parent}:${this.store.issues.get(parent)?.title}:${this.store.issues.get(parent)?.status}` : "-";
    if (parentKey !== this.drawn.parent) {
      this.drawn.parent = parentKey;
      const el = byId("detail-parent");
      keepFocus(el, () => fill(el, ...(parent ? [this.link(parent, `parent:${parent}`), " ", this.statusOf(parent)] : ["None: a top-level issue."])));
    }

    const blockers = this.current?.blockedBy ?? null;
    const waitingOn = new Set(this.store.waitingOn(issue));
    const blockersKey =
      blockers === null
        ? "…"
        : `${editable}|${blockers.map((id) => `${id}:${this.store.issues.get(id)?.title}:${this.store.issues.get(id)?.status}:${waitingOn.has(id)}`).join(",")}`;
    if (blockersKey !== this.drawn.blockers) {
      this.drawn.blockers = blockersKey;
      const el = byId("detail-blockers");
      keepFocus(el, () =>
        fill(
          el,
          ...(blockers === null
            ? [h("li", { class: "hint" }, "Reading…")]
            : blockers.length === 0
              ? [h("li", { class: "hint" }, "Nothing: it waits on no other issue.")]
              : blockers.map((id) => {
                  const blocker = this.store.issues.get(id);
                  const cancelled = blocker?.status === "CANCELLED";
                  return h(
                    "li",
                    { "data-blocker": id, class: cancelled ? "waits-cancelled" : null },
                    this.link(id, `blocker:${id}`),
                    " ",
                    this.statusOf(id),
                    cancelled ? " — it will never be DONE: this issue waits until the dependency is removed" : null,
                    " ",
                    editable
                      ? h(
                          "button",
                          {
                            type: "button",
                            class: "remove",
                            "data-focus": `remove:${id}`,
                            "aria-label": `Remove the dependency on ${this.store.issueName(id)}`,
                            onclick: () => void this.remove(id),
                          },
                          "Remove",
                        )
                      : null,
                  );
                })),
        ),
      );
    }

    const subs = this.store.subIssues(issue.id);
    const subsKey = subs.map((s) => `${s.id}:${s.title}:${s.status}:${this.store.waiting(s, serverNow) !== null}`).join(",");
    if (subsKey !== this.drawn.subs) {
      this.drawn.subs = subsKey;
      const done = subs.filter((s) => s.status === "DONE").length;
      const el = byId("detail-subissues");
      keepFocus(el, () =>
        fill(
          el,
          ...(subs.length === 0
            ? [h("li", { class: "hint" }, "None.")]
            : [
                h("li", { class: "hint" }, `${done} of ${subs.length} DONE`),
                ...subs.map((s) =>
                  h(
                    "li",
                    { "data-sub-issue": s.id },
                    this.link(s.id, `sub:${s.id}`),
                    " ",
                    this.statusOf(s.id),
                    this.store.waiting(s, serverNow) ? h("span", { class: "badge status-waiting" }, "waiting") : null,
                  ),
                ),
              ]),
        ),
      );
    }
    this.fillChoices(issue);
  }

  /** The "wait on" list: issues not finished, newest first, less this one and its blockers. */
  private fillChoices(issue: Issue): void {
    const blockers = new Set(this.current?.blockedBy ?? []);
    const key = `${issue.id}:${this.store.issues.size}:${[...blockers].join(",")}`;
    if (key === this.drawn.choices) return;
    this.drawn.choices = key;
    const choices = [...this.store.issues.values()]
      .filter((i) => i.id !== issue.id && !blockers.has(i.id) && !TERMINAL.has(i.status))
      .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
      .slice(0, CHOICES);
    fill(byId("dependency-choices"), ...choices.map((i) => h("option", { value: i.id, label: `${i.title} (${i.status})` })));
  }

  /** Adds the dependency typed: checked here first, then addDependency; the answer said in words. */
  private async add(): Promise<void> {
    const issueId = this.issueId;
    if (!issueId) return;
    const typed = byId<HTMLInputElement>("dependency-input").value;
    if (!typed.trim()) return this.say("Type the id of the issue to wait on, or pick one from the list.", "problem");
    const found = this.store.findIssue(typed, true);
    if (typeof found === "string") return this.say(`Not added: ${found}`, "problem");
    const blockedById = found.id;
    const self = this.store.issueName(issueId);
    const blocker = this.store.issueName(blockedById);
    if (blockedById === issueId) return this.say("Not added: an issue cannot wait on itself.", "problem");
    const blockers = this.current?.blockedBy ?? [];
    if (blockers.includes(blockedById)) return this.say(`${self} already waits on ${blocker}.`, "problem");
    if (blockers.length >= MAX_BLOCKED_BY) return this.say(`Not added: ${self} already waits on ${MAX_BLOCKED_BY} issues, the most one issue may.`, "problem");
    let answer: EdgeAnswer;
    try {
      ({ addDependency: answer } = await this.api.request(BoardAddDependencyDocument, { issueId, blockedById }));
    } catch (err) {
      return this.say(`Not added: ${refusalWords(err)}`, "problem");
    }
    if (answer.__typename === "DependencyAdded" && answer.issue) {
      this.changed(answer.issue);
      byId<HTMLInputElement>("dependency-input").value = "";
      const status = this.store.issues.get(blockedById)?.status;
      const then =
        status === "DONE"
          ? `: it is DONE already, so there is nothing to wait for.`
          : status === "CANCELLED"
            ? `. It is CANCELLED and will never be DONE: ${self} will not be claimed until this dependency is removed.`
            : `: it is claimed only once ${blocker} is DONE.`;
      return this.say(`${self} now waits on ${blocker}${then}`, "ok");
    }
    this.say(this.problemWords("Not added", answer, issueId, blockedById), "problem");
  }

  /** Removes one dependency, once confirmed. */
  private async remove(blockedById: string): Promise<void> {
    const issueId = this.issueId;
    if (!issueId) return;
    const self = this.store.issueName(issueId);
    const blocker = this.store.issueName(blockedById);
    if (!window.confirm(`Stop ${self} waiting on ${blocker}? If nothing else holds it back, an agent may claim it at once.`)) return;
    let answer: EdgeAnswer;
    try {
      ({ removeDependency: answer } = await this.api.request(BoardRemoveDependencyDocument, { issueId, blockedById }));
    } catch (err) {
      return this.say(`Not removed: ${refusalWords(err)}`, "problem");
    }
    if (answer.__typename === "DependencyRemoved" && answer.issue) {
      this.changed(answer.issue);
      return this.say(`${self} no longer waits on ${blocker}.`, "ok");
    }
    this.say(this.problemWords("Not removed", answer, issueId, blockedById), "problem");
  }

  /** The issue as the board's own change left it: the store and the panel have it at once, announced or not. */
  private changed(issue: IssueWithGraph): void {
    this.set(issue);
    this.store.recentlyChanged.set(issue.id, Date.now());
    this.store.changed();
  }

  private problemWords(what: string, answer: EdgeAnswer, issueId: string, blockedById: string): string {
    switch (answer.__typename) {
      case "DependencyCycle":
        return cycleWords(this.store, answer.path ?? [], issueId, blockedById);
      case "IssueNotFound":
        return answer.issueId === blockedById
          ? `${what}: ${this.store.issueName(blockedById)} is not an issue of this company.`
          : `${what}: this issue is no longer there.`;
      default:
        return `${what}: ${answer.message ?? answer.__typename}.`;
    }
  }
}
