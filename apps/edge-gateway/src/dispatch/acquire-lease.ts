import {
  AdmissionError,
  entersQueue,
  estimateTokenWeight,
  type Lease,
  type PoolCandidate,
  type QueueClient,
  type Route,
  type TokenWeight,
} from '@iop/dispatch';
import { ApiError } from '../errors';
import { admissionToApiError } from '../http/answer/admission-errors';
import { setRateLimitHeaders } from '../http/answer/rate-limit-headers';
import { requestLogger } from '../http/request/request-id';
import type { CompletionRequest } from './completion-request';

/**
 * Takes a lease on one of `offered` when the admission rule says so (`entersQueue`,
 * docs/architecture.md, "Request path"): a provider pool with a model group, and a queue. The wait
 * is bounded by `queue.max_wait_ms` and by `signal` (the attempt's: the client leaving, the drain
 * running out); `outcome.queuedAt` marks its start for the trace. The request's client
 * (`res.locals.client`, set by `apiKeyAuth`) decides its place in line. When a candidate has a token
 * limit or the client has a token budget, the request's token weight goes with it
 * (`estimateTokenWeight`, estimated once per request; docs/architecture.md, "Token limits", "Token
 * budgets"); otherwise none is estimated. A refusal of the client's budget puts the client's standing
 * that came with it (`AdmissionError.budget`, read in the refusing step: no queue call more) in the
 * `x-ratelimit-*-tokens` headers (README "Token budgets: what a client sees").
 * @returns the lease (its `providerId` names the candidate granted), or undefined when the request
 *   enters no queue.
 * @throws ApiError the queue's refusal (`admissionToApiError`: 429 `queue_full`, `rate_limit_exceeded`,
 *   503 `queue_timeout`, `queue_unavailable`, `no_available_provider`), or the abort's reason when
 *   the wait was aborted.
 */
export async function acquireLease(
  req: CompletionRequest,
  route: Route,
  offered: PoolCandidate[],
  signal: AbortSignal,
): Promise<Lease | undefined> {
  const queue = req.deps.queue;
  if (!entersQueue(route, queue)) return undefined;
  req.outcome.queuedAt = performance.now();
  const client: QueueClient | undefined = req.res.locals.client;
  try {
    return await queue.acquireLease({
      modelGroupKey: route.modelGroupKey,
      candidates: offered,
      signal,
      maxWaitMs: req.config.queue.max_wait_ms,
      // Its band, weight and caps decide its place in line (docs/architecture.md, "Clients, priority and fair share").
      client,
      ...(isBudgeted(client) || offered.some((c) => c.maxTokensInFlight !== undefined)
        ? { tokens: tokenWeightOf(req) }
        : {}),
    });
  } catch (err) {
    // Left the queue because the wait was aborted: the abort's reason (client gone, gateway shutting down) says why.
    if (signal.aborted && signal.reason instanceof ApiError) throw signal.reason;
    // What the backend said stays in the log; the client reads the catalog's sentence (README "Errors").
    if (err instanceof AdmissionError && err.detail)
      requestLogger(req.res, req.deps.logger).info({ code: err.code, detail: err.detail }, 'queue refused the request');
    if (err instanceof AdmissionError && err.budget) setRateLimitHeaders(req.res, err.budget);
    throw admissionToApiError(err);
  }
}

/** True when `client` has a token budget (`tokens_per_minute` or `tokens_per_day`): admission charges its requests. */
export function isBudgeted(client: QueueClient | undefined): client is QueueClient {
  const b = client?.tokenBudgets;
  return b !== undefined && (b.perMinute !== undefined || b.perDay !== undefined);
}

/** The request's token weight, estimated on first use and kept for a second attempt. */
function tokenWeightOf(req: CompletionRequest): TokenWeight {
  req.tokenWeight ??= estimateTokenWeight(req.endpoint, req.body);
  return req.tokenWeight;
}
