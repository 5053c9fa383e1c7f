// First SIGINT/SIGTERM drains and exits; a second forces the exit. Shared by
// the server (onShutdown) and the recovery loop (onStopSignals).
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
function signalSeries(): (signal: NodeJS.Signals) => "first" | "repeat" | "force" {
  let first: { signal: NodeJS.Signals; at: number } | null = null;
  return (signal) => {
    if (!first) {
      first = { signal, at: performance.now() };
      return "first";
    }
    return signal === first.signal && performance.now() - first.at < SAME_SIGNAL_MS ? "repeat" : "force";
  };
}

/**
 * Calls `first` on the first SIGINT/SIGTERM, ignores the same signal
 * delivered again, and exits 1 on a second (after `force`, to say so).
 */
export function onStopSignals(first: (signal: NodeJS.Signals) => void, force?: (signal: NodeJS.Signals) => void): void {
  const series = signalSeries();
  const handler = (signal: NodeJS.Signals) => {
    const which = series(signal);
    if (which === "repeat") return;
    if (which === "force") {
      force?.(signal);
      process.exit(1);
    }
    first(signal);
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
}

/** The first signal runs `stop`, then exits 0 (1 if it failed); a second exits 1 at once. */
export function onShutdown(log: Logger, stop: () => Promise<void>): void {
  onStopSignals(
    (signal) => {
      log("info", "stopping", { signal });
      stop().then(
        () => process.exit(0),
        (err: unknown) => {
          log("error", "error while stopping", errorFields(err));
          process.exit(1);
        },
      );
    },
    (signal) => log("warn", "second signal: exiting now", { signal }),
  );
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
