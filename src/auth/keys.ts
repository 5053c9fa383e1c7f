// API keys: 256 random bits, shown once, stored only as a sha256 hash. A fast
// hash is right here: the keys are random, not passwords, so there is nothing
// to brute-force, and the lookup sits on every request.
import { createHash, randomBytes } from "node:crypto";

export type KeyKind = "board" | "agent" | "admin";

export function generateKey(kind: KeyKind): { key: string; hash: string } {
  const key = `baton_${kind}_${randomBytes(32).toString("base64url")}`;
  return { key, hash: hashKey(key) };
}

export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}
