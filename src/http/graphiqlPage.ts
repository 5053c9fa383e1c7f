// GraphiQL's page as yoga renders it, with one script added before GraphiQL's
// own: a WebSocket that reports a lost connection in words. GraphiQL shows a
// subscription's error as JSON of the object it was given; for a dropped
// socket that is the browser's Event, which prints as {"isTrusted":true}. The
// wrapper hands graphql-ws, in its place, an object whose only printed field
// is the message (the close code and reason stay readable, unprinted, so
// graphql-ws decides on retries as before). A clean close (1000) is left as
// it is.

/** What GraphiQL shows for a subscription whose connection dropped. */
const CONNECTION_LOST = "the connection to the server was lost; run the subscription again";

/** Runs in the browser, before GraphiQL's bundle captures window.WebSocket. */
const WRAP_WEBSOCKET = `(() => {
  const Native = window.WebSocket;
  if (!Native) return;
  const lost = (event) => {
    if (event.type === "close" && event.code === 1000) return event;
    const said = { message: ${JSON.stringify(CONNECTION_LOST)} };
    for (const key of ["type", "code", "reason", "wasClean", "target"]) {
      if (key in event) Object.defineProperty(said, key, { value: event[key], enumerable: false });
    }
    return said;
  };
  class Socket extends Native {
    set onclose(handler) { super.onclose = typeof handler === "function" ? (event) => handler.call(this, lost(event)) : handler; }
    get onclose() { return super.onclose; }
    set onerror(handler) { super.onerror = typeof handler === "function" ? (event) => handler.call(this, lost(event)) : handler; }
    get onerror() { return super.onerror; }
  }
  window.WebSocket = Socket;
})();`;

/** Where the script goes: after GraphiQL's root element, before the script that renders into it. */
const ROOT = `<div id="root"></div>`;

/** yoga's GraphiQL page with the wrapper added; a page without the root element is a yoga change this must follow. */
export function withConnectionLostMessage(html: string): string {
  const at = html.indexOf(ROOT);
  if (at < 0) throw new Error("GraphiQL's page has no root element: src/http/graphiqlPage.ts must follow @graphql-yoga/render-graphiql");
  const end = at + ROOT.length;
  return `${html.slice(0, end)}\n<script>${WRAP_WEBSOCKET}</script>${html.slice(end)}`;
}
