// A new issue from the Issues tab: title, description, priority, assignee,
// concurrency key, max attempts, and its place in the work graph and time
// (blocked by, not before, retry delay, max execution, idempotency key), sent
// as one createIssue. The fields are checked here first, with the server's
// rules (src/domain/validate.ts), so a mistake is named before anything is
// sent; the server's answer is shown as it gave it. A create whose
// idempotency key the company has already answers that issue, and says so.
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, fill, h } from "../dom.js";
import { BoardCreateIssueDocument } from "../generated/graphql.js";
import type { CreateIssueInput, IssuePriority } from "../generated/graphql.js";
import type { Store } from "../store.js";
import { refusalWords } from "./graph.js";
import { waitingWords } from "./waiting.js";

const MAX_TITLE = 500;
const MAX_KEY = 200;
const MAX_IDEMPOTENCY_KEY = 200;
const MAX_BLOCKED_BY = 100;
const MAX_RETRY_SECONDS = 86_400;
const MAX_EXECUTION_SECONDS = 604_800;

/** A whole number of seconds typed in a field, or null when it is not one in min..max. */
function seconds(text: string, min: number, max: number): number | null {
  const n = Number(text);
  return /^\d+$/.test(text) && n >= min && n <= max ? n : null;
}

export class CreateView {
  /** The agents the assignee list was filled from, by id and name: refilled only when they change. */
  private filledFor = "";

  constructor(
    private readonly api: Api,
    private readonly store: Store,
  ) {
    byId("create-form").addEventListener("submit", (e) => {
      e.preventDefault();
      void this.create();
    });
  }

  private say(text: string, kind: "ok" | "problem") {
    const answer = byId("create-answer");
    answer.className = `answer answer-${kind}`;
    answer.textContent = text;
  }

  /** The assignee list: the company's enabled agents, the choice kept across refills. */
  render(): void {
    const agents = [...this.store.agents.values()].filter((a) => !a.disabledAt);
    const key = agents.map((a) => `${a.id}:${a.name}`).join(",");
    if (key === this.filledFor) return;
    this.filledFor = key;
    const select = byId<HTMLSelectElement>("create-assignee");
    const chosen = select.value;
    fill(select, h("option", { value: "" }, "Unassigned"), ...agents.map((a) => h("option", { value: a.id, selected: a.id === chosen }, a.name)));
  }

  /** The form as a createIssue input, or what is wrong with it. */
  private input(): CreateIssueInput | string {
    const title = byId<HTMLInputElement>("create-title").value.trim();
    if (!title) return "A title is required.";
    if ([...title].length > MAX_TITLE) return `The title must be at most ${MAX_TITLE} characters.`;
    const maxText = byId<HTMLInputElement>("create-max").value.trim();
    const maxAttempts = Number(maxText);
    if (!/^\d+$/.test(maxText) || maxAttempts < 1 || maxAttempts > 100) return "Max attempts must be a whole number from 1 to 100.";
    // Keys are compared exactly: sent as typed; an empty field is the unkeyed pool.
    const key = byId<HTMLInputElement>("create-key").value;
    if ([...key].length > MAX_KEY) return `The concurrency key must be at most ${MAX_KEY} characters.`;
    const description = byId<HTMLTextAreaElement>("create-description").value;
    const assignee = byId<HTMLSelectElement>("create-assignee").value;
    const blockedBy: string[] = [];
    for (const typed of byId<HTMLInputElement>("create-blocked-by")
      .value.split(/[\s,]+/)
      .filter(Boolean)) {
      const found = this.store.findIssue(typed, false);
      if (typeof found === "string") return `Blocked by: ${found}`;
      if (!blockedBy.includes(found.id)) blockedBy.push(found.id);
    }
    if (blockedBy.length > MAX_BLOCKED_BY) return `Blocked by names ${blockedBy.length} issues: an issue may wait on at most ${MAX_BLOCKED_BY}.`;
    // datetime-local is this page's local time; an instant on the server's clock is sent.
    const notBeforeField = byId<HTMLInputElement>("create-not-before");
    if (notBeforeField.validity.badInput) return "Not before must be a whole date and time (or empty for no delay).";
    const notBefore = notBeforeField.value ? new Date(notBeforeField.value) : null;
    if (notBefore && !(notBefore.getFullYear() >= 2000 && notBefore.getFullYear() <= 9999)) return "Not before must be a date between the years 2000 and 9999.";
    const retryDelaySeconds = seconds(byId<HTMLInputElement>("create-retry-delay").value.trim() || "0", 0, MAX_RETRY_SECONDS);
    if (retryDelaySeconds === null) return `Retry delay must be a whole number of seconds from 0 to ${MAX_RETRY_SECONDS.toLocaleString("en")} (a day).`;
    const maxExecutionText = byId<HTMLInputElement>("create-max-execution").value.trim();
    const maxExecutionSeconds = maxExecutionText ? seconds(maxExecutionText, 1, MAX_EXECUTION_SECONDS) : null;
    if (maxExecutionText && maxExecutionSeconds === null)
      return `Max execution must be a whole number of seconds from 1 to ${MAX_EXECUTION_SECONDS.toLocaleString("en")} (a week), or empty for no limit.`;
    // Compared exactly, as the key: sent as typed.
    const idempotencyKey = byId<HTMLInputElement>("create-idempotency-key").value;
    if ([...idempotencyKey].length > MAX_IDEMPOTENCY_KEY) return `The idempotency key must be at most ${MAX_IDEMPOTENCY_KEY} characters.`;
    return {
      title,
      priority: byId<HTMLSelectElement>("create-priority").value as IssuePriority,
      maxAttempts,
      retryDelaySeconds,
      ...(description.trim() ? { description } : {}),
      ...(key ? { concurrencyKey: key } : {}),
      ...(assignee ? { assigneeAgentId: assignee } : {}),
      ...(blockedBy.length > 0 ? { blockedBy } : {}),
      ...(notBefore ? { notBefore: notBefore.toISOString() } : {}),
      ...(maxExecutionSeconds !== null ? { maxExecutionSeconds } : {}),
      ...(idempotencyKey ? { idempotencyKey } : {}),
    };
  }

  private async create() {
    const input = this.input();
    if (typeof input === "string") return this.say(input, "problem");
    // The issues this page knew before: an answer among them is the one the key named, not a new one.
    const known = input.idempotencyKey ? new Set(this.store.issues.keys()) : null;
    try {
      const { createIssue } = await this.api.request(BoardCreateIssueDocument, { input });
      this.store.putIssue(createIssue);
      this.store.changed();
      if (known?.has(createIssue.id)) {
        return this.say(
          `Nothing created: the issue with idempotency key “${input.idempotencyKey}” exists already: “${createIssue.title}” (${createIssue.status}).`,
          "problem",
        );
      }
      byId<HTMLInputElement>("create-title").value = "";
      byId<HTMLTextAreaElement>("create-description").value = "";
      byId<HTMLInputElement>("create-idempotency-key").value = "";
      const serverNow = this.api.clock.now();
      const waiting = this.store.waiting(this.store.issues.get(createIssue.id) ?? createIssue, serverNow);
      const waits = waiting ? `, ${waitingWords(this.store, waiting, serverNow)}` : "";
      this.say(`Created “${createIssue.title}” (${createIssue.status}, ${createIssue.priority})${waits}.`, "ok");
    } catch (err) {
      // NOT_FOUND: a blocker the server does not have in this company (deleted, or another company's id).
      const words =
        err instanceof ApiError && err.code === "NOT_FOUND" && input.blockedBy
          ? "an issue in Blocked by is not an issue of this company."
          : err instanceof ApiError && err.code === "BAD_USER_INPUT"
            ? `${err.message.replace(/\.$/, "")}.`
            : refusalWords(err);
      this.say(`Not created: ${words}`, "problem");
    }
  }
}
