// Request bodies under a byte limit that counts what arrives, not what
// Content-Length declares: a chunked body, or one that lies about its length,
// is cut off at the limit, and nothing past it is kept. The limit is the
// caller's: maxBodyBytes with a valid key, anonymousMaxBodyBytes without one
// (the principal is resolved from the headers before the body is read).
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Plugin } from "graphql-yoga";
import type { Principal } from "../domain/types.js";
import type { TransportContext } from "./documents.js";
import { limitError } from "./documents.js";
import { LimitExceededError } from "./settings.js";
import type { Limits } from "./settings.js";

type BodyLimit = "maxBodyBytes" | "anonymousMaxBodyBytes";

export const bodyLimitOf = (principal: Principal | null): BodyLimit => (principal ? "maxBodyBytes" : "anonymousMaxBodyBytes");

function tooLarge(name: BodyLimit, max: number) {
  const error = limitError(new LimitExceededError(name, max, `request body is larger than ${max} bytes`));
  (error.extensions.http as { status: number }).status = 413;
  return error;
}

/** A yoga plugin: the request parser reads the body through a counter that fails at the caller's limit. */
export function bodyLimit(limits: Limits, onRefused: (limit: string) => void): Plugin<TransportContext> {
  return {
    onRequestParse({ request, serverContext, requestParser, setRequestParser, fetchAPI }) {
      const name = bodyLimitOf((serverContext as Partial<TransportContext>).principal ?? null);
      const max = limits[name];
      const declared = request.headers.get("content-length");
      if (Number(declared ?? 0) > max) {
        onRefused(name);
        throw tooLarge(name, max);
      }
      // With a Content-Length, Node's parser delivers exactly that many bytes: only a body without one
      // (chunked) needs counting as it arrives.
      if (declared !== null || !requestParser || !request.body) return;
      const parse = requestParser;
      setRequestParser((req) => {
        let read = 0;
        // A native stream (a Request made with the global fetch API) needs the native TransformStream, as in yoga's own limit.
        const Transform = req.body instanceof ReadableStream ? globalThis.TransformStream : fetchAPI.TransformStream;
        const counted = req.body!.pipeThrough(
          new Transform({
            transform(chunk: Uint8Array, controller) {
              read += chunk.byteLength;
              if (read > max) {
                onRefused(name);
                controller.error(tooLarge(name, max));
              } else controller.enqueue(chunk);
            },
          }),
        );
        // @ts-expect-error duplex is needed for a streamed body, and missing from the types
        return parse(new fetchAPI.Request(req.url, { method: req.method, headers: req.headers, signal: req.signal, body: counted, duplex: "half" }));
      });
    },
  };
}

/** A client that waits for `100 Continue` is told to send only when the length it declares is within its limit. */
export function answerExpectContinue(req: IncomingMessage, res: ServerResponse, max: number): void {
  if (req.headers.expect?.toLowerCase() !== "100-continue") return;
  if (Number(req.headers["content-length"] ?? 0) <= max) res.writeContinue();
}

/** How much of a refused body is read and thrown away, and how long a connection that keeps sending is kept. */
const DISCARD_BYTES = 4 * 1024 * 1024;
const GRACE_MS = 5_000;

/**
 * After an answer given before the body was read to its end (a 413): throws
 * away the rest of a body of up to DISCARD_BYTES (so the connection stays
 * usable and a client that sends its whole body before it reads gets its
 * answer rather than a reset), then stops reading. A client still sending
 * past that is left to read its answer, and is cut off after GRACE_MS.
 * Nothing is kept either way.
 */
export function discardRest(req: IncomingMessage): void {
  const hasBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
  if (!hasBody || req.readableEnded || req.destroyed) return;
  const timer = setTimeout(() => req.destroy(), GRACE_MS).unref();
  req.once("end", () => clearTimeout(timer)).once("close", () => clearTimeout(timer));
  if (Number(req.headers["content-length"] ?? 0) > DISCARD_BYTES) return;
  let seen = 0;
  const onData = (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > DISCARD_BYTES) {
      req.off("data", onData);
      req.pause();
    }
  };
  req.on("data", onData);
  req.resume();
}
