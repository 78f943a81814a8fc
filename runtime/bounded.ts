/**
 * Waits for `work` until `deadline`; past it, says what was left undone and moves on (the work
 * itself goes on until the process ends). A failure is logged, not thrown: adv exec's final
 * writes each get their try.
 */
export async function bounded(
  what: string,
  work: Promise<unknown>,
  deadline: number,
  log: (line: string) => void,
): Promise<void> {
  const ms = Math.max(0, deadline - Date.now());
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<true>((r) => {
    timer = setTimeout(() => r(true), ms);
  });
  const done = work.then(
    () => false,
    (e: Error) => (log(`warning: ${what} failed: ${e.message}`), false),
  );
  const late = await Promise.race([done, timedOut]);
  clearTimeout(timer);
  if (late)
    log(
      `warning: gave up on ${what} after ${Math.round(ms / 1000)} s (adv exec bounds its final writes: --finish-timeout); ending without it`,
    );
}
