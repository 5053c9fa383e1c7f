// First SIGINT/SIGTERM drains and exits; a second forces the exit.
//
// One Ctrl-C in a terminal can arrive twice: the terminal sends SIGINT to the
// whole foreground process group, and `npm start` forwards the one it got to
// its child as well. A repeat of the same signal within SAME_SIGNAL_MS is that
// same interrupt and is not a request to force.
import { ConfigError } from "../config.js";
import { EmbeddedPostgresError } from "../db/embedded.js";
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

const SAME_SIGNAL_MS = 1_000;

/** Tells each SIGINT/SIGTERM apart: the first, the same one delivered again, or a second that forces. */
export function signalSeries(): (signal: NodeJS.Signals) => "first" | "repeat" | "force" {
  let first: { signal: NodeJS.Signals; at: number } | null = null;
  return (signal) => {
    if (!first) {
      first = { signal, at: performance.now() };
      return "first";
    }
    return signal === first.signal && performance.now() - first.at < SAME_SIGNAL_MS ? "repeat" : "force";
  };
}

export function onShutdown(log: Logger, stop: () => Promise<void>): void {
  const series = signalSeries();
  const handler = (signal: NodeJS.Signals) => {
    const which = series(signal);
    if (which === "repeat") return;
    if (which === "force") {
      log("warn", "second signal: exiting now", { signal });
      process.exit(1);
    }
    log("info", "stopping", { signal });
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log("error", "error while stopping", errorFields(err));
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
}

/**
 * The one line a user sees when a process cannot start: what happened and,
 * for the failures we know (configuration, the embedded PostgreSQL), what to
 * do. Never a stack.
 */
export function startupFailure(program: string, err: unknown): string {
  if (err instanceof ConfigError || err instanceof EmbeddedPostgresError) return `${program}: ${err.message}`;
  const message = err instanceof Error ? err.message : String(err);
  return `${program}: could not start: ${message.split("\n")[0]}`;
}
