import {
  entersQueue,
  resolveRoute,
  type HealthStore,
  type Lease,
  type PoolCandidate,
  type ProviderQueue,
  type ResponseAffinity,
} from '@iop/dispatch';
import type { AdapterConfig, EdgeConfig } from '@iop/validate';
import type { Response } from 'express';
import type { Logger } from 'pino';
import type { ChatRequest, DispatchContext, ResponsesRequest, UpstreamResponse } from './adapters/adapter';
import type { AdapterRegistry } from './adapters/adapter-registry';
import { ApiError, countsAgainstProvider, modelNotFound, upstreamTimeout } from './errors';
import { admissionToApiError } from './http/admission-errors';
import { sendUpstream } from './http/send-upstream';
import { watchUsage, type TokenUsage } from './http/token-usage';

/** The OpenAI endpoint a request came in on; picks the adapter method. */
export type CompletionEndpoint = 'chat' | 'responses';

/** What a dispatch needs from the running gateway; `config()` is read once per request. */
export interface DispatcherDeps {
  config(): EdgeConfig;
  queue?: ProviderQueue;
  adapters: AdapterRegistry;
  logger: Logger;
  /** Provider health (issue 5): unhealthy providers are not candidates; pool failures are recorded. */
  health?: HealthStore;
  /** `previous_response_id` affinity for `/v1/responses` (issue 5). */
  affinity?: ResponseAffinity;
}

/** Where a request went, for the access log and metrics. */
export interface DispatchOutcome {
  routeKind: 'pool' | 'direct';
  nodeId?: string;
  resourceId?: string;
  queueWaitMs?: number;
  /** `performance.now()` when the upstream's first byte was in hand. */
  firstByteAt?: number;
  /** Providers tried before the one that answered (failover). */
  failedOver?: string[];
  /** `performance.now()` when the request started waiting for its lease (pooled requests). */
  queuedAt?: number;
  /** `performance.now()` when the call to the upstream that answered started. */
  upstreamStartedAt?: number;
  /** Type of the adapter that answered (`vllm`, `ollama`, `openai_compat`, `cli`). */
  adapterType?: string;
  /** Tokens the upstream reported in its `usage`, once the answer is done. */
  usage?: TokenUsage;
}

/** A target the dispatcher calls: a pool candidate, or a direct route's adapter. */
interface CallTarget {
  nodeId: string;
  resourceId: string;
  adapter: AdapterConfig;
  upstreamModel: string;
}

/**
 * Serves one completion request end to end (DESIGN §4 dispatch, §6 surface, issue 5 failover):
 * resolves the route (unhealthy providers excluded), takes a lease when the admission rule says so,
 * calls the adapter, streams the answer, and releases the lease on every path — success, upstream
 * error, timeout, client disconnect. A pooled request whose upstream fails before any byte reached
 * the client (connection error, 5xx, no first byte in time) is retried once on another healthy
 * candidate, after its first lease is released, so a retry never holds two slots. Direct routes
 * never touch the queue and are never retried. The client's disconnect aborts the upstream call.
 * Only an `UpstreamError` that `countsAgainstProvider` is recorded in `deps.health` or retried;
 * any other error (the client's 4xx, a fault of the gateway itself) leaves every provider's health
 * as it was, and its lease is released all the same.
 * @throws ApiError for everything answered before the first byte (404, 429, 502, 503, 504); any
 *   other error as it was raised (the error middleware answers it 500 `internal_error`).
 */
export async function dispatchCompletion(
  deps: DispatcherDeps,
  endpoint: CompletionEndpoint,
  body: ChatRequest | ResponsesRequest,
  res: Response,
  outcome: DispatchOutcome,
): Promise<void> {
  const config = deps.config();
  const route = resolveRoute(config, body.model, { exclude: deps.health?.unhealthy() });
  if (!route) throw modelNotFound(body.model);

  // One AbortController per upstream attempt: the client's disconnect aborts the current one, the
  // first-byte timer aborts its own. The queue wait shares the first attempt's.
  let attempt = new AbortController();
  let clientGone = false;
  const onClose = () => {
    if (res.writableFinished) return;
    clientGone = true;
    attempt.abort(new ApiError(499, 'client_closed', 'The client closed the connection.'));
  };
  res.on('close', onClose);
  try {
    if (!route.providerPool) {
      outcome.routeKind = 'direct';
      const { target } = route;
      const resourceId = target.providerId ?? target.adapter.id;
      await callUpstream(deps, endpoint, body, res, { ...target, resourceId }, config, attempt, outcome);
      return;
    }
    outcome.routeKind = 'pool';
    let candidates = await preferAffinity(deps, endpoint, body, route.candidates);
    for (let tries = 0; ; tries++) {
      if (candidates.length === 0) {
        throw admissionToApiError({ code: 'no_available_provider', message: `No healthy provider can serve model "${body.model}" right now.`, retryAfterS: 5 });
      }
      if (entersQueue(route, deps.queue)) outcome.queuedAt = performance.now();
      const lease = entersQueue(route, deps.queue)
        ? await acquire(deps.queue!, route.modelGroupKey, candidates, config, attempt.signal)
        : undefined;
      const candidate = candidates.find((c) => c.providerId === lease?.providerId) ?? candidates[0];
      // Fencing (docs/architecture.md, "Fencing"): a lease the queue can no longer prove stops the call at once.
      const current = attempt;
      const onLeaseLost = () => current.abort(admissionToApiError(lease?.signal.reason));
      lease?.signal.addEventListener('abort', onLeaseLost, { once: true });
      try {
        if (lease) {
          outcome.queueWaitMs = lease.queueWaitMs;
          res.setHeader('x-iop-queue-wait-ms', String(lease.queueWaitMs));
        }
        const target = { ...candidate, resourceId: candidate.providerId };
        await callUpstream(deps, endpoint, body, res, target, config, attempt, outcome);
        return;
      } catch (err) {
        // Only what the upstream did (unreachable, reset, 5xx, no first byte in time) counts against
        // the provider and may fail over (README "Provider health", "Failover"). The client's 4xx and
        // the gateway's own errors are answered as they are: never booked, never retried elsewhere.
        if (!countsAgainstProvider(err)) throw err;
        void deps.health?.record(candidate.providerId, false);
        if (tries > 0 || res.headersSent || clientGone) throw err;
        outcome.failedOver = [...(outcome.failedOver ?? []), candidate.providerId];
        const excluded = deps.health?.unhealthy();
        candidates = candidates.filter((c) => c.providerId !== candidate.providerId && !excluded?.has(c.providerId));
        deps.logger.warn({ model: body.model, provider: candidate.providerId, status: err.status, code: err.code }, 'upstream failed before the first byte; retrying on another provider');
        if (candidates.length === 0) throw err;
        attempt = new AbortController();
      } finally {
        lease?.signal.removeEventListener('abort', onLeaseLost);
        await lease?.release();
      }
    }
  } finally {
    res.off('close', onClose);
  }
}

/** A `/v1/responses` follow-up goes to the provider that produced `previous_response_id`, while it is a healthy candidate. */
async function preferAffinity(deps: DispatcherDeps, endpoint: CompletionEndpoint, body: ChatRequest | ResponsesRequest, candidates: PoolCandidate[]): Promise<PoolCandidate[]> {
  const previous = endpoint === 'responses' ? body.previous_response_id : undefined;
  if (!deps.affinity || typeof previous !== 'string' || previous === '') return candidates;
  const providerId = await deps.affinity.get(previous);
  const preferred = candidates.find((c) => c.providerId === providerId);
  return preferred ? [preferred] : candidates;
}

async function acquire(queue: ProviderQueue, modelGroupKey: string, candidates: PoolCandidate[], config: EdgeConfig, signal: AbortSignal): Promise<Lease> {
  try {
    return await queue.acquireLease({ modelGroupKey, candidates, signal, maxWaitMs: config.queue.max_wait_ms });
  } catch (err) {
    throw admissionToApiError(err);
  }
}

async function callUpstream(
  deps: DispatcherDeps,
  endpoint: CompletionEndpoint,
  body: ChatRequest | ResponsesRequest,
  res: Response,
  target: CallTarget,
  config: EdgeConfig,
  attempt: AbortController,
  outcome: DispatchOutcome,
): Promise<void> {
  outcome.nodeId = target.nodeId;
  outcome.resourceId = target.resourceId;
  outcome.adapterType = target.adapter.type;
  outcome.upstreamStartedAt = performance.now();
  res.setHeader('x-iop-node', target.nodeId);
  res.setHeader('x-iop-resource', target.resourceId);
  const adapter = deps.adapters.get(target.nodeId, target.adapter);
  // request_timeout_ms bounds the time to the upstream's first byte, not a healthy stream (DESIGN §3).
  const timeoutMs = config.gateway.request_timeout_ms;
  const firstByteTimer = setTimeout(() => attempt.abort(upstreamTimeout(timeoutMs)), timeoutMs);
  const { signal } = attempt;
  const ctx: DispatchContext = { upstreamModel: target.upstreamModel, signal };
  const onFirstByte = () => {
    clearTimeout(firstByteTimer);
    outcome.firstByteAt = performance.now();
  };
  // An abort's reason (client gone, first-byte timeout) explains a failure better than the adapter's error.
  const explain = (err: unknown) => (signal.aborted && signal.reason instanceof ApiError ? signal.reason : err);
  try {
    let upstream: UpstreamResponse;
    try {
      upstream = endpoint === 'chat' ? await adapter.chat(body as ChatRequest, ctx) : await adapter.responses(body as ResponsesRequest, ctx);
    } catch (err) {
      throw explain(err);
    }
    upstream = watchUsage(upstream, (usage) => (outcome.usage = usage));
    if (endpoint === 'responses' && deps.affinity && outcome.routeKind === 'pool') {
      upstream = rememberResponseId(upstream, (id) => void deps.affinity!.set(id, target.resourceId));
    }
    await sendUpstream(res, upstream, onFirstByte).catch((err: unknown) => {
      throw explain(err);
    });
  } finally {
    clearTimeout(firstByteTimer);
  }
}

const RESPONSE_ID = /"id"\s*:\s*"(resp[_-][^"]+)"/;

/**
 * Watches an upstream Responses answer for its id (the JSON body, or the first SSE events up to
 * `response.created`) and reports it once, without changing a byte of what the client gets.
 */
function rememberResponseId(upstream: UpstreamResponse, remember: (id: string) => void): UpstreamResponse {
  if (upstream.kind === 'json') {
    const text = typeof upstream.body === 'string' ? upstream.body : Buffer.from(upstream.body).toString('utf8');
    const id = RESPONSE_ID.exec(text)?.[1];
    if (id) remember(id);
    return upstream;
  }
  const source = upstream.body;
  return {
    ...upstream,
    body: (async function* () {
      let seen = '';
      let found = false;
      for await (const chunk of source) {
        if (!found && seen.length < 16_384) {
          seen += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
          const id = RESPONSE_ID.exec(seen)?.[1];
          if (id) {
            found = true;
            remember(id);
          }
        }
        yield chunk;
      }
    })(),
  };
}
