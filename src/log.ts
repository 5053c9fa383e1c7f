// One JSON object per line on stderr: easy to grep, easy to ship.
export type Logger = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export const log: Logger = (level, msg, fields) => {
  const line = JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields });
  process.stderr.write(line + "\n");
};

export const silentLogger: Logger = () => {};

export function errorFields(err: unknown): Record<string, unknown> {
  if (err instanceof Error) return { error: err.message, errorName: err.name, stack: err.stack };
  return { error: String(err) };
}
