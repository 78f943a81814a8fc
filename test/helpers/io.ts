import { rm } from 'node:fs/promises';
import { Writable } from 'node:stream';
import type { Io } from '../../cli/output.js';

/** An Io whose stdout and stderr are captured in memory (not a TTY, so no colour). */
export function captureIo(
  env: NodeJS.ProcessEnv = {},
  cwd = process.cwd(),
): Io & { out(): string; err(): string } {
  const chunks = { out: [] as string[], err: [] as string[] };
  const sink = (into: string[]) =>
    new Writable({
      write(chunk, _enc, cb) {
        into.push(String(chunk));
        cb();
      },
    });
  return {
    stdout: sink(chunks.out),
    stderr: sink(chunks.err),
    env,
    cwd,
    out: () => chunks.out.join(''),
    err: () => chunks.err.join(''),
  };
}

/**
 * Removes a test's temp tree. A local job may still be writing its last records into it when the
 * test ends (ENOTEMPTY while it writes): the removal is retried instead of failing the test.
 */
export function removeTree(path: string): Promise<void> {
  return rm(path, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}
