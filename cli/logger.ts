import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { Io } from './output.js';

/** JSON logs to stderr; human-readable ones when stderr is a terminal. Secrets never get here. */
export function makeLogger(io: Io, level: string): Logger {
  const opts = {
    level,
    base: undefined,
    redact: { paths: ['*.token', '*.secret', 'env.*'], censor: '[redacted]' },
  };
  if (io.stderr.isTTY)
    return pino(opts, pretty({ destination: io.stderr, colorize: true, ignore: 'pid,hostname', sync: true }));
  return pino(opts, io.stderr as NodeJS.WritableStream & { write(s: string): boolean });
}
