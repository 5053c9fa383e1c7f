// A new issue from the Issues tab: title, description, priority, assignee,
// concurrency key and max attempts, sent as one createIssue. The fields are
// checked here first, with the server's rules (src/domain/validate.ts), so a
// mistake is named before anything is sent; the server's answer is shown as
// it gave it.
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, fill, h } from "../dom.js";
import { BoardCreateIssueDocument } from "../generated/graphql.js";
import type { CreateIssueInput, IssuePriority } from "../generated/graphql.js";
import type { Store } from "../store.js";

const MAX_TITLE = 500;
const MAX_KEY = 200;

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
    return {
      title,
      priority: byId<HTMLSelectElement>("create-priority").value as IssuePriority,
      maxAttempts,
      ...(description.trim() ? { description } : {}),
      ...(key ? { concurrencyKey: key } : {}),
      ...(assignee ? { assigneeAgentId: assignee } : {}),
    };
  }

  private async create() {
    const input = this.input();
    if (typeof input === "string") return this.say(input, "problem");
    try {
      const { createIssue } = await this.api.request(BoardCreateIssueDocument, { input });
      this.store.putIssue(createIssue);
      this.store.changed();
      byId<HTMLInputElement>("create-title").value = "";
      byId<HTMLTextAreaElement>("create-description").value = "";
      this.say(`Created “${createIssue.title}” (${createIssue.status}, ${createIssue.priority}).`, "ok");
    } catch (err) {
      this.say(err instanceof ApiError ? `Not created: ${err.message}` : "Not created: the request failed.", "problem");
    }
  }
}
