// A TCP proxy between a client and PostgreSQL that speaks just enough of the
// wire protocol to drop a statement's answer after the server has committed
// it: what a connection lost at the worst moment looks like to the client.
import net from "node:net";
import type { AddressInfo } from "node:net";

export interface PgProxy {
  port: number;
  /** The URL of `databaseUrl`'s database, through this proxy. */
  url(databaseUrl: string): string;
  /** Lets the answers of `passing` more statements through, then drops the next one's whole answer and closes both sides. */
  cutAfter(passing: number): void;
  /** Whether an armed cut has happened. */
  cut(): boolean;
  /** Closes every connection now. */
  cutAll(): void;
  close(): Promise<void>;
}

/**
 * Between a client and PostgreSQL. Armed with cutAfter(n), it lets the answers
 * of n more statements through (each ends with ReadyForQuery), then withholds
 * the next statement's whole answer and closes both sides.
 */
export async function startPgProxy(target: URL): Promise<PgProxy> {
  const state = { armed: false, passing: 0, cut: false };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    client.pipe(upstream);
    let buffer = Buffer.alloc(0);
    let held: Buffer[] = [];
    upstream.on("data", (chunk: Buffer) => {
      if (!state.armed) return void client.write(chunk);
      buffer = Buffer.concat([buffer, chunk]);
      while (buffer.length >= 5) {
        const length = buffer.readInt32BE(1);
        if (buffer.length < 1 + length) break;
        const message = buffer.subarray(0, 1 + length);
        buffer = buffer.subarray(1 + length);
        held.push(message);
        if (message[0] !== 0x5a) continue; // until ReadyForQuery, the statement's answer is incomplete
        if (state.passing > 0) {
          state.passing--;
          for (const m of held) client.write(m);
          held = [];
          continue;
        }
        // Committed (ReadyForQuery says so): drop the answer and the connection.
        state.armed = false;
        state.cut = true;
        client.destroy();
        upstream.destroy();
        return;
      }
    });
    upstream.on("close", () => client.destroy());
    client.on("close", () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url(databaseUrl) {
      const url = new URL(databaseUrl);
      url.hostname = "127.0.0.1";
      url.port = String(port);
      return url.toString();
    },
    cutAll() {
      for (const s of sockets) s.destroy();
    },
    cutAfter(passing) {
      Object.assign(state, { armed: true, passing, cut: false });
    },
    cut: () => state.cut,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
