import type { BudgetStanding } from './token-budget';

/**
 * Why a lease was not granted (docs/architecture.md, "Admission", "Errors"). The gateway maps each
 * code to its HTTP status in one place; `retryAfterS` feeds the `Retry-After` header. Both backends
 * make these through `admission-errors.ts`, whose messages come from the error catalog.
 * - `queue_full` (429): the chosen provider already holds `max_queued` waiting requests;
 * - `queue_timeout` (503): no lease within `max_wait_ms`; the waiting job was removed;
 * - `queue_unavailable` (503): the queue backend (Redis) cannot be reached, a held lease was lost, or the queue is closing;
 * - `no_available_provider` (503): the pool has no usable candidate (all disabled, invalid or removed);
 * - `rate_limit_exceeded` (429): the client's token budget cannot hold the request now (`retryAfterS`:
 *   until it can), or ever (its weight is over the whole budget: no `retryAfterS`) (docs/architecture.md,
 *   "Token budgets");
 * - `client_aborted`: the caller's AbortSignal fired while waiting; nothing is left queued.
 */
export type AdmissionErrorCode =
  | 'queue_full'
  | 'queue_timeout'
  | 'queue_unavailable'
  | 'no_available_provider'
  | 'rate_limit_exceeded'
  | 'client_aborted';

/**
 * A queue's refusal: a code above, the catalog's message and `Retry-After` for it; a refusal of the
 * client's token budget also carries the client's standing (`budget`).
 */
export class AdmissionError extends Error {
  override readonly name = 'AdmissionError';

  constructor(
    readonly code: AdmissionErrorCode,
    message: string,
    /** Seconds a client should wait before retrying, when retrying can help. */
    readonly retryAfterS?: number,
    /** For the log only: what the backend said (Redis's own error text), never shown to a client. */
    readonly detail?: string,
    /**
     * For `rate_limit_exceeded` by the client's token budget: its tightest window as the refusing
     * step read it (nothing was reserved; least remaining, on a tie the later reset), for the
     * `x-ratelimit-*-tokens` headers (docs/architecture.md, "Token budgets").
     */
    readonly budget?: BudgetStanding,
  ) {
    super(message);
  }
}
