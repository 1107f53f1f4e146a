import { AdmissionError, type AdmissionErrorCode } from '@iop/dispatch';
import type { ErrorCode } from '@iop/validate';
import { ApiError, catalogError } from '../../errors';

/** The catalog code each queue refusal is answered with (a waiter whose client left: `client_closed`, 499, no body). */
const ANSWER: Record<AdmissionErrorCode, ErrorCode> = {
  queue_full: 'queue_full',
  queue_timeout: 'queue_timeout',
  queue_unavailable: 'queue_unavailable',
  no_available_provider: 'no_available_provider',
  client_aborted: 'client_closed',
};

/**
 * Maps a queue's refusal to its HTTP error through `ERROR_CATALOG` (`@iop/validate`; README
 * "Errors"): 429 `queue_full`, 503 `queue_timeout`, `queue_unavailable`, `no_available_provider`,
 * each with `Retry-After` (the queue's seconds, else the catalog's default). A non-admission error
 * (a bug) becomes 503 `queue_unavailable` so a client never hangs on it.
 */
export function admissionToApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as Partial<AdmissionError> | undefined;
  const known = e?.code !== undefined && Object.prototype.hasOwnProperty.call(ANSWER, e.code);
  const code = known ? ANSWER[e.code as AdmissionErrorCode] : 'queue_unavailable';
  const message = known && e?.message ? e.message : 'The provider queue is unavailable.';
  return catalogError(code, message, { retryAfterS: e?.retryAfterS });
}
