/**
 * Processes of this machine by pid: whether one is still there, and how a test ends a tree of them
 * the way a machine that goes away does (a fake cloud's preempted VM or destroyed instance, a
 * benchmark's leftovers).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Every process below `root` in this machine's process tree, read from /proc. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      // /proc/PID/stat: "pid (comm) state ppid …"; comm may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {
      // The process exited while we looked.
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(root);
  return out;
}

/** Whether a process (of this machine's pid namespace) is still there. */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * What a VM's shutdown does to its processes, for an `onPreempt` hook: SIGTERM to every pid given
 * and all their descendants, then SIGKILL to whatever is still there after `graceMs` (default 2 s;
 * the real preemption notice is 30 s). Resolves when all are gone or have been sent SIGKILL.
 *
 *     onPreempt: (node) => killTree(workerPids.get(node.id) ?? [])
 */
export async function killTree(pids: number[], opts: { graceMs?: number } = {}): Promise<void> {
  const all = [...new Set(pids.flatMap((p) => [p, ...descendants(p)]))];
  const signal = (s: NodeJS.Signals) => {
    for (const p of all) {
      try {
        process.kill(p, s);
      } catch {
        // Already gone.
      }
    }
  };
  signal('SIGTERM');
  const deadline = Date.now() + (opts.graceMs ?? 2000);
  while (all.some(alive) && Date.now() < deadline) await sleep(20);
  signal('SIGKILL');
}

/**
 * Kills the process group of the workload an `adv exec` job dir records (`exec.json`), as a lost
 * host would; nothing when adv exec never wrote it or the group is gone already.
 */
export function killJobWorkload(jobDir: string): void {
  const record = join(jobDir, 'exec.json');
  if (!existsSync(record)) return;
  const { childPid } = JSON.parse(readFileSync(record, 'utf8')) as { childPid: number };
  try {
    process.kill(-childPid, 'SIGKILL');
  } catch {
    // already gone
  }
}
