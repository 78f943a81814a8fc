/**
 * Typed errors with stable codes, in the manner of isomorphic-git's `src/errors/`. Expected states
 * of a reconcile are typed too (see SpecInvalid, Waiting, Stalling); the CLI maps codes to exit
 * codes and messages in one place (`cli/exit.ts`).
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
  Waiting: 'Waiting',
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
