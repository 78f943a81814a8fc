/**
 * The one place where errors become exit codes and messages. Commands throw typed errors
 * (`AdvError` with a code); nothing else in the CLI calls `process.exit`.
 */
import { ErrorCode, isAdvError } from '../controller/index.js';
import { printable, printableLines } from './output.js';

/** Exit codes, stable for scripts and CI jobs. */
export const ExitCode = {
  Ok: 0,
  /** The input is invalid (specs fail validation), or a plan found errors. */
  Invalid: 1,
  /** The command line is wrong. */
  Usage: 2,
  /** Something named does not exist. */
  NotFound: 3,
  /** A remote (git, backend, store) failed. */
  Remote: 4,
  /** Gave up waiting (`adv controller --once --timeout`). */
  Timeout: 5,
  /** Something is in use by another process (a controller already runs on the data dir). */
  Busy: 6,
  /** The local file system refused (a data dir that cannot be written). */
  Io: 7,
  /** The controller refused our credentials for good (`adv agent` revoked, or its enrollment refused). */
  Refused: 8,
  /** A bug: an error without a code. */
  Internal: 70,
} as const;

const byCode: Record<string, number> = {
  [ErrorCode.SpecInvalid]: ExitCode.Invalid,
  [ErrorCode.UsageError]: ExitCode.Usage,
  [ErrorCode.NotFound]: ExitCode.NotFound,
  [ErrorCode.GitError]: ExitCode.Remote,
  [ErrorCode.PushRejected]: ExitCode.Remote,
  [ErrorCode.BackendError]: ExitCode.Remote,
  [ErrorCode.Waiting]: ExitCode.Timeout,
  [ErrorCode.Conflict]: ExitCode.Busy,
  [ErrorCode.IoError]: ExitCode.Io,
  [ErrorCode.Refused]: ExitCode.Refused,
};

/**
 * Prints the error for a person and returns the exit code. Messages quote names and output of
 * other programs: they are made printable (line breaks kept, nothing else that steers a terminal).
 */
export function reportError(err: unknown, stderr: NodeJS.WritableStream): number {
  if (isAdvError(err)) {
    const hint = typeof err.data.hint === 'string' ? `\n  fix: ${printableLines(err.data.hint)}` : '';
    stderr.write(`error: ${printableLines(err.message)}${hint}\n`);
    return byCode[err.code] ?? ExitCode.Internal;
  }
  const e = err as NodeJS.ErrnoException;
  if (e?.code === 'ENOENT' && e.path) {
    stderr.write(`error: ${printable(e.path)}: no such file or directory\n  fix: check the path\n`);
    return ExitCode.NotFound;
  }
  stderr.write(
    `internal error: ${printableLines(e?.stack ?? String(err))}\n  please report this with the command you ran\n`,
  );
  return ExitCode.Internal;
}
