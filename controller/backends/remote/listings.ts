/**
 * The lists a backend's polls make (one per zone, or one paginated list per pass), kept for the
 * background tasks that wait on one machine (a node to be READY, an instance to run): they read
 * the next list instead of asking the cloud once per machine every few seconds. Nothing here calls
 * anything; a task that hears of no list in time asks for its machine itself.
 */
/** Thrown in a provisioning task of an adapter that was closed: it stops, and nothing is recorded. */
export class AdapterClosed extends Error {
  constructor() {
    super('the adapter was closed');
  }
}

export class Listings<T> {
  private last: { takenAt: number; items: ReadonlyMap<string, T> } | undefined;
  private readonly waiters = new Set<() => void>();

  /** A poll's list, begun at `takenAt`: what it holds, by key. */
  publish(takenAt: number, items: ReadonlyMap<string, T>): void {
    if (this.last && this.last.takenAt > takenAt) return;
    this.last = { takenAt, items };
    for (const wake of [...this.waiters]) wake();
  }

  /**
   * `key` in the first list begun at or after `since`: `{ item }` (absent from that list: no
   * item), or undefined when no such list comes within `waitMs` (nobody is polling).
   */
  async after(since: number, key: string, waitMs: number): Promise<{ item?: T } | undefined> {
    const found = () => {
      if (!this.last || this.last.takenAt < since) return undefined;
      const item = this.last.items.get(key);
      return item === undefined ? {} : { item };
    };
    const now = found();
    if (now) return now;
    return new Promise((resolve) => {
      const done = (v: { item?: T } | undefined) => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve(v);
      };
      const wake = () => {
        const v = found();
        if (v) done(v);
      };
      const timer = setTimeout(() => done(undefined), Math.max(0, waitMs));
      timer.unref?.();
      this.waiters.add(wake);
    });
  }
}
