// Releases N calls from one barrier, so they reach the server together.
export async function race<T>(n: number, call: (i: number) => Promise<T>): Promise<T[]> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const calls = Array.from({ length: n }, (_, i) => gate.then(() => call(i)));
  release();
  return Promise.all(calls);
}

/** Polls `check` until it returns a value other than undefined, or fails at the deadline. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, delay));
  }
}
