import { AdmissionError } from '@iop/dispatch';
import { ApiError } from '../errors';

const STATUS: Record<AdmissionError['code'], number> = {
  queue_full: 429,
  queue_timeout: 503,
  queue_unavailable: 503,
  no_available_provider: 503,
  client_aborted: 499,
};

/**
 * Maps a queue's refusal to the HTTP error of DESIGN §6: 429 `queue_full`, 503 `queue_timeout`,
 * `queue_unavailable`, `no_available_provider`, each with `Retry-After`. A non-admission error
 * (a bug) becomes 503 `queue_unavailable` so a client never hangs on it.
 */
export function admissionToApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as Partial<AdmissionError> | undefined;
  const code = e?.code && e.code in STATUS ? e.code : 'queue_unavailable';
  const message = e?.code && e.code in STATUS && e.message ? e.message : 'The provider queue is unavailable.';
  return new ApiError(STATUS[code], code, message, code === 'queue_full' ? 'rate_limit_error' : 'server_error', null, e?.retryAfterS ?? 1);
}
