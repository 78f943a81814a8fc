/** The failures of Vast.ai API calls, one class per kind, with a stable `data.reason`. */
import { AdvError, ErrorCode } from '../../errors.js';

/** Stable `data.reason` values (the class says the same; the reason survives serialisation). */
export const VastFailure = {
  Auth: 'VastAuth',
  OfferTaken: 'OfferTaken',
  Api: 'VastApi',
  Unreachable: 'VastUnreachable',
} as const;
export type VastFailure = (typeof VastFailure)[keyof typeof VastFailure];

export interface VastErrorData {
  reason: VastFailure;
  method?: string;
  /** The path without the query. */
  path?: string;
  status?: number;
  /** The API's `error` word and `msg` (or `message`), key scrubbed. */
  error?: string;
  msg?: string;
  /** The start of a body that was not what was expected. */
  excerpt?: string;
  /** What was wrong with an answer that was not an HTTP error. */
  problem?: 'NotJson' | 'SuccessFalse' | 'MissingField' | 'Pagination';
  /** A create that may have been made although it failed: look for its label before renting again. */
  ambiguous?: boolean;
  attempts?: number;
  /** The socket-level error code of the last try (`ECONNREFUSED`, `UND_ERR_SOCKET`, …). */
  cause?: string;
  hint?: string;
  offerId?: number;
}

/** Any failure of a Vast API call (`code` BackendError; `data.reason` says which). */
export class VastError extends AdvError<VastErrorData> {
  constructor(message: string, data: VastErrorData, options?: { cause?: unknown }) {
    super(ErrorCode.BackendError, message, data, options);
  }
}

/** HTTP 401/403: the key is wrong, revoked or lacks the permission. A person must act. */
export class VastAuthError extends VastError {
  constructor(message: string, data: Omit<VastErrorData, 'reason'>) {
    super(message, { ...data, reason: VastFailure.Auth, hint: 'check the API key secret the Backend names' });
  }
}

/** `no_such_ask`: the offer was rented by someone else (or withdrawn) since the search. */
export class OfferTakenError extends VastError {
  constructor(message: string, data: Omit<VastErrorData, 'reason'>) {
    super(message, { ...data, reason: VastFailure.OfferTaken });
  }
}

/** The API answered, but with an error or with something that is not the answer expected. */
export class VastApiError extends VastError {
  constructor(message: string, data: Omit<VastErrorData, 'reason'>) {
    super(message, { ...data, reason: VastFailure.Api });
  }
}

/** No usable answer within the retry budget (connections refused or dropped, 429s, 5xx). */
export class VastUnreachableError extends VastError {
  constructor(message: string, data: Omit<VastErrorData, 'reason'>, options?: { cause?: unknown }) {
    super(message, { ...data, reason: VastFailure.Unreachable }, options);
  }
}
