import { InvalidInputError } from "../domain/errors.js";

/** Page sizes are bounded: a client asks for more pages, not a bigger one. */
export const PAGE_LIMITS = {
  issues: { fallback: 50, max: 500 },
  runs: { fallback: 50, max: 500 },
  companies: { fallback: 50, max: 500 },
  lockEvents: { fallback: 100, max: 1000 },
} as const;

export function pageSize(name: string, value: number | null | undefined, { fallback, max }: { fallback: number; max: number }): number {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < 1 || n > max) throw new InvalidInputError(`${name} must be between 1 and ${max}`);
  return n;
}
