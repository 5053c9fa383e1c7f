// A TCP proxy in front of a test server whose connections a test can cut
// (and refuse while paused): a client's connection dropping, or a server it
// cannot reach for a moment, with nothing mocked on either side.
import net from "node:net";

/** A TCP proxy in front of the server whose connections the test can cut, and refuse while paused. */
export async function cuttableProxy(target: URL) {
  const sockets = new Set<net.Socket>();
  const state = { paused: false, refused: 0 };
  const server = net.createServer((client) => {
    if (state.paused) {
      state.refused++;
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}${target.pathname}`,
    state,
    connections: () => sockets.size,
    cut: () => {
      for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
