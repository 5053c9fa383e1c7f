// The live board: sign in, read the company once, then stay current from the
// ledger's live stream (lockChanged over SSE, resumed with afterSeq after any
// drop). The issues list is never polled; runs are re-read every few seconds
// because heartbeats are not lock changes; the concurrency limits, while
// their tab is shown, shortly after lock events (claims and releases move
// their counts). Rotating the board key from this page switches the page to
// the new key in place (api.replaceKey): the session keeps it and the streams
// reopen with it. A key revoked anywhere else signs the page out, saying so.
// Whether an OPEN issue waits is worked out on the page (store.waiting), not
// read again: a blocker's DONE is an event of the blocker alone, and a delay
// ends on the server's clock (api.clock) with no event at all.
import { Api, ApiError, prunedThrough } from "./api.js";
import type { Doc } from "./api.js";
import { byId, fill, h, setText } from "./dom.js";
import {
  BoardAgentsDocument,
  BoardCompaniesDocument,
  BoardCompanyDocument,
  BoardIssuesChangedDocument,
  BoardIssuesDocument,
  BoardLiveDocument,
  BoardMeDocument,
  BoardRunDocument,
  BoardRunsDocument,
  BoardTailDocument,
} from "./generated/graphql.js";
import type { Role } from "./generated/graphql.js";
import { Store } from "./store.js";
import { AgentsView } from "./views/agents.js";
import { AuditView } from "./views/audit.js";
import { BulkView } from "./views/bulk.js";
import { CreateView } from "./views/create.js";
import { DetailView } from "./views/detail.js";
import { EventsView } from "./views/events.js";
import { IssuesView } from "./views/issues.js";
import { LimitsView } from "./views/limits.js";
import { RunsView } from "./views/runs.js";

/** The key lives in this tab's sessionStorage only: never a URL, a cookie or localStorage. */
const SESSION = "baton.board";
const RECONNECT_DELAYS = [250, 500, 1000, 2000, 5000];
const RUNS_EVERY_MS = 5000;
/** After a lock event, the limits are read once this much later: a burst of events costs one read. */
const LIMITS_AFTER_EVENT_MS = 500;

interface Session {
  token: string;
  companyId: string;
}

function saved(): Session | null {
  try {
    const value = JSON.parse(sessionStorage.getItem(SESSION) ?? "null") as Session | null;
    return value && typeof value.token === "string" && typeof value.companyId === "string" ? value : null;
  } catch {
    return null;
  }
}

/**
 * A read that runs once at a time: calls while it runs share one more run
 * after it, so a burst of callers costs at most two reads.
 */
function coalesced(read: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let again: Promise<void> | null = null;
  const start = (): Promise<void> => {
    running = read().finally(() => {
      running = null;
    });
    return running;
  };
  return () => {
    if (!running) return start();
    again ??= running
      .catch(() => {})
      .then(() => {
        again = null;
        return start();
      });
    return again;
  };
}

/** Errors that retrying cannot fix: the key is gone, or may not read this company. */
function refused(err: unknown): err is ApiError {
  return err instanceof ApiError && (err.code === "UNAUTHENTICATED" || err.code === "FORBIDDEN");
}

/** Forgets the key and starts over at the sign-in form, saying why. */
function signOut(why: string): void {
  sessionStorage.removeItem(SESSION);
  sessionStorage.setItem(`${SESSION}.why`, why);
  location.reload();
}

/**
 * The key was accepted at sign-in: refused as unknown now, it was revoked or
 * rotated since (another board or tab rotated the board key, a client did).
 * Retrying cannot help, so the page signs out saying so.
 */
const REVOKED = "this board's key was revoked or rotated (by another board or tab, or a client), so it no longer works. Sign in with the new key.";

function signOutIfRefused(err: unknown): void {
  if (refused(err)) signOut(err.code === "UNAUTHENTICATED" ? REVOKED : err.message);
}

function signInMessage(text: string) {
  byId("sign-in-message").textContent = text;
}

/** Checks a key, and for the admin token asks which company; resolves once a company is chosen. */
function signIn(): Promise<Session> {
  const form = byId<HTMLFormElement>("sign-in");
  const picker = byId<HTMLFormElement>("company-picker");
  byId("board").hidden = true;
  byId("sign-in-view").hidden = false;
  return new Promise((resolve) => {
    form.onsubmit = async (e) => {
      e.preventDefault();
      const token = byId<HTMLInputElement>("board-key").value.trim();
      if (!token) return signInMessage("Paste a board key, or the admin token.");
      signInMessage("Checking…");
      const api = new Api(token);
      try {
        const { me } = await api.request(BoardMeDocument, {});
        if (me.role === "BOARD" && me.companyId) return resolve({ token, companyId: me.companyId });
        if (me.role === "AGENT") return signInMessage("That is an agent key. The board needs a board key, or the admin token.");
        const { companies } = await api.request(BoardCompaniesDocument, {});
        if (companies.length === 0) return signInMessage("There is no company yet: create one (README, “A worked session”).");
        fill(byId("company"), ...companies.map((c) => h("option", { value: c.id }, c.name)));
        signInMessage("Signed in with the admin token: choose a company.");
        picker.hidden = false;
        picker.onsubmit = (ev) => {
          ev.preventDefault();
          resolve({ token, companyId: byId<HTMLSelectElement>("company").value });
        };
      } catch (err) {
        signInMessage(
          err instanceof ApiError && err.code === "UNAUTHENTICATED"
            ? "That key was not accepted. Check it, or create a board key (README, “A worked session”)."
            : `Could not sign in: ${err instanceof Error ? err.message : "unknown error"}`,
        );
      }
    };
  });
}

/** A notice above the views until dismissed: something the operator should know that is not an error. */
function notice(text: string) {
  setText(byId("notice-text"), text);
  byId("notice").hidden = false;
}

function setLive(state: "connecting" | "live" | "reconnecting", detail = "") {
  const el = byId("live");
  el.className = `live live-${state}`;
  setText(el, state === "live" ? "Live" : state === "connecting" ? "Connecting…" : `Reconnecting…${detail}`);
}

async function board(session: Session) {
  const api = new Api(session.token);
  const store = new Store();
  byId("sign-in-view").hidden = true;
  byId("board").hidden = false;
  byId("sign-out").hidden = false;
  byId("notice-dismiss").addEventListener("click", () => (byId("notice").hidden = true));
  setLive("connecting");

  const detail = new DetailView(api, store, session.companyId);
  const open = (id: string) => void detail.open(id);
  const bulk = new BulkView(api, store, () => issues);
  const issues: IssuesView = new IssuesView(
    store,
    open,
    () => bulk.selectionChanged(),
    (now) => api.clock.now(now),
  );
  const create = new CreateView(api, store);
  const runs = new RunsView(store, open);
  const events = new EventsView(api, store, session.companyId, open);
  const audit = new AuditView(api, store, session.companyId, open);
  const limits = new LimitsView(api, session.companyId);
  let role: Role | null = null;
  const readLimits = coalesced(() => limits.refresh());
  let limitsTimer: ReturnType<typeof setTimeout> | null = null;
  /** Reads the limits again soon, if their tab is shown: at most one read per LIMITS_AFTER_EVENT_MS, however many events. */
  const readLimitsSoon = () => {
    if (limitsTimer !== null || byId("tab-limits").hidden) return;
    limitsTimer = setTimeout(() => {
      limitsTimer = null;
      void readLimits();
    }, LIMITS_AFTER_EVENT_MS);
  };

  // Drawing waits for the next frame, so a burst of events is drawn once. The
  // event tail is redrawn only when something changed; the rest also on the
  // clock, for heartbeat ages and leases.
  let scheduled = false;
  let changed = false;
  const render = (hasChanged = true) => {
    changed ||= hasChanged;
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      const now = Date.now();
      issues.render(now);
      if (changed) create.render();
      if (!byId("tab-runs").hidden) runs.render(now);
      if (changed && !byId("tab-agents").hidden) agents.render();
      if (changed && !byId("tab-events").hidden) events.render();
      changed = false;
      detail.render(now);
    });
  };
  store.onChange(() => render());

  // Runs that issues point at but the RUNNING list lacks (expired, ended): read one by one.
  const readUnknownRuns = coalesced(async () => {
    for (const id of store.unknownRuns().slice(0, 50)) {
      const { run } = await api.request(BoardRunDocument, { id });
      if (run) store.putRun(run);
    }
    store.changed();
  });
  const readRuns = coalesced(async () => {
    const { runs: running } = await api.request(BoardRunsDocument, { companyId: session.companyId });
    store.putRunning(running);
    await readUnknownRuns();
  });
  /** Every issue of the company, 500 to a page, each page drawn as it arrives. */
  const readAllIssues = async (first?: ReturnType<typeof loadPage>) => {
    let after: string | null = null;
    for (;;) {
      const page: Awaited<ReturnType<typeof loadPage>> = await (after === null && first ? first : loadPage(api, session.companyId, after));
      for (const edge of page.edges) store.putIssue(edge.node);
      store.changed();
      if (!page.pageInfo.hasNextPage) return;
      after = page.pageInfo.endCursor ?? null;
    }
  };
  const readIssues = coalesced(readAllIssues);
  const readAgents = coalesced(async () => {
    const { agents: read } = await api.request(BoardAgentsDocument, { companyId: session.companyId });
    store.putAgents(read);
    store.changed();
  });
  const agents = new AgentsView({
    api,
    store,
    companyId: session.companyId,
    // A disabled agent's runs end with it: the runs are read again too.
    reread: () =>
      Promise.all([readAgents(), readRuns()]).then(
        () => {},
        (err: unknown) => {
          signOutIfRefused(err);
          throw err;
        },
      ),
    role: () => role,
    // Kept as the sign-in keeps a key: this tab's sessionStorage only.
    switched(token) {
      session.token = token;
      sessionStorage.setItem(SESSION, JSON.stringify(session));
    },
  });
  setupTabs(() => render(), {
    "tab-button-audit": () => void audit.refresh(),
    "tab-button-limits": () => void readLimits(),
    "tab-button-agents": () => void agents.refresh(),
  });

  // 0. Issues created or edited write no ledger event: their notices are
  //    not replayed, so the board listens before it reads any issue, and
  //    reads them all again after a reconnect.
  let watching = () => {};
  const watched = new Promise<void>((resolve) => (watching = resolve));
  let listened = false;
  void follow(api, BoardIssuesChangedDocument, () => ({ companyId: session.companyId }), {
    opened: () => {
      if (listened) readIssues().catch(signOutIfRefused);
      listened = true;
      watching();
    },
    next({ issuesChanged }) {
      const now = Date.now();
      for (const issue of issuesChanged) {
        store.putIssue(issue);
        store.recentlyChanged.set(issue.id, now);
      }
      detail.onIssuesChanged(issuesChanged.map((i) => i.id));
      store.changed();
    },
    dropped: () => {},
  });
  await Promise.race([watched, new Promise((resolve) => setTimeout(resolve, 3000))]);
  // 1. Where the live stream will start: the newest event already committed.
  //    Everything below is read after it, so a change committed since is replayed by afterSeq.
  const { lockEvents: tail } = await api.request(BoardTailDocument, { companyId: session.companyId, beforeSeq: null });
  store.setTail(tail);
  const firstPage = loadPage(api, session.companyId, null);
  const [{ company, me }] = await Promise.all([api.request(BoardCompanyDocument, { id: session.companyId }), readAgents(), readRuns()]);
  byId("company-name").textContent = company?.name ?? session.companyId;
  role = me.role;
  // 2. Lock changes: events after that seq are replayed, then live.
  void follow(api, BoardLiveDocument, () => ({ companyId: session.companyId, afterSeq: store.lastSeq }), {
    opened: () => setLive("live"),
    // Retention dropped events after the board's place (it was away, or behind, for the whole
    // window): resubscribing there would be refused again. With no place yet (no event kept when it
    // loaded) it just starts where the kept history does; otherwise what it shows may have missed
    // changes, so it reads everything again, as on first load, and says so.
    async pruned(through) {
      if (store.lastSeq === "0") {
        store.lastSeq = through;
        return;
      }
      setLive("reconnecting", ` (history after #${store.lastSeq} was pruned; reloading)`);
      const { lockEvents: fresh } = await api.request(BoardTailDocument, { companyId: session.companyId, beforeSeq: null });
      store.restartTail(fresh, through);
      notice(`Events up to #${through} were pruned by retention before the board had read them; the board reloaded.`);
      void Promise.all([readIssues(), readAgents(), readRuns()]).catch(signOutIfRefused);
      store.changed();
    },
    // The server's ledger is behind the board's place (its database was restored or failed over to an
    // older copy): what the board shows may not have happened there. It reads everything again, from now.
    async ahead() {
      setLive("reconnecting", ` (the server has no event #${store.lastSeq}; reloading)`);
      const { lockEvents: fresh } = await api.request(BoardTailDocument, { companyId: session.companyId, beforeSeq: null });
      store.restartTail(fresh, "0");
      notice("The server's ledger is behind what the board had read (its database was restored or failed over); the board reloaded from now.");
      void Promise.all([readIssues(), readAgents(), readRuns()]).catch(signOutIfRefused);
      store.changed();
    },
    next({ lockChanged }) {
      const { issue, ...event } = lockChanged;
      if (!store.apply(event, issue, Date.now())) return;
      detail.onEvent(event);
      readLimitsSoon();
      // A burst of events naming new agents or runs makes one read of each at a time, not one per event.
      // A lock taken back from a disabled agent: the agent's state changed (maybe by another board).
      if ((event.agentId && !store.agents.has(event.agentId)) || event.reason === "AGENT_DISABLED") readAgents().catch(signOutIfRefused);
      const runId = event.checkoutRunId ?? event.executionRunId;
      if (runId && !store.runs.has(runId)) readUnknownRuns().catch(signOutIfRefused);
      store.changed();
    },
    dropped: (problem) => setLive("reconnecting", ` (resuming after #${store.lastSeq})${problem}`),
  });
  // 3. Every issue, pages of 500, drawn as they arrive.
  await readAllIssues(firstPage);
  await readUnknownRuns();
  byId("board").setAttribute("data-loaded", String(store.issues.size));
  render();

  setInterval(() => readRuns().catch(signOutIfRefused), RUNS_EVERY_MS);
  // Heartbeat ages and leases move with the clock.
  setInterval(() => render(false), 1000);
}

async function loadPage(api: Api, companyId: string, after: string | null) {
  return (await api.request(BoardIssuesDocument, { companyId, after })).issues;
}

/**
 * A subscription kept open for the life of the page: after a drop it
 * subscribes again (with backoff and jitter) with the variables of that
 * moment; after a key switch (this page rotated its key) at once, with the
 * new key; a refused key signs out.
 */
async function follow<R, V>(
  api: Api,
  document: Doc<R, V>,
  variables: () => V,
  on: { opened(): void; next(data: R): void; dropped(problem: string): void; pruned?(through: string): Promise<void>; ahead?(): Promise<void> },
) {
  for (let attempt = 0; ; attempt++) {
    let problem = "";
    try {
      const ended = await api.subscribe(
        document,
        variables(),
        {
          opened: () => on.opened(),
          next(data) {
            // Backoff starts over only once data flows: a stream that opens and dies at once keeps backing off.
            attempt = 0;
            on.next(data);
          },
        },
        new AbortController().signal,
      );
      if (ended === "switched") {
        // Not a drop: the same stream again at once, with the new key and the variables of now (afterSeq where it was).
        attempt = -1;
        continue;
      }
    } catch (err) {
      if (refused(err)) return signOutIfRefused(err);
      problem = err instanceof ApiError && err.code !== "UNREACHABLE" ? `: ${err.message}` : "";
      // EVENTS_PRUNED: the variables must move past the pruned history before the next try, never the same afterSeq again.
      const through = prunedThrough(err);
      if (through !== null && on.pruned) {
        problem = "";
        await on.pruned(through).catch((e: unknown) => {
          if (refused(e)) signOutIfRefused(e);
          problem = e instanceof ApiError && e.code !== "UNREACHABLE" ? `: ${e.message}` : "";
        });
      }
      // SEQ_AHEAD: the server has not made the board's afterSeq (a restore, a failover): the same afterSeq is refused again.
      if (err instanceof ApiError && err.code === "SEQ_AHEAD" && on.ahead) {
        problem = "";
        await on.ahead().catch((e: unknown) => {
          if (refused(e)) signOutIfRefused(e);
          problem = e instanceof ApiError && e.code !== "UNREACHABLE" ? `: ${e.message}` : "";
        });
      }
    }
    on.dropped(problem);
    // Jittered, so that boards cut off together (a restart) do not all come back in the same instant.
    const delay = RECONNECT_DELAYS[Math.min(attempt, RECONNECT_DELAYS.length - 1)]! * (0.5 + Math.random() / 2);
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** The tabs; `onOpen` has what to read when a tab (by its button's id) is selected. */
function setupTabs(render: () => void, onOpen: Record<string, () => void>) {
  const tabs = [...document.querySelectorAll<HTMLButtonElement>("[role=tab]")];
  const select = (tab: HTMLButtonElement) => {
    for (const t of tabs) {
      const selected = t === tab;
      t.setAttribute("aria-selected", String(selected));
      t.tabIndex = selected ? 0 : -1;
      byId(t.getAttribute("aria-controls")!).hidden = !selected;
    }
    onOpen[tab.id]?.();
    render();
  };
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (e) => {
      const to = e.key === "ArrowRight" ? tabs[(i + 1) % tabs.length] : e.key === "ArrowLeft" ? tabs[(i + tabs.length - 1) % tabs.length] : undefined;
      if (to) {
        select(to);
        to.focus();
      }
    });
  });
}

async function main() {
  byId("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(SESSION);
    location.reload();
  });
  const why = sessionStorage.getItem(`${SESSION}.why`);
  sessionStorage.removeItem(`${SESSION}.why`);
  if (why) signInMessage(`Signed out: ${why}`);
  let session = saved();
  if (!session) {
    session = await signIn();
    sessionStorage.setItem(SESSION, JSON.stringify(session));
  }
  try {
    await board(session);
  } catch (err) {
    if (refused(err)) return signOutIfRefused(err);
    // Anything else (the server restarting, a dropped connection) is worth another try with the same key.
    setLive("reconnecting", `: the board could not load (${err instanceof Error ? err.message : "unknown error"}); retrying`);
    setTimeout(() => location.reload(), 3000);
  }
}

void main();
