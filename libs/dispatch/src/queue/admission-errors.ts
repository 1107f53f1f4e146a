import { catalogMessage, catalogRetryAfterS, type ErrorMessageArgs, type QueueFullFields } from '@iop/errors';
import { isOutOfMemory } from './redis-connection';
import { AdmissionError, type AdmissionErrorCode } from './admission-error';
import type { QueueClient } from './provider-queue';
import { servingSlots, type ServiceRate } from './service-rate';
import type { BudgetStanding, BudgetWindow } from './token-budget';

/**
 * The refusals of both `ProviderQueue` backends, made in this one module so the memory and the Redis
 * backend answer the same situation with the same words (docs/architecture.md, "Errors"). Each message
 * and `Retry-After` is the catalog's (`ERROR_CATALOG`, `@iop/errors`) for the code.
 */
function refusal<C extends Exclude<AdmissionErrorCode, 'client_aborted' | 'rate_limit_exceeded'>>(
  code: C,
  ...fields: ErrorMessageArgs<C>
): AdmissionError {
  return new AdmissionError(code, catalogMessage(code, ...fields), catalogRetryAfterS(code));
}

/**
 * `queue_full`: every candidate of `fields.model` holds `max_queued` waiting requests, or the client its own
 * `max_queued`, or the waiter was shed (`fields.why`). `retryAfterS` is the queue's estimate
 * (`ServiceRate`), else the catalog's default.
 */
export function queueFull(fields: QueueFullFields, retryAfterS?: number): AdmissionError {
  const error = refusal('queue_full', fields);
  return retryAfterS === undefined ? error : new AdmissionError('queue_full', error.message, retryAfterS);
}

/** Why a request found no place in line (docs/architecture.md, "Clients, priority and fair share"). */
export type FullCause = 'queues_full' | 'client_queued' | 'shed';

/**
 * `queue_full` for a request of `client` on `candidates` of `pool`, by its cause: every candidate's
 * queue full, the client's `max_queued` reached, or the request shed for a higher band. Its
 * Retry-After is `rate`'s estimate for `queued` waiters ahead (for a shed request: the candidates'
 * whole line) served by the candidates' slots, or the client's cap when lower.
 */
export function queueFullFor(
  cause: FullCause,
  request: { model: string; client: QueueClient; candidates: readonly { maxConcurrency: number; maxQueued: number }[] },
  pool: string,
  rate: ServiceRate,
  queued: number,
): AdmissionError {
  const { model, client, candidates } = request;
  const ahead = cause === 'shed' ? candidates.reduce((n, c) => n + c.maxQueued, 0) : queued;
  const retryAfterS = rate.retryAfterS(pool, ahead, servingSlots(candidates, client));
  if (cause === 'client_queued' && client.maxQueued !== undefined)
    return queueFull({ model, why: cause, client: client.id, maxQueued: client.maxQueued }, retryAfterS);
  return queueFull(cause === 'shed' ? { model, why: cause } : { model }, retryAfterS);
}

/** `queue_timeout`: no candidate of `model` freed a slot within `waitedMs` (`max_wait_ms`). */
export function queueTimeout(model: string, waitedMs: number): AdmissionError {
  return refusal('queue_timeout', { model, waitedMs });
}

/**
 * `queue_unavailable`: a Redis command failed. `cause` is a sentence of the queue's own, or the error
 * the Redis client rejected with: it goes to `detail` (the log), while the message is the catalog's
 * sentence for clients, so no backend text reaches one (README "Errors").
 */
export function queueUnavailable(cause: unknown): AdmissionError {
  const detail = catalogMessage('queue_unavailable', {
    why: 'redis_error',
    detail: cause instanceof Error ? cause.message : String(cause),
  });
  // Over maxmemory Redis answers, but refuses new work: said as such, still without Redis's own text.
  const message = catalogMessage(
    'queue_unavailable',
    isOutOfMemory(cause) ? { why: 'client', outOfMemory: true } : { why: 'client' },
  );
  return new AdmissionError('queue_unavailable', message, catalogRetryAfterS('queue_unavailable'), detail);
}

/** `queue_unavailable`: Redis stayed silent for `silentMs` while the request waited (docs/architecture.md, "Fencing"). */
export function redisSilent(silentMs: number, refused = false): AdmissionError {
  return refusal(
    'queue_unavailable',
    refused ? { why: 'redis_silent', silentMs, refused } : { why: 'redis_silent', silentMs },
  );
}

/** `queue_unavailable`: the lease on `provider` could not be renewed in time and was fenced. */
export function leaseLost(provider: string): AdmissionError {
  return refusal('queue_unavailable', { why: 'lease_lost', provider });
}

/** `queue_unavailable`: the queue is closing (the process shuts down); no request is taken or kept. */
export function queueClosing(): AdmissionError {
  return refusal('queue_unavailable', { why: 'closing' });
}

/** `no_available_provider`: no candidate of `model` is configured (all disabled, invalid or removed). */
export function noAvailableProvider(model: string): AdmissionError {
  return refusal('no_available_provider', { model });
}

/**
 * `rate_limit_exceeded`: the `window` of `client`'s token budget (`limit` tokens) holds `used` tokens
 * (charged and reserved) and cannot hold the request's `requested` tokens before `retryMs` ms have
 * passed (docs/architecture.md, "Token budgets"). `retryAfterS` = ⌈retryMs / 1000⌉, at least 1.
 * `standing`: the client's tightest window as the refusing step read it (`AdmissionError.budget`).
 */
export function budgetExceeded(
  client: string,
  window: BudgetWindow,
  counts: { limit: number; used: number; requested: number; retryMs: number },
  standing: BudgetStanding,
): AdmissionError {
  const { limit, used, requested, retryMs } = counts;
  const message = catalogMessage('rate_limit_exceeded', { budget: window, client, limit, used, requested, retryMs });
  const retryAfterS = Math.max(1, Math.ceil(retryMs / 1000));
  return new AdmissionError('rate_limit_exceeded', message, retryAfterS, undefined, standing);
}

/**
 * `rate_limit_exceeded`: the request's `requested` tokens are more than the whole `limit` of `client`'s
 * `window`, so it can never be admitted. No `retryAfterS`: retrying the same request cannot help
 * (docs/architecture.md, "Token budgets"). `standing`: the client's tightest window as the refusing step
 * read it (`AdmissionError.budget`).
 */
export function budgetTooLarge(
  client: string,
  window: BudgetWindow,
  counts: { limit: number; requested: number },
  standing: BudgetStanding,
): AdmissionError {
  const fields = { budget: window, client, limit: counts.limit, requested: counts.requested, tooLarge: true } as const;
  const message = catalogMessage('rate_limit_exceeded', fields);
  return new AdmissionError('rate_limit_exceeded', message, undefined, undefined, standing);
}

/** `client_aborted`: the caller's signal fired while the request waited (answered `client_closed`, 499). */
export function clientAborted(): AdmissionError {
  return new AdmissionError('client_aborted', catalogMessage('client_closed'));
}
