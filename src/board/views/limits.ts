// The limits panel: the company's concurrency limits (concurrencyLimits),
// each key with its active issues of its cap, amber (and "at limit") once the
// key is full; and the board's fixes: set a key's limit, or remove it. Each
// is confirmed first and its answer shown as the server gave it. Read when
// the tab opens, after a change, and (throttled, by the caller) after lock
// events while the tab is shown: claims and releases move the counts.
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, counted, fill, h, keepFocus, setText } from "../dom.js";
import { BoardLimitsDocument, BoardSetLimitDocument } from "../generated/graphql.js";
import type { BoardLimitFragment } from "../generated/graphql.js";

export type Limit = BoardLimitFragment;

const MAX_LIMIT = 10_000;

export class LimitsView {
  private limits: Limit[] = [];
  /** Counts reads: an answer older than the newest one drawn is dropped. */
  private reads = 0;
  private drawn = 0;

  constructor(
    private readonly api: Api,
    private readonly companyId: string,
  ) {
    byId("limits-refresh").addEventListener("click", () => void this.refresh());
    byId("limit-form").addEventListener("submit", (e) => {
      e.preventDefault();
      // Keys are compared exactly: sent as typed, spaces included.
      const key = byId<HTMLInputElement>("limit-key").value;
      const max = Number(byId<HTMLInputElement>("limit-max").value);
      if (!key) return this.say("A key is required.");
      if (!Number.isInteger(max) || max < 1 || max > MAX_LIMIT) return this.say(`Max active must be a whole number from 1 to ${MAX_LIMIT}.`);
      const now = this.limits.find((l) => l.key === key);
      const question = now
        ? `Change the limit on key “${key}” from ${now.maxActive} to ${counted(max, "active issue")}?` +
          (max < now.active ? `\n\n${now.active} are active now: none is taken away, but no more are claimed until fewer than ${max} are.` : "")
        : `Limit key “${key}” to ${counted(max, "active issue")} at once?`;
      void this.set(question, key, max);
    });
  }

  private say(text: string, kind: "ok" | "problem" = "problem") {
    const answer = byId("limits-answer");
    answer.className = `answer answer-${kind}`;
    answer.textContent = text;
  }

  /** Confirms, sends setConcurrencyLimit, shows the answer, and reads the limits again. */
  private async set(question: string, key: string, maxActive: number | null) {
    if (!window.confirm(question)) return;
    try {
      const { setConcurrencyLimit: limit } = await this.api.request(BoardSetLimitDocument, { key, maxActive });
      this.say(
        limit ? `Limit set: key “${limit.key}” at most ${limit.maxActive} active (${limit.active} now).` : `Limit removed: key “${key}” has no limit.`,
        "ok",
      );
      if (limit) byId<HTMLInputElement>("limit-key").value = "";
    } catch (err) {
      this.say(err instanceof ApiError ? `${err.code}: ${err.message}` : "the request failed");
    }
    await this.refresh();
  }

  /** Fills the form with a limit, to change it. */
  private edit(limit: Limit) {
    byId<HTMLInputElement>("limit-key").value = limit.key;
    const max = byId<HTMLInputElement>("limit-max");
    max.value = String(limit.maxActive);
    max.focus();
  }

  async refresh(): Promise<void> {
    const read = ++this.reads;
    try {
      const { concurrencyLimits } = await this.api.request(BoardLimitsDocument, { companyId: this.companyId });
      if (read < this.drawn) return;
      this.drawn = read;
      this.limits = concurrencyLimits;
      this.render();
      setText(byId("limits-at"), `as of ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      setText(byId("limits-at"), err instanceof ApiError ? `could not read the limits: ${err.message}` : "could not read the limits");
    }
  }

  private render() {
    const body = byId("limits-body");
    byId("limits-empty").hidden = this.limits.length > 0;
    keepFocus(body, () =>
      fill(
        body,
        ...this.limits.map((limit) => {
          const full = limit.active >= limit.maxActive;
          return h(
            "tr",
            { class: full ? "limit-full" : null, "data-limit": limit.key },
            h("td", { class: "limit-key" }, limit.key),
            h("td", {}, h("span", { class: "limit-count" }, `${limit.active} / ${limit.maxActive}`), full ? " · at limit" : null),
            h(
              "td",
              { class: "limit-actions" },
              h(
                "button",
                { type: "button", "data-focus": `limit-edit:${limit.key}`, "aria-label": `Change the limit on ${limit.key}`, onclick: () => this.edit(limit) },
                "Change",
              ),
              h(
                "button",
                {
                  type: "button",
                  "data-focus": `limit-remove:${limit.key}`,
                  "aria-label": `Remove the limit on ${limit.key}`,
                  onclick: () => void this.set(`Remove the limit on key “${limit.key}”? All of its issues may then be active at once.`, limit.key, null),
                },
                "Remove",
              ),
            ),
          );
        }),
      ),
    );
  }
}
