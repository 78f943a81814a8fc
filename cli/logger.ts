import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import { printable, type Io } from './output.js';

/** Strings (and keys) made printable, deep; errors are left to pino's serializer. */
function printableDeep(v: unknown): unknown {
  if (typeof v === 'string') return printable(v);
  if (Array.isArray(v)) return v.map(printableDeep);
  if (v && typeof v === 'object' && !(v instanceof Error))
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [printable(k), printableDeep(x)]));
  return v;
}

/**
 * JSON logs to stderr; human-readable ones when stderr is a terminal. Secrets never get here.
 * On a terminal, messages and fields quote names and messages from specs and backends: they are
 * made printable first (JSON lines are escaped by the serializer).
 */
export function makeLogger(io: Io, level: string): Logger {
  const opts = {
    level,
    base: undefined,
    redact: { paths: ['*.token', '*.secret', 'env.*'], censor: '[redacted]' },
  };
  if (io.stderr.isTTY)
    return pino(
      {
        ...opts,
        hooks: {
          logMethod(this: Logger, args: Parameters<Logger['info']>, method: Logger['info']) {
            method.apply(this, args.map(printableDeep) as Parameters<Logger['info']>);
          },
        },
      },
      pretty({ destination: io.stderr, colorize: true, ignore: 'pid,hostname', sync: true }),
    );
  return pino(opts, io.stderr as NodeJS.WritableStream & { write(s: string): boolean });
}
