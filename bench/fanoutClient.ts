// One subscriber process of the fan-out bench (bench/fanout.ts forks several,
// with an IPC channel and the "advanced" serialization). It opens its share of
// the graphql-ws lockChanged subscriptions, timestamps every delivery in
// wall-clock milliseconds (performance.timeOrigin + performance.now(), the
// same clock as the parent's and PostgreSQL's, so the parent can subtract the
// event's `at` from it), and hands the deliveries to the parent when asked.
// It never prints results itself; on any failure it sends one `failed` line
// and exits. It exits when the parent goes away (IPC disconnect), so one
// SIGTERM or Ctrl-C to the bench leaves no orphans.
//
// Protocol (parent → child, each answered by one message with the same `id`):
//   open    {subs, token, companyId, afterSeq, deadline} → opened {connected, closed}
//   status  {atLeast}                                     → status {reached, delivered}
//   collect {}                                            → one `sub` message per subscriber, then collected
//   close   {}                                            → closed
// Unprompted: ready (once, at start-up), failed {message}.
import { performance } from "node:perf_hooks";
import { createClient } from "graphql-ws";
import type { Client } from "graphql-ws";
import WebSocket from "ws";

export interface SubSpec {
  /** Subscriber number across all processes (even: instance B, odd: A). */
  index: number;
  instance: "A" | "B";
  /** The instance's GraphQL HTTP URL. */
  url: string;
}

export type ToChild =
  | { type: "open"; id: number; subs: SubSpec[]; token: string; companyId: string; afterSeq: string; batch: number; deadline: number }
  | { type: "status"; id: number; atLeast: number }
  | { type: "collect"; id: number }
  | { type: "close"; id: number; timeoutMs: number };

export interface SubReport {
  type: "sub";
  id: number;
  index: number;
  instance: "A" | "B";
  /** seq of every delivery, in arrival order (as received: decimal strings). */
  seqs: string[];
  /** Wall-clock ms (sub-ms resolution) at which each delivery reached next(). */
  arrivedAt: Float64Array;
  errors: string[];
  closed: string | null;
  completed: boolean;
  connected: boolean;
}

export type FromChild =
  | { type: "ready" }
  | { type: "failed"; message: string }
  | { type: "opened"; id: number; connected: number; closed: string[] }
  | { type: "status"; id: number; reached: number; delivered: number }
  | SubReport
  | { type: "collected"; id: number }
  | { type: "closed"; id: number };

const SUBSCRIPTION = `subscription($c: ID!, $a: ID) { lockChanged(companyId: $c, afterSeq: $a) { seq at issueId kind } }`;

/** Wall-clock milliseconds with sub-millisecond resolution (Date.now() is whole ms). */
const wallNow = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Sub {
  spec: SubSpec;
  client: Client;
  seqs: string[];
  arrivedAt: number[];
  errors: string[];
  completed: boolean;
  closed: string | null;
  connected: boolean;
  dispose: () => void;
}

const subs: Sub[] = [];

function send(message: FromChild): void {
  if (!process.connected) return;
  process.send!(message);
}

function fail(err: unknown): void {
  const text = (err instanceof Error ? err.message : String(err)).split("\n")[0]!.slice(0, 300);
  try {
    send({ type: "failed", message: text });
  } catch {
    /* the channel is gone; the exit code says enough */
  }
  // Let the IPC message leave before exiting.
  setTimeout(() => process.exit(1), 100);
}

function openSubscriber(spec: SubSpec, token: string, companyId: string, afterSeq: string): Sub {
  const sub: Sub = {
    spec,
    client: null as unknown as Client,
    seqs: [],
    arrivedAt: [],
    errors: [],
    completed: false,
    closed: null,
    connected: false,
    dispose: () => {},
  };
  sub.client = createClient({
    url: spec.url.replace(/^http/, "ws"),
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: 0,
    lazy: false,
    onNonLazyError: () => {},
    on: {
      connected: () => {
        sub.connected = true;
      },
      closed: (event) => {
        const e = event as { code?: number; reason?: string };
        sub.closed = `${e.code ?? "?"} ${e.reason ?? ""}`.trim();
      },
    },
  });
  sub.dispose = sub.client.subscribe<{ lockChanged: { seq: string; at: string; issueId: string; kind: string } }>(
    { query: SUBSCRIPTION, variables: { c: companyId, a: afterSeq } },
    {
      next: (value) => {
        const arrivedAt = wallNow(); // first thing: the moment the message reached subscriber code
        if (value.errors?.length) {
          sub.errors.push(JSON.stringify(value.errors).slice(0, 300));
          return;
        }
        const event = value.data?.lockChanged;
        if (!event) return;
        sub.seqs.push(event.seq);
        sub.arrivedAt.push(arrivedAt);
      },
      error: (err) => {
        const e = err as { message?: string; reason?: string; code?: number };
        sub.errors.push(Array.isArray(err) ? JSON.stringify(err).slice(0, 300) : String(e?.message ?? e?.reason ?? e?.code ?? err));
      },
      complete: () => {
        sub.completed = true;
      },
    },
  );
  return sub;
}

/** Opens the subscribers `batch` at a time, each batch acknowledged (or closed) before the next, until `deadline` (epoch ms). */
async function open(message: Extract<ToChild, { type: "open" }>): Promise<void> {
  for (let start = 0; start < message.subs.length; start += message.batch) {
    const batch = message.subs.slice(start, start + message.batch).map((spec) => openSubscriber(spec, message.token, message.companyId, message.afterSeq));
    subs.push(...batch);
    while (!batch.every((s) => s.connected || s.closed !== null) && Date.now() < message.deadline) await sleep(10);
    if (Date.now() >= message.deadline) break;
  }
  send({
    type: "opened",
    id: message.id,
    connected: subs.filter((s) => s.connected).length,
    closed: subs
      .filter((s) => s.closed !== null)
      .slice(0, 3)
      .map((s) => `subscriber ${s.spec.index}: ${s.closed}`),
  });
}

async function close(message: Extract<ToChild, { type: "close" }>): Promise<void> {
  await Promise.race([
    Promise.allSettled(
      subs.map(async (s) => {
        try {
          s.dispose();
        } catch {
          /* already gone */
        }
        await s.client.dispose();
      }),
    ),
    sleep(message.timeoutMs),
  ]);
  send({ type: "closed", id: message.id });
}

async function handle(message: ToChild): Promise<void> {
  switch (message.type) {
    case "open":
      return open(message);
    case "status": {
      let reached = 0;
      let delivered = 0;
      for (const s of subs) {
        delivered += s.seqs.length;
        if (s.seqs.length >= message.atLeast) reached++;
      }
      send({ type: "status", id: message.id, reached, delivered });
      return;
    }
    case "collect":
      for (const s of subs) {
        send({
          type: "sub",
          id: message.id,
          index: s.spec.index,
          instance: s.spec.instance,
          seqs: s.seqs,
          arrivedAt: Float64Array.from(s.arrivedAt),
          errors: s.errors.slice(0, 5),
          closed: s.closed,
          completed: s.completed,
          connected: s.connected,
        });
      }
      send({ type: "collected", id: message.id });
      return;
    case "close":
      return close(message);
  }
}

if (!process.send) {
  console.error("bench/fanoutClient.ts is a subscriber process of bench/fanout.ts (forked with IPC); it does not run on its own");
  process.exit(2);
}
// The parent is gone (exited, killed, or done with us): so are we.
process.on("disconnect", () => process.exit(0));
process.on("message", (message: ToChild) => {
  handle(message).catch(fail);
});
process.on("uncaughtException", fail);
process.on("unhandledRejection", fail);
send({ type: "ready" });
