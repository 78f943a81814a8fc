/**
 * Typed errors with stable codes, in the manner of isomorphic-git's `src/errors/`. A reconcile that
 * a person must unblock ends with a `StallingError`; an expected wait is not an error but a result
 * (`requeueAfterMs`, loop/plan/requeue.ts). The CLI maps codes to exit codes and messages in one place
 * (`cli/exit.ts`).
 */

/** Stable error codes. Adding one is an API change; renaming one is a breaking change. */
export const ErrorCode = {
  SpecInvalid: 'SpecInvalid',
  UsageError: 'UsageError',
  NotFound: 'NotFound',
  GitError: 'GitError',
  PushRejected: 'PushRejected',
  BackendError: 'BackendError',
  Stalling: 'Stalling',
  /** A command gave up waiting for something that may still happen (`--once`, a session start). */
  Waiting: 'Waiting',
  /** Something another process holds: the data dir of a running controller. */
  Conflict: 'Conflict',
  /** The local file system refused (a data dir that cannot be written). */
  IoError: 'IoError',
  /** A controller refused these credentials for good (a revoked agent): retrying will not help. */
  Refused: 'Refused',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Base class: every error the project throws on purpose carries a code and structured data. */
export class AdvError<D extends object = Record<string, unknown>> extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly data: D = {} as D,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = code;
  }
}

export const isAdvError = (e: unknown): e is AdvError => e instanceof AdvError;

/**
 * A reconcile that cannot go on until a person changes something (a bad Backend spec, a missing
 * secret, an unknown code ref): it is not retried until its inputs change, and never counts against
 * a backend's health. `reason` becomes the run's reason and its `Stalled` condition's.
 */
export class StallingError extends AdvError<{ reason: string; hint?: string }> {
  constructor(reason: string, message: string, hint?: string) {
    super(ErrorCode.Stalling, message, { reason, ...(hint ? { hint } : {}) });
  }
}

export const isStalling = (e: unknown): e is StallingError => e instanceof StallingError;

/**
 * An error the same request would hit again however often it is retried: the operating system
 * refusing the job's arguments or environment (too large: `E2BIG`; a NUL byte), wherever it shows
 * up. Such a submission stalls the run (a person must change the spec or the secret) instead of
 * being retried as an infrastructure failure.
 */
export function asStallingIfDeterministic(e: unknown): StallingError | undefined {
  if (isStalling(e)) return e;
  const err = e as NodeJS.ErrnoException | undefined;
  const text = `${err?.code ?? ''} ${err?.message ?? String(e)}`;
  if (/\bE2BIG\b|argument list too long/i.test(text))
    return new StallingError(
      'ArgumentsTooLarge',
      `the job's arguments and environment are too large for the operating system (E2BIG): ${err?.message ?? text}`,
      'make the command, env or secrets smaller; pass large data in a file',
    );
  if (/null bytes|NUL byte/i.test(text))
    return new StallingError(
      'NulByte',
      `the job's arguments or environment hold a NUL byte: ${err?.message ?? text}`,
      'remove the NUL from the command, env or secret',
    );
  return undefined;
}
