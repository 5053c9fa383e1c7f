// The agents tab: each agent of the company, enabled or disabled (since when,
// and why), and the board's key actions: rotate an agent's key, disable an
// agent (a reason is required), enable it again, and rotate the board key.
// Each is confirmed first and its answer shown as the server gave it; after
// each the agents are read again. A new key is shown once, in a dialog that
// drops it when it closes: it is never stored, logged or put in a URL. The
// one exception is this page's own board key, which after its rotation
// becomes the session's key (kept as the sign-in keeps it).
import type { Api } from "../api.js";
import { ApiError } from "../api.js";
import { byId, fill, h, keepFocus, setText } from "../dom.js";
import { BoardDisableAgentDocument, BoardEnableAgentDocument, BoardRotateAgentKeyDocument, BoardRotateBoardKeyDocument } from "../generated/graphql.js";
import type { Role } from "../generated/graphql.js";
import type { Agent, Store } from "../store.js";

export interface AgentsDeps {
  readonly api: Api;
  readonly store: Store;
  readonly companyId: string;
  /** Reads the agents (and their runs) again: after every action. */
  reread(): Promise<void>;
  /** Who this page is signed in as, once loaded: only a board key's rotation replaces this page's own key. */
  role(): Role | null;
  /** This page's own key was replaced by its rotation (the api carries the new one already): keep it as the session's. */
  switched(token: string): void;
}

/** The dialog that shows a new key once; closing it (Done, Escape) drops the key from the page. */
class KeyDialog {
  private readonly dialog = byId<HTMLDialogElement>("key-dialog");
  private readonly field = byId<HTMLInputElement>("new-key");

  constructor() {
    byId("key-copy").addEventListener("click", () => void this.copy());
    byId("key-done").addEventListener("click", () => {
      this.forget();
      this.dialog.close();
    });
    // Closed by Escape too: the close event comes a moment later.
    this.dialog.addEventListener("close", () => this.forget());
  }

  private forget(): void {
    this.field.value = "";
    setText(byId("key-title"), "");
    setText(byId("key-note"), "");
    setText(byId("key-copied"), "");
  }

  show(title: string, key: string, note: string): void {
    setText(byId("key-title"), title);
    setText(byId("key-note"), note);
    setText(byId("key-copied"), "");
    this.field.value = key;
    if (!this.dialog.open) this.dialog.showModal();
    this.field.focus();
    this.field.select();
  }

  /** To the clipboard; where the page may not write it (not a secure context), the key is selected for Ctrl+C. */
  private async copy(): Promise<void> {
    const copied = byId("key-copied");
    try {
      await navigator.clipboard.writeText(this.field.value);
      setText(copied, "Copied to the clipboard.");
    } catch {
      this.field.focus();
      this.field.select();
      setText(copied, "This page may not write to the clipboard: the key is selected, copy it with Ctrl+C (⌘C).");
    }
  }
}

export class AgentsView {
  private readonly keys = new KeyDialog();
  private readonly disableDialog = byId<HTMLDialogElement>("disable-dialog");
  /** The agent the disable dialog is open for. */
  private disabling: Agent | null = null;
  /** What was drawn last: the table is redrawn only when an agent changed, so a button is never replaced under a click. */
  private drawn = "";

  constructor(private readonly deps: AgentsDeps) {
    byId("agents-refresh").addEventListener("click", () => void this.refresh());
    byId("rotate-board-key").addEventListener("click", () => void this.rotateBoardKey());
    byId("disable-cancel").addEventListener("click", () => this.disableDialog.close());
    this.disableDialog.addEventListener("close", () => (this.disabling = null));
    byId("disable-form").addEventListener("submit", (e) => {
      e.preventDefault();
      void this.disable();
    });
  }

  /** Reads the agents again (the tab opened, Refresh, after an action), and says when. */
  async refresh(): Promise<void> {
    try {
      await this.deps.reread();
      setText(byId("agents-at"), `as of ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      setText(byId("agents-at"), err instanceof ApiError ? `could not read the agents: ${err.message}` : "could not read the agents");
    }
  }

  private say(text: string, kind: "ok" | "problem" = "problem") {
    const answer = byId("agents-answer");
    answer.className = `answer answer-${kind}`;
    answer.textContent = text;
  }

  private static problem(err: unknown): string {
    return err instanceof ApiError ? `${err.code}: ${err.message}` : "the request failed";
  }

  private async rotateAgentKey(agent: Agent) {
    const question =
      `Rotate the key of ${agent.name}?\n\n` +
      `A new key is made and shown once. The key ${agent.name} has now stops working at once: its worker is refused until it is given the new one.`;
    if (!window.confirm(question)) return;
    try {
      const { rotateAgentKey } = await this.deps.api.request(BoardRotateAgentKeyDocument, { agentId: agent.id });
      this.say(`${agent.name} has a new key; its old one no longer works.`, "ok");
      this.keys.show(`New key for ${agent.name}`, rotateAgentKey.apiKey, `${agent.name}'s old key no longer works: give this one to its worker (BATON_TOKEN).`);
    } catch (err) {
      this.say(AgentsView.problem(err));
    }
    await this.refresh();
  }

  private openDisable(agent: Agent) {
    this.disabling = agent;
    setText(byId("disable-title"), `Disable ${agent.name}`);
    setText(byId("disable-answer"), "");
    const reason = byId<HTMLTextAreaElement>("disable-reason");
    reason.value = "";
    if (!this.disableDialog.open) this.disableDialog.showModal();
    reason.focus();
  }

  private async disable() {
    const agent = this.disabling;
    if (!agent) return;
    const reason = byId<HTMLTextAreaElement>("disable-reason").value.trim();
    if (!reason) return setText(byId("disable-answer"), "A reason is required: it is kept with the agent and shown here.");
    const question =
      `Disable ${agent.name}?\n\n` +
      `Every key it has stops working at once; its running runs are finished and the locks they hold freed.\n\nReason: ${reason}`;
    if (!window.confirm(question)) return;
    try {
      const { disableAgent } = await this.deps.api.request(BoardDisableAgentDocument, { agentId: agent.id, reason });
      this.deps.store.putAgents([disableAgent]);
      this.disableDialog.close();
      this.say(`${disableAgent.name} is disabled: its keys no longer work.`, "ok");
      this.deps.store.changed();
    } catch (err) {
      setText(byId("disable-answer"), AgentsView.problem(err));
    }
    await this.refresh();
  }

  private async enable(agent: Agent) {
    if (!window.confirm(`Enable ${agent.name}?\n\nIts old keys stay revoked: rotate its key to give it a new one.`)) return;
    try {
      const { enableAgent } = await this.deps.api.request(BoardEnableAgentDocument, { agentId: agent.id });
      this.deps.store.putAgents([enableAgent]);
      this.say(`${enableAgent.name} is enabled: “Rotate key” gives it a key.`, "ok");
      this.deps.store.changed();
    } catch (err) {
      this.say(AgentsView.problem(err));
    }
    await this.refresh();
  }

  /**
   * With a board key, this page's own key is the one replaced: the api
   * switches to the new key as the answer arrives (its subscriptions reopen
   * with it), and the session keeps it. With the admin token, the page goes on
   * as it was.
   */
  private async rotateBoardKey() {
    const role = this.deps.role();
    if (role === null) return this.say("The board is still loading: try again in a moment.");
    const own = role === "BOARD";
    const question =
      "Rotate the board key?\n\n" +
      "The current board key stops working everywhere at once: every other open board signed in with it (other tabs too) is signed out, " +
      "and scripts and the CLI that use it are refused until they are given the new one.\n\n" +
      (own
        ? "This page switches to the new key, which is shown once."
        : "This page is signed in with the admin token and goes on with it. The new key is shown once.");
    if (!window.confirm(question)) return;
    try {
      const variables = { companyId: this.deps.companyId };
      const apiKey = own
        ? (await this.deps.api.replaceKey(BoardRotateBoardKeyDocument, variables, (d) => d.rotateBoardKey.apiKey)).rotateBoardKey.apiKey
        : (await this.deps.api.request(BoardRotateBoardKeyDocument, variables)).rotateBoardKey.apiKey;
      if (own) this.deps.switched(apiKey);
      this.say(own ? "The board key was rotated: this page now uses the new one." : "The board key was rotated.", "ok");
      this.keys.show(
        "New board key",
        apiKey,
        `${own ? "This page now uses it. " : ""}The old board key no longer works anywhere: give this one to the boards, scripts and CLI that used it.`,
      );
    } catch (err) {
      this.say(AgentsView.problem(err));
    }
  }

  render(): void {
    const agents = [...this.deps.store.agents.values()].sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
    const drawn = JSON.stringify(agents);
    if (drawn === this.drawn) return;
    this.drawn = drawn;
    byId("agents-empty").hidden = agents.length > 0;
    const body = byId("agents-body");
    keepFocus(body, () =>
      fill(
        body,
        ...agents.map((agent) => {
          const disabled = agent.disabledAt != null;
          const button = (label: string, name: string, focus: string, onclick: () => void) =>
            h("button", { type: "button", "aria-label": `${label} ${name}`, "data-focus": `${focus}:${agent.id}`, onclick }, label);
          return h(
            "tr",
            { class: disabled ? "agent-disabled" : null, "data-agent": agent.id },
            h("td", { class: "agent-name" }, agent.name),
            h(
              "td",
              { class: "agent-state" },
              disabled ? `disabled since ${new Date(agent.disabledAt!).toLocaleString()}` : "enabled",
              disabled && agent.disabledReason ? h("span", { class: "agent-reason" }, ` · ${agent.disabledReason}`) : null,
            ),
            h(
              "td",
              { class: "agent-actions" },
              ...(disabled
                ? [button("Enable", agent.name, "agent-enable", () => void this.enable(agent))]
                : [
                    button("Rotate key", `of ${agent.name}`, "agent-rotate", () => void this.rotateAgentKey(agent)),
                    button("Disable", agent.name, "agent-disable", () => this.openDisable(agent)),
                  ]),
            ),
          );
        }),
      ),
    );
  }
}
