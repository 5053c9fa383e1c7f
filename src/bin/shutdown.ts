// First SIGINT/SIGTERM drains and exits; a second forces the exit.
import type { Logger } from "../log.js";
import { errorFields } from "../log.js";

export function onShutdown(log: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      log("warn", "second signal: exiting now", { signal });
      process.exit(1);
    }
    stopping = true;
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
