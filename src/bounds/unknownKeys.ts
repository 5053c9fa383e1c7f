// A flood of made-up keys must not reach the database once per request.
// Known keys are cached (principal.ts), so only a token that is not a key yet
// known to this process costs a lookup. Those lookups are:
//   - paid for per client address: each lookup that finds nothing takes one
//     token from the address's bucket (BATON_UNKNOWN_KEYS_PER_MINUTE, refilled
//     evenly over the minute); an address with an empty bucket is refused with
//     429 before any lookup, and a key that is found costs nothing;
//   - paid for by everyone together too, at 20 times the per-address rate, so
//     many addresses cannot add up to a flood;
//   - few at once: at most LOOKUPS_AT_ONCE run together, the rest wait in a
//     bounded line and check their bucket again when their turn comes, so a
//     burst of concurrent made-up keys stops at the first failures.
import { LimitExceededError } from "./settings.js";

const LOOKUPS_AT_ONCE = 8;
const MAX_WAITING = 1_000;
const MAX_TRACKED_ADDRESSES = 10_000;
/** The global bucket is this many addresses' worth. */
const GLOBAL_FACTOR = 20;

/** Tokens refilled evenly at `capacity` per minute, up to `capacity`. */
export class Bucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly capacity: number,
    now: number,
  ) {
    this.tokens = capacity;
    this.at = now;
  }

  /** Tokens now, after refilling at capacity per minute. */
  level(now: number): number {
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.at) / 60_000) * this.capacity);
    this.at = now;
    return this.tokens;
  }

  take(now: number): void {
    this.tokens = this.level(now) - 1;
  }

  /** Seconds until one whole token is back. */
  secondsToNext(now: number): number {
    return Math.max(1, Math.ceil(((1 - this.level(now)) * 60) / this.capacity));
  }
}

export class UnknownKeyGuard {
  private readonly byAddress = new Map<string, Bucket>();
  private readonly everyone: Bucket;
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly perMinute: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.everyone = new Bucket(perMinute * GLOBAL_FACTOR, clock());
  }

  /**
   * Runs `lookup` for a token this process does not know, if the address (and
   * everyone) still has budget for one; `found` says whether it was a key.
   * Throws LimitExceededError (unknownKeysPerMinute) without looking up otherwise.
   */
  async lookup<T>(address: string, lookup: () => Promise<T>, found: (result: T) => boolean): Promise<T> {
    this.admit(address);
    await this.turn();
    try {
      this.admit(address); // the bucket may have emptied while this waited
      const result = await lookup();
      if (!found(result)) {
        const now = this.clock();
        this.bucket(address).take(now);
        this.everyone.take(now);
      }
      return result;
    } finally {
      this.release();
    }
  }

  private admit(address: string): void {
    const now = this.clock();
    for (const bucket of [this.bucket(address), this.everyone]) {
      if (bucket.level(now) < 1) {
        throw new LimitExceededError(
          "unknownKeysPerMinute",
          this.perMinute,
          "too many unknown keys from this address; check the key, and retry later",
          bucket.secondsToNext(now),
        );
      }
    }
  }

  private bucket(address: string): Bucket {
    let bucket = this.byAddress.get(address);
    if (bucket) {
      // Most recently used last: the map's first entry is the one to forget.
      this.byAddress.delete(address);
    } else {
      bucket = new Bucket(this.perMinute, this.clock());
      if (this.byAddress.size >= MAX_TRACKED_ADDRESSES) this.byAddress.delete(this.byAddress.keys().next().value!);
    }
    this.byAddress.set(address, bucket);
    return bucket;
  }

  private async turn(): Promise<void> {
    if (this.running < LOOKUPS_AT_ONCE) {
      this.running++;
      return;
    }
    if (this.waiting.length >= MAX_WAITING) {
      throw new LimitExceededError("unknownKeysPerMinute", this.perMinute, `more than ${MAX_WAITING} key lookups are waiting; retry later`, 1);
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next)
      next(); // the slot passes straight to the next in line
    else this.running--;
  }
}
