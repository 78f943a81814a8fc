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
