// One JSON object per line on stderr: easy to grep, easy to ship.
export type Logger = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export const log: Logger = (level, msg, fields) => {
  const line = JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields });
  process.stderr.write(`${line}\n`);
};

export const silentLogger: Logger = () => {};

export function errorFields(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { error: String(err) };
  // A system error (ECONNREFUSED, ETIMEDOUT, …) is the environment's, not a bug: its stack says nothing.
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && /^E[A-Z0-9_]+$/.test(code)) return { error: err.message, errorName: err.name, code };
  return { error: err.message, errorName: err.name, stack: err.stack };
}
