/**
 * The job's side of the pull agent's lease: the agent writes `lease.json` into the job dir each
 * time the controller renews its claim, and `adv exec` stops the workload when the lease runs out
 * unrenewed — whether the agent died, or the link to the controller stalled. The agent sets the
 * deadlines well inside the controller's own, so the workload is gone before the controller hands
 * the attempt to someone else: no experiment runs twice at once.
 */
import { readFileSync } from 'node:fs';
import { writeJsonAtomic } from './records.js';

export const LEASE_FILE = 'lease.json';

export interface LeaseRecord {
  /** Wall-clock ms: past it the workload gets SIGTERM (it may checkpoint). */
  stopAt: number;
  /** Wall-clock ms: past it, SIGKILL. */
  killAt: number;
}

export function writeLease(path: string, lease: LeaseRecord): void {
  writeJsonAtomic(path, lease);
}

export function readLease(path: string): LeaseRecord | undefined {
  try {
    const v = JSON.parse(readFileSync(path, 'utf8')) as Partial<LeaseRecord>;
    return typeof v.stopAt === 'number' && typeof v.killAt === 'number'
      ? { stopAt: v.stopAt, killAt: v.killAt }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks the lease file every `everyMs` while the workload runs: `stop()` once past `stopAt`,
 * `kill()` once past `killAt`. No file, no lease (every backend but the agent). Returns how to stop
 * watching.
 */
export function watchLease(
  path: string,
  on: { stop(): void; kill(): void },
  now: () => number = Date.now,
  everyMs = 250,
): () => void {
  let stopped = false;
  let killed = false;
  const timer = setInterval(() => {
    const lease = readLease(path);
    if (!lease) return;
    const t = now();
    if (!stopped && t >= lease.stopAt) {
      stopped = true;
      on.stop();
    }
    if (!killed && t >= lease.killAt) {
      killed = true;
      on.kill();
    }
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
