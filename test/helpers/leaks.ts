/**
 * What a test run or a benchmark started and left running.
 *
 * A run marks itself first (`markRun`): an id in ADV_TEST_RUN, and a temp dir of its own as TMPDIR.
 * Everything it starts inherits both, or at least TMPDIR (local jobs get it in their small base
 * environment), and the tests make their temp dirs under it (ssh and slurm jobs run there, started
 * by an sshd with an environment of its own). A process is the run's when its environment carries
 * the id or that TMPDIR, or its command line or working dir is under that TMPDIR. Processes of other
 * runs — another checkout testing on the same machine — carry neither and are never counted.
 */
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir, uptime } from 'node:os';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** A run's marks, as `markRun` set them in this process's environment. */
export interface RunMark {
  id: string;
  tmp: string;
}

/** A process of the run that is still alive. */
export interface Leftover {
  pid: number;
  ageSec: number;
  cmd: string;
}

/**
 * Marks this process's run (once: a second call, for a second vitest project in the same process,
 * returns the same marks). Call it before anything is started.
 */
export function markRun(): RunMark {
  const id = process.env.ADV_TEST_RUN;
  const tmp = process.env.ADV_TEST_TMP;
  if (id && tmp && process.env.TMPDIR === tmp) return { id, tmp };
  // Short: sshd's and git's unix sockets go under it, and a socket path has at most 107 bytes.
  const dir = mkdtempSync(join(tmpdir(), 'advt-'));
  process.env.ADV_TEST_RUN = basename(dir);
  process.env.ADV_TEST_TMP = dir;
  process.env.TMPDIR = dir;
  return { id: basename(dir), tmp: dir };
}

/**
 * Machine-wide daemons a test starts when they are not up and leaves running on purpose, for every
 * later run: munge (test/infra/slurm-start.sh; SLURM authenticates through it). Never counted.
 */
const SHARED_DAEMONS: readonly RegExp[] = [/^(\S*\/)?munged(\s|$)/];

/** /proc/<pid>/stat fields after the command name: state, ppid, …, starttime (ticks since boot). */
function stat(pid: number): { state: string; ppid: number; startTicks: number } | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { state: f[0]!, ppid: Number(f[1]), startTicks: Number(f[19]) };
  } catch {
    return undefined;
  }
}

function read(path: string): string {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return '';
  }
}

/** The pids of this process and its ancestors: the runner itself is not a leftover. */
function selfAndAncestors(): Set<number> {
  const out = new Set<number>();
  for (let pid = process.pid; pid > 1 && !out.has(pid); pid = stat(pid)?.ppid ?? 0) out.add(pid);
  return out;
}

/**
 * The run's processes alive now, but for this process, its ancestors and its own children (vitest's
 * workers, the esbuild service of a build in a global setup: they end with it). What a test starts
 * is a grandchild, or an orphan once its worker has gone. Zombies have ended and are not counted.
 */
export function leftovers(mark: RunMark): Leftover[] {
  const skip = selfAndAncestors();
  const env = [`\0ADV_TEST_RUN=${mark.id}\0`, `\0TMPDIR=${mark.tmp}\0`];
  const under = `${mark.tmp}/`;
  const out: Leftover[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || skip.has(pid)) continue;
    const st = stat(pid);
    if (!st || st.state === 'Z' || st.state === 'X') continue;
    const cmd = read(`/proc/${pid}/cmdline`).replace(/\0+$/, '').replace(/\0/g, ' ');
    if (!cmd) continue; // a kernel thread
    if (SHARED_DAEMONS.some((d) => d.test(cmd))) continue;
    if (st.ppid === process.pid) continue;
    let cwd = '';
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      // not ours to read
    }
    const environ = `\0${read(`/proc/${pid}/environ`)}`;
    const ours = env.some((e) => environ.includes(e)) || cmd.includes(under) || `${cwd}/`.startsWith(under);
    if (ours) out.push({ pid, ageSec: Math.round(uptime() - st.startTicks / 100), cmd });
  }
  return out;
}

/** Polls until none of the run's processes is left, or `timeoutMs` passed; resolves to those left. */
export async function awaitNoneLeft(mark: RunMark, timeoutMs: number): Promise<Leftover[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = leftovers(mark);
    if (!left.length || Date.now() >= deadline) return left;
    await sleep(200);
  }
}

/** One line per process: pid, age, command line. */
export function describeLeftovers(left: readonly Leftover[]): string {
  return left
    .map(
      (p) => `  pid ${p.pid}, ${p.ageSec} s old: ${p.cmd.length > 300 ? `${p.cmd.slice(0, 300)}…` : p.cmd}`,
    )
    .join('\n');
}

/** SIGKILLs the run's leftovers, a few rounds (what they started may show up as they go). */
export async function killLeftovers(mark: RunMark): Promise<void> {
  for (let round = 0; round < 5; round++) {
    const left = leftovers(mark);
    if (!left.length) return;
    for (const p of left)
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone already
      }
    await sleep(100);
  }
}

/**
 * Waits (up to `graceMs`) for the run's processes to end; any left are named on stderr, killed,
 * and fail the run (`process.exitCode = 1`: vitest ignores an error thrown by a global teardown).
 * Resolves to whether nothing was left.
 */
export async function checkNoneLeft(mark: RunMark, what: string, graceMs = 20_000): Promise<boolean> {
  const left = await awaitNoneLeft(mark, graceMs);
  if (!left.length) return true;
  process.stderr.write(
    `\n${what} left ${left.length} process${left.length > 1 ? 'es' : ''} running ${graceMs / 1000} s after the end (each test and benchmark must stop what it starts, in afterAll/finally):\n${describeLeftovers(left)}\n(killed now)\n\n`,
  );
  process.exitCode = 1;
  await killLeftovers(mark);
  return false;
}

const ending = new Map<string, Promise<boolean>>();

/**
 * The end of a run: `checkNoneLeft`, then the run's temp dir goes. Once per run: vitest may call a
 * slow global teardown a second time while the first still waits.
 */
export function endRun(mark: RunMark, what: string, graceMs?: number): Promise<boolean> {
  let end = ending.get(mark.id);
  if (!end) {
    end = checkNoneLeft(mark, what, graceMs).then((clean) => {
      rmSync(mark.tmp, { recursive: true, force: true, maxRetries: 5 });
      return clean;
    });
    ending.set(mark.id, end);
  }
  return end;
}
