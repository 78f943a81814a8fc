/**
 * One controller per data dir, held by the kernel: an `flock(2)` on `<data-dir>/controller.lock`,
 * taken by util-linux `flock(1)` whose lock-holding process reads from a pipe of ours. When this
 * process ends in any way (exit, SIGKILL, OOM) the pipe closes, that process exits and the kernel
 * drops the lock: no stale lock file to clean up, no pid to guess about. A second controller on the
 * same data dir (the same controller id, the same local job dirs) refuses to start.
 *
 * Node has no flock of its own; a native addon would need a compiler on every install, while
 * `flock(1)` is in util-linux, which every Debian-like system has (Priority: required).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdvError, ErrorCode } from '../../errors.js';
import { toolEnv } from '../../internal/child-env.js';

export interface DataDirLock {
  readonly file: string;
  release(): void;
}

/** Takes the data dir's lock, waiting up to `waitMs` for a controller that is exiting. */
export async function lockDataDir(dataDir: string, waitMs = 10_000): Promise<DataDirLock> {
  const file = join(dataDir, 'controller.lock');
  const child = spawn(
    'flock',
    [
      '--exclusive',
      '--timeout',
      String(Math.max(0, waitMs / 1000)),
      '--conflict-exit-code',
      '75',
      file,
      'sh',
      '-c',
      'echo locked; exec cat',
    ],
    // It lives as long as the controller: its /proc/PID/environ must hold none of our credentials.
    { stdio: ['pipe', 'pipe', 'pipe'], env: toolEnv('flock') },
  );
  const outcome = await new Promise<'locked' | { code: number | null; err?: Error }>((resolve) => {
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString('utf8');
      if (out.includes('locked\n')) resolve('locked');
    });
    child.on('error', (err) => resolve({ code: null, err }));
    child.on('exit', (code) => resolve({ code }));
  });
  if (outcome !== 'locked') {
    child.kill();
    throw lockError(dataDir, outcome);
  }
  // The lock lives as long as this process: nothing here keeps the event loop alive.
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr])
    (s as unknown as { unref?: () => void }).unref?.();
  return { file, release: () => release(child) };
}

function release(child: ChildProcess): void {
  child.stdin?.end();
  child.kill();
}

function lockError(dataDir: string, o: { code: number | null; err?: Error }): AdvError {
  if (o.err && (o.err as NodeJS.ErrnoException).code === 'ENOENT')
    return new AdvError(ErrorCode.UsageError, 'cannot lock the data dir: flock(1) is not installed', {
      hint: 'install util-linux (apt-get install util-linux); it holds the lock that keeps two controllers off one data dir',
    });
  if (o.code !== 75)
    return new AdvError(
      ErrorCode.IoError,
      `cannot lock ${dataDir}/controller.lock (flock exited ${o.code})`,
      {
        hint: 'check that the data dir is writable and on a local file system',
      },
    );
  return new AdvError(
    ErrorCode.Conflict,
    `another controller is running on the data dir ${dataDir}${holder(dataDir)}`,
    {
      hint: 'stop it first; or, on another machine, give this one its own --data-dir: it then stands by and takes over when the first stops renewing its lease',
    },
  );
}

/** ` (pid 123, started …)` from the running controller's runtime file, when it says. */
function holder(dataDir: string): string {
  try {
    const info = JSON.parse(readFileSync(join(dataDir, 'controller.json'), 'utf8')) as {
      pid?: number;
      startedAt?: string;
      http?: string;
    };
    const parts = [
      info.pid && `pid ${info.pid}`,
      info.startedAt && `started ${info.startedAt}`,
      info.http && `serving ${info.http}`,
    ];
    const said = parts.filter(Boolean);
    return said.length ? ` (${said.join(', ')})` : '';
  } catch {
    return '';
  }
}

/** Runs `open` holding the data dir's lock; releases it if `open` fails. */
export async function withDataDirLock<T>(
  dataDir: string,
  waitMs: number | undefined,
  open: (lock: DataDirLock) => Promise<T>,
): Promise<T> {
  const lock = await lockDataDir(dataDir, waitMs);
  try {
    return await open(lock);
  } catch (e) {
    lock.release();
    throw e;
  }
}
