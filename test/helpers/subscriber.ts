// A lockChanged subscriber over a real graphql-ws socket: every message is
// queued, and tests wait for what they expect with a deadline, never a sleep.
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import { createClient } from "graphql-ws";
import type { Client as WsClient } from "graphql-ws";
import WebSocket from "ws";

export interface Received<T> {
  data?: T;
  errors?: { message: string; extensions?: { code?: string } }[];
}

export class Subscriber<T> {
  readonly messages: Received<T>[] = [];
  closed: { code?: number; reason?: string } | null = null;
  completed = false;
  private waiters: (() => void)[] = [];
  private readonly client: WsClient;
  private dispose: () => void = () => {};

  /** `connectionParams` replaces what the token would give (to send odd ones). */
  constructor(httpUrl: string, token: string | null, connectionParams?: Record<string, unknown>) {
    this.client = createClient({
      url: httpUrl.replace(/^http/, "ws"),
      webSocketImpl: WebSocket,
      connectionParams: connectionParams ?? (token ? { authorization: `Bearer ${token}` } : {}),
      retryAttempts: 0,
      lazy: false,
      on: {
        closed: (event) => {
          const e = event as { code?: number; reason?: string };
          this.closed = { code: e.code, reason: e.reason };
          this.wake();
        },
      },
      onNonLazyError: () => {},
    });
  }

  private wake() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Starts the subscription; resolves once the server holds it (first the socket must be acknowledged). */
  start<V>(doc: TypedDocumentNode<T, V>, variables: V): this {
    this.dispose = this.client.subscribe<T>(
      { query: print(doc), variables: variables as Record<string, unknown> },
      {
        next: (value) => {
          this.messages.push(value as Received<T>);
          this.wake();
        },
        error: (err) => {
          const e = err as { message?: string; code?: number; reason?: string } | { message: string }[];
          this.messages.push({ errors: Array.isArray(e) ? e : [{ message: String(e?.message ?? e?.reason ?? e) }] });
          this.wake();
        },
        complete: () => {
          this.completed = true;
          this.wake();
        },
      },
    );
    return this;
  }

  /** Waits until `predicate` holds over the messages so far. */
  async until(predicate: (messages: Received<T>[]) => boolean, what: string, timeoutMs = 10_000): Promise<Received<T>[]> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.messages)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; got ${this.messages.length} messages: ${JSON.stringify(this.messages.slice(-3))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.messages;
  }

  async count(n: number, timeoutMs?: number) {
    return this.until((m) => m.length >= n, `${n} messages`, timeoutMs);
  }

  async close() {
    this.dispose();
    await this.client.dispose();
  }
}
