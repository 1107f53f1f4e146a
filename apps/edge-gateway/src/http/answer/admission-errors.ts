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
 * What a client reads for `queue_unavailable`, whatever the queue's own message said: that one may
 * quote the backend (Redis's error text, a host and port), which stays in the gateway's log (the
 * queue logs it when the outage starts; README "Errors").
 */
export const QUEUE_UNAVAILABLE_MESSAGE =
  "The gateway's provider queue is unavailable right now (its backend cannot be reached, or this gateway is shutting down); retry shortly.";

/**
 * Maps a queue's refusal to its HTTP error through `ERROR_CATALOG` (`@iop/validate`; README
 * "Errors"): 429 `queue_full`, 503 `queue_timeout`, `queue_unavailable`, `no_available_provider`,
 * each with `Retry-After` (the queue's seconds, else the catalog's default). `queue_unavailable`
 * always says {@link QUEUE_UNAVAILABLE_MESSAGE}, never the backend's own text. A non-admission error
 * (a bug) becomes 503 `queue_unavailable` too, so a client never hangs on it.
 */
export function admissionToApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as Partial<AdmissionError> | undefined;
  const known = e?.code !== undefined && Object.prototype.hasOwnProperty.call(ANSWER, e.code);
  const code = known ? ANSWER[e.code as AdmissionErrorCode] : 'queue_unavailable';
  const message = code !== 'queue_unavailable' && e?.message ? e.message : QUEUE_UNAVAILABLE_MESSAGE;
  return catalogError(code, message, { retryAfterS: e?.retryAfterS });
}
