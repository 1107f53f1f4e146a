import { AdmissionError, type AdmissionErrorCode } from '@iop/dispatch';
import type { ErrorCode } from '@iop/errors';
import { ApiError, catalogCodeError } from '../../errors';

/** The catalog code each queue refusal is answered with (a waiter whose client left: `client_closed`, 499, no body). */
const ANSWER: Record<AdmissionErrorCode, ErrorCode> = {
  queue_full: 'queue_full',
  queue_timeout: 'queue_timeout',
  queue_unavailable: 'queue_unavailable',
  no_available_provider: 'no_available_provider',
  rate_limit_exceeded: 'rate_limit_exceeded',
  client_aborted: 'client_closed',
};

/**
 * Maps a queue's refusal to its HTTP error through `ERROR_CATALOG` (`@iop/errors`; README
 * "Errors"): 429 `queue_full`, 429 `rate_limit_exceeded` (the client's token budget is spent),
 * 503 `queue_timeout`, `queue_unavailable`, `no_available_provider`,
 * each with `Retry-After` (the queue's seconds, else the catalog's default; none for a request over
 * its client's whole token budget, which retrying cannot help). The message is the
 * queue's, made from the same catalog; a backend's own text is never in it (the queues keep it in
 * `detail`, for the log). A non-admission error (a bug) becomes 503 `queue_unavailable` with the
 * catalog's sentence for an unknown failure, so a client never hangs on it.
 */
export function admissionToApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as Partial<AdmissionError> | undefined;
  const known = e?.code !== undefined && Object.prototype.hasOwnProperty.call(ANSWER, e.code);
  if (known && e?.message) {
    // A budget refusal without a time to wait is a request over the whole budget: retrying cannot help.
    const never = e.code === 'rate_limit_exceeded' && e.retryAfterS === undefined;
    return catalogCodeError(ANSWER[e.code as AdmissionErrorCode], e.message, never ? null : e.retryAfterS);
  }
  return new ApiError({ code: 'queue_unavailable', fields: { why: 'unknown' }, retryAfterS: e?.retryAfterS });
}
