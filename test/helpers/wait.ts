/** Polls `check` until it returns a truthy value or the time is up (then throws with `what`). */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T> | T,
  timeoutMs = 30_000,
  everyMs = 50,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
