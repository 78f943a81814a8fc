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
 * Fields no log line carries a value of, at the top level or one level down: a job's environment
 * and secrets, tokens, authorization headers, passwords. Values are never logged on purpose; this
 * is the net under that rule.
 */
export const LOG_REDACT_PATHS = [
  ...['token', 'secret', 'secrets', 'secretEnv', 'apiToken', 'password', 'authorization', 'apiKey'].flatMap(
    (k) => [k, `*.${k}`],
  ),
  'env.*',
  '*.env.*',
  'secretEnv.*',
  '*.secretEnv.*',
  'headers.authorization',
  '*.headers.authorization',
  '*.headers.cookie',
];

/**
 * JSON logs to stderr; human-readable ones when stderr is a terminal. Secrets never get here.
 * On a terminal, messages and fields quote names and messages from specs and backends: they are
 * made printable first (JSON lines are escaped by the serializer).
 */
export function makeLogger(io: Io, level: string): Logger {
  const opts = {
    level,
    base: undefined,
    redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' },
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
