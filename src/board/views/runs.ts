// The runs view: every run holding a lock or still RUNNING, with its lease and
// the issues it holds. Dead runs that still hold locks come first and stand
// out: they are what the recovery loop will free.
import { byId, counted, fill, h, keepFocus, setText, shortId, span } from "../dom.js";
import { health } from "../store.js";
import type { Store } from "../store.js";

export class RunsView {
  constructor(
    private readonly store: Store,
    private readonly open: (issueId: string) => void,
  ) {}

  render(now: number): void {
    const held = this.store.heldByRun();
    const runs = [...this.store.runs.values()].filter((r) => r.status === "RUNNING" || held.has(r.id));
    const rank = (id: string) => {
      const state = health(this.store.runs.get(id), now);
      return state === "dead" ? (held.has(id) ? 0 : 3) : state === "warn" ? 1 : 2;
    };
    runs.sort((a, b) => rank(a.id) - rank(b.id) || Date.parse(a.leaseExpiresAt) - Date.parse(b.leaseExpiresAt));
    const deadHolders = runs.filter((r) => health(r, now) === "dead" && held.has(r.id)).length;
    setText(
      byId("runs-summary"),
      `${counted(runs.length, "run")}${deadHolders ? ` · ${deadHolders} dead but still holding locks: the recovery loop will free them` : ""}`,
    );
    const body = byId("runs-body");
    keepFocus(body, () =>
      fill(
        body,
        ...runs.map((run) => {
          const state = health(run, now);
          const expires = Date.parse(run.leaseExpiresAt);
          const lease =
            run.status !== "RUNNING"
              ? `ended ${run.status}`
              : now < expires
                ? `${span(expires - now)} left${state === "warn" ? ", heartbeat overdue" : ""}`
                : `expired ${span(now - expires)} ago`;
          const issues = held.get(run.id) ?? [];
          return h(
            "tr",
            { class: `run-${state}`, "data-run": run.id },
            h("td", {}, shortId(run.id)),
            h("td", {}, this.store.agentName(run.agentId)),
            h("td", { class: `beat beat-${state}` }, state === "dead" ? `dead · ${lease}` : lease),
            h("td", {}, `${span(now - Date.parse(run.lastHeartbeatAt))} ago`),
            h("td", {}, new Date(run.startedAt).toLocaleTimeString()),
            h(
              "td",
              {},
              issues.length === 0 ? "none" : null,
              ...issues
                .slice(0, 10)
                .map((issue) =>
                  h(
                    "button",
                    { type: "button", class: "link held", "data-focus": `held:${run.id}:${issue.id}`, onclick: () => this.open(issue.id) },
                    issue.title,
                  ),
                ),
              issues.length > 10 ? ` and ${issues.length - 10} more` : null,
            ),
          );
        }),
      ),
    );
  }
}
