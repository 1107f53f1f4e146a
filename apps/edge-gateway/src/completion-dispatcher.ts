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
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type {
  Adapter,
  ChatRequest,
  DispatchContext,
  EmbeddingsRequest,
  ResponsesRequest,
  UpstreamResponse,
} from './adapters/adapter';
import { ADAPTER_LABEL, FIELD_TABLES, type AdapterRegistry } from './adapters/adapter-registry';
import { applyFieldTable, endpointNotServed, type Endpoint } from './adapters/request-fields';
import {
  ApiError,
  catalogError,
  clientClosed,
  failsOver,
  modelNotFound,
  shuttingDown,
  toClientError,
  UpstreamError,
  upstreamTimeout,
} from './errors';
import { requestLogger } from './http/request-id';
import { admissionToApiError } from './http/admission-errors';
import { sendJson, sendUpstream, type SendResult } from './http/send-upstream';
import { watchUsage, type TokenUsage } from './http/token-usage';

/** The OpenAI endpoint a request came in on; picks the adapter method and its field table. */
export type CompletionEndpoint = Endpoint;

/** A request body as its route parsed it. */
export type DispatchBody = ChatRequest | ResponsesRequest | EmbeddingsRequest;

/** What a dispatch needs from the running gateway; `config()` is read once per request. */
export interface DispatcherDeps {
  config(): EdgeConfig;
  queue?: ProviderQueue;
  adapters: AdapterRegistry;
  logger: Logger;
  /** Provider health (README "Provider health"): providers out of it are not candidates; request results are recorded. */
  health?: HealthStore;
  /** `previous_response_id` affinity for `/v1/responses` (README "Affinity"). */
  affinity?: ResponseAffinity;
  /**
   * Aborted when the drain after SIGTERM runs out: every running request's upstream call is aborted
   * with `shuttingDown()`, so its client gets a 503 or the stream's error event before the
   * connection closes. The signal must allow one listener per running request (`setMaxListeners(0, …)`).
   */
  shutdown?: AbortSignal;
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

/** The request id of `res` (`x-request-id`, set by the request observer), or a fresh one. */
function requestIdOf(res: Response): string {
  const id = res.getHeader('x-request-id');
  if (typeof id === 'string' && id !== '') return id;
  const fresh = randomUUID();
  if (!res.headersSent) res.setHeader('x-request-id', fresh);
  return fresh;
}

/**
 * Serves one request of `/v1/chat/completions`, `/v1/responses` or `/v1/embeddings` end to end
 * (README "Pooled and direct routes", "Failover", "Provider health"):
 * 1. resolves the route; providers out of health (unhealthy, backing off, half-open) are not
 *    candidates, except that a request may claim the one trial of a half-open provider;
 * 2. keeps the candidates whose adapter can carry the request's fields (its field table); none → 400
 *    naming the field (an endpoint the adapter lacks → 400 naming the endpoint);
 * 3. takes a lease when the admission rule says so, calls the adapter, streams the answer, and
 *    releases the lease on every path: success, upstream error, timeout, idle stream, client disconnect;
 * 4. a pooled request whose upstream fails before any byte reached the client (unreachable, reset,
 *    5xx, a 429, no first byte in time) is retried once on another candidate, after its first lease
 *    is released, so a retry never holds two slots. Direct routes are never retried.
 * Only what an upstream did is booked: a failure that `countsAgainstProvider` (before or after the
 * first byte), a 429 as a back-off for its `Retry-After`, a success. The client's 4xx and the
 * gateway's own errors leave every provider's health as it was. What reaches the client never names
 * a URL, host or command line (`toClientError`); the log line with the request id has them.
 * @throws ApiError for everything answered before the first byte (400, 404, 429, 502, 503, 504); any
 *   other error as it was raised (the error middleware answers it 500 `internal_error`).
 */
export async function dispatchCompletion(
  deps: DispatcherDeps,
  endpoint: CompletionEndpoint,
  body: DispatchBody,
  res: Response,
  outcome: DispatchOutcome,
): Promise<void> {
  const config = deps.config();
  const requestId = requestIdOf(res);
  const out = deps.health?.unhealthy();
  const due = deps.health?.trialsDue();
  const exclude = out && due && due.size > 0 ? new Set([...out].filter((id) => !due.has(id))) : out;
  const route = resolveRoute(config, body.model, { exclude });
  if (!route) throw modelNotFound(body.model);

  // One AbortController per upstream attempt: the client's disconnect aborts the current one, the
  // first-byte and idle timers abort their own. The queue wait shares the first attempt's.
  let attempt = new AbortController();
  let clientGone = false;
  const onClose = () => {
    if (res.writableFinished) return;
    clientGone = true;
    attempt.abort(clientClosed());
  };
  res.on('close', onClose);
  const onShutdown = () => attempt.abort(shuttingDown());
  deps.shutdown?.addEventListener('abort', onShutdown, { once: true });
  const call: CallContext = { deps, endpoint, res, config, outcome, requestId };
  try {
    if (!route.providerPool) {
      outcome.routeKind = 'direct';
      const { target } = route;
      if (!target) throw noAvailableProvider(body.model, 5);
      const sent = carry(target.adapter, endpoint, body);
      const resourceId = target.providerId ?? target.adapter.id;
      const result = await callUpstream(call, sent, { ...target, resourceId }, attempt).catch((err: unknown) => {
        logUpstreamFailure(call, resourceId, err, 'upstream failed');
        throw toClientError(err, requestId);
      });
      logStreamEnd(call, resourceId, result);
      return;
    }
    outcome.routeKind = 'pool';
    const { candidates: carriers, bodies } = carriable(route.candidates, endpoint, body);
    // Only a Responses follow-up can have an affinity: no await on the common path.
    let candidates =
      endpoint === 'responses' && deps.affinity ? await preferAffinity(deps, endpoint, body, carriers) : carriers;
    // A half-open provider (README "Provider health") gets one trial request: this one, if it claims it.
    let trial: PoolCandidate | undefined;
    // Nothing half-open (the common case): no trial to claim, nothing to filter out.
    if (due && due.size > 0) {
      for (const c of candidates) {
        if (!due.has(c.providerId)) continue;
        if (await deps.health?.claimTrial(c.providerId, config.gateway.request_timeout_ms + config.queue.max_wait_ms)) {
          trial = c;
          break;
        }
      }
      candidates = candidates.filter((c) => c === trial || !due.has(c.providerId));
    }
    for (let tries = 0; ; tries++) {
      const offered = tries === 0 && trial ? [trial] : candidates;
      if (offered.length === 0) throw poolUnavailable(deps, config, body.model);
      const queue = deps.queue;
      const queued = entersQueue(route, queue);
      if (queued) outcome.queuedAt = performance.now();
      const lease = queued ? await acquire(queue, route.modelGroupKey, offered, config, attempt.signal) : undefined;
      const candidate = offered.find((c) => c.providerId === lease?.providerId) ?? offered[0];
      const providerId = candidate.providerId;
      // Fencing (docs/architecture.md, "Fencing"): a lease the queue can no longer prove stops the call at once.
      const current = attempt;
      const onLeaseLost = () => current.abort(admissionToApiError(lease?.signal.reason));
      lease?.signal.addEventListener('abort', onLeaseLost, { once: true });
      try {
        if (lease) {
          outcome.queueWaitMs = lease.queueWaitMs;
          res.setHeader('x-iop-queue-wait-ms', String(lease.queueWaitMs));
        }
        const target = { ...candidate, resourceId: providerId };
        const isTrial = candidate === trial;
        const result = await callUpstream(call, bodies.get(candidate.adapter.type) ?? body, target, attempt, () => {
          if (isTrial) void deps.health?.recordRequest(providerId, true);
        });
        logStreamEnd(call, providerId, result);
        if (result.outcome === 'upstream_failed') {
          if (result.error instanceof UpstreamError && result.error.countsAgainstProvider)
            void deps.health?.recordRequest(providerId, false, describeFailure(result.error));
        } else if (!isTrial) {
          void deps.health?.recordRequest(providerId, true);
        }
        return;
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        // Only what the upstream did counts against the provider and may fail over (README
        // "Provider health", "Failover"): never the client's 4xx, never the gateway's own errors.
        if (err.countsAgainstProvider) void deps.health?.recordRequest(providerId, false, describeFailure(err));
        else if (err.status === 429)
          await deps.health?.backOff(providerId, err.retryAfterS ?? 1, `upstream 429${err.code ? ` ${err.code}` : ''}`);
        else if (err.status < 500) void deps.health?.recordRequest(providerId, true);
        const retry = failsOver(err) && tries === 0 && !res.headersSent && !clientGone;
        logUpstreamFailure(
          call,
          providerId,
          err,
          retry ? 'upstream failed before the first byte; retrying on another provider' : 'upstream failed',
        );
        if (!retry) throw toClientError(err, requestId);
        outcome.failedOver = [...(outcome.failedOver ?? []), providerId];
        const excluded = deps.health?.unhealthy();
        candidates = candidates.filter((c) => c.providerId !== providerId && !excluded?.has(c.providerId));
        if (candidates.length === 0) throw toClientError(err, requestId);
        attempt = new AbortController();
      } finally {
        lease?.signal.removeEventListener('abort', onLeaseLost);
        await lease?.release();
      }
    }
  } finally {
    res.off('close', onClose);
    deps.shutdown?.removeEventListener('abort', onShutdown);
  }
}

/** What every call of one request shares. */
interface CallContext {
  deps: DispatcherDeps;
  endpoint: CompletionEndpoint;
  res: Response;
  config: EdgeConfig;
  outcome: DispatchOutcome;
  requestId: string;
}

/**
 * The body `adapter` sends for `body` (its field table, README "Request fields per adapter").
 * @throws ApiError 400 naming the first field it cannot carry, or the endpoint it does not serve.
 */
function carry(adapter: AdapterConfig, endpoint: CompletionEndpoint, body: DispatchBody): DispatchBody {
  const table = FIELD_TABLES[adapter.type][endpoint];
  if (!table) throw endpointNotServed(endpoint, ADAPTER_LABEL[adapter.type]);
  return applyFieldTable(table, body, ADAPTER_LABEL[adapter.type], endpoint);
}

/**
 * The candidates whose adapter can carry `body`, and the body each adapter type sends.
 * @throws ApiError 400 of the first candidate's refusal when no candidate can carry it.
 */
function carriable(
  candidates: PoolCandidate[],
  endpoint: CompletionEndpoint,
  body: DispatchBody,
): { candidates: PoolCandidate[]; bodies: Map<string, DispatchBody> } {
  const bodies = new Map<string, DispatchBody>();
  const refusals = new Map<string, unknown>();
  for (const c of candidates) {
    const type = c.adapter.type;
    if (bodies.has(type) || refusals.has(type)) continue;
    try {
      bodies.set(type, carry(c.adapter, endpoint, body));
    } catch (err) {
      refusals.set(type, err);
    }
  }
  const able = candidates.filter((c) => bodies.has(c.adapter.type));
  if (able.length === 0 && refusals.size > 0) throw refusals.values().next().value;
  return { candidates: able, bodies };
}

/** 503 `no_available_provider` with `Retry-After` (README "Errors"). */
function noAvailableProvider(model: string, retryAfterS: number): ApiError {
  return admissionToApiError({
    code: 'no_available_provider',
    message: `No healthy provider can serve model "${model}" right now.`,
    retryAfterS,
  });
}

/**
 * The answer when no candidate is left: a 429 when every provider of the model is backing off
 * after an upstream 429 (with the soonest end of those back-offs), else 503 `no_available_provider`
 * with `Retry-After` the soonest time one of them may be tried again (5 s when unknown).
 */
function poolUnavailable(deps: DispatcherDeps, config: EdgeConfig, model: string): ApiError {
  const all = resolveRoute(config, model);
  const ids = all?.providerPool ? all.candidates.map((c) => c.providerId) : [];
  const views = deps.health?.views();
  // The views' times are on the store's clock (Redis's when shared), not necessarily this process's.
  const now = deps.health?.now() ?? Date.now();
  const waits = ids.flatMap((id) => {
    const at = views?.get(id)?.retryAt;
    return at == null ? [] : [Math.max(1, Math.ceil((at - now) / 1000))];
  });
  const retryAfterS = waits.length > 0 ? Math.min(...waits) : 5;
  if (ids.length > 0 && ids.every((id) => views?.get(id)?.state === 'backoff')) {
    return catalogError(
      'rate_limit_exceeded',
      `Every provider of model "${model}" is rate limited by its upstream; retry after ${retryAfterS} s.`,
      {
        retryAfterS,
      },
    );
  }
  return noAvailableProvider(model, retryAfterS);
}

/** A `/v1/responses` follow-up goes to the provider that produced `previous_response_id`, while it is a healthy candidate. */
async function preferAffinity(
  deps: DispatcherDeps,
  endpoint: CompletionEndpoint,
  body: DispatchBody,
  candidates: PoolCandidate[],
): Promise<PoolCandidate[]> {
  const previous = endpoint === 'responses' ? body.previous_response_id : undefined;
  if (!deps.affinity || typeof previous !== 'string' || previous === '') return candidates;
  const providerId = await deps.affinity.get(previous);
  const preferred = candidates.find((c) => c.providerId === providerId);
  return preferred ? [preferred] : candidates;
}

async function acquire(
  queue: ProviderQueue,
  modelGroupKey: string,
  candidates: PoolCandidate[],
  config: EdgeConfig,
  signal: AbortSignal,
): Promise<Lease> {
  try {
    return await queue.acquireLease({ modelGroupKey, candidates, signal, maxWaitMs: config.queue.max_wait_ms });
  } catch (err) {
    // Left the queue because the wait was aborted: the abort's reason (client gone, gateway shutting down) says why.
    if (signal.aborted && signal.reason instanceof ApiError) throw signal.reason;
    throw admissionToApiError(err);
  }
}

/** The adapter's method for `endpoint`. @throws ApiError 400 when the adapter has no such endpoint. */
function callAdapter(
  adapter: Adapter,
  target: CallTarget,
  endpoint: CompletionEndpoint,
  body: DispatchBody,
  ctx: DispatchContext,
): Promise<UpstreamResponse> {
  if (endpoint === 'chat') return adapter.chat(body as ChatRequest, ctx);
  if (endpoint === 'responses') return adapter.responses(body as ResponsesRequest, ctx);
  if (!adapter.embeddings) throw endpointNotServed(endpoint, ADAPTER_LABEL[target.adapter.type]);
  return adapter.embeddings(body as EmbeddingsRequest, ctx);
}

/**
 * Calls one target and writes its answer. `onFirstByte` fires when the upstream's first byte is in hand.
 * @returns how the answer ended (mid-stream failures, stalled clients); throws only before the first byte.
 */
async function callUpstream(
  call: CallContext,
  body: DispatchBody,
  target: CallTarget,
  attempt: AbortController,
  onFirstByte?: () => void,
): Promise<SendResult> {
  const { deps, endpoint, res, config, outcome } = call;
  outcome.nodeId = target.nodeId;
  outcome.resourceId = target.resourceId;
  outcome.adapterType = target.adapter.type;
  outcome.upstreamStartedAt = performance.now();
  res.setHeader('x-iop-node', target.nodeId);
  res.setHeader('x-iop-resource', target.resourceId);
  const adapter = deps.adapters.get(target.nodeId, target.adapter);
  // request_timeout_ms bounds the time to the upstream's first byte, not a healthy stream (README "Configuration").
  const timeoutMs = config.gateway.request_timeout_ms;
  const firstByteTimer = setTimeout(() => attempt.abort(upstreamTimeout(timeoutMs)), timeoutMs);
  const { signal } = attempt;
  const ctx: DispatchContext = {
    upstreamModel: target.upstreamModel,
    signal,
    maxResponseBytes: config.gateway.max_response_bytes,
  };
  // An abort's reason (client gone, first-byte timeout) explains a failure better than the adapter's error.
  const explain = (err: unknown) => (signal.aborted && signal.reason instanceof ApiError ? signal.reason : err);
  try {
    let upstream: UpstreamResponse;
    try {
      upstream = await callAdapter(adapter, target, endpoint, body, ctx);
    } catch (err) {
      throw explain(err);
    }
    upstream = watchUsage(upstream, (usage) => (outcome.usage = usage));
    if (endpoint === 'responses' && deps.affinity && outcome.routeKind === 'pool') {
      upstream = rememberResponseId(upstream, (id) => void deps.affinity!.set(id, target.resourceId));
    }
    if (upstream.kind === 'json') {
      // Written in one go: no stream options, closures or promise for a non-streamed answer.
      clearTimeout(firstByteTimer);
      outcome.firstByteAt = performance.now();
      onFirstByte?.();
      try {
        return sendJson(res, upstream);
      } catch (err) {
        throw explain(err);
      }
    }
    return await sendUpstream(res, upstream, {
      endpoint,
      idleTimeoutMs: config.gateway.stream_idle_timeout_ms,
      onFirstByte: () => {
        clearTimeout(firstByteTimer);
        outcome.firstByteAt = performance.now();
        onFirstByte?.();
      },
      abortUpstream: (reason) => attempt.abort(reason),
      clientError: (err) => toClientError(explain(err), call.requestId),
    }).catch((err: unknown) => {
      throw explain(err);
    });
  } finally {
    clearTimeout(firstByteTimer);
  }
}

/** A failure's reason in a few words, for health records and `/status` (never a URL). */
function describeFailure(err: UpstreamError): string {
  return err.code === 'upstream_error' ? `upstream_error ${err.status}` : err.code;
}

/** One warning per upstream failure, with everything an operator needs: the request id, provider and the log-only detail. */
function logUpstreamFailure(call: CallContext, provider: string, err: unknown, msg: string): void {
  if (!(err instanceof UpstreamError)) return;
  // The request's child logger carries `request_id`, as the access-log line does.
  requestLogger(call.res, call.deps.logger).warn(
    {
      model: call.res.locals.model,
      provider,
      node: call.outcome.nodeId,
      status: err.status,
      code: err.code,
      detail: err.detail ?? err.message,
    },
    msg,
  );
}

/** Logs how a stream ended when it did not end well (README "Streaming"): an upstream failure mid-stream or a stalled client cut. */
function logStreamEnd(call: CallContext, provider: string, result: SendResult): void {
  if (result.outcome === 'upstream_failed') {
    const err = result.error;
    const detail = err instanceof UpstreamError ? (err.detail ?? err.message) : (err as Error)?.message;
    requestLogger(call.res, call.deps.logger).warn(
      { provider, node: call.outcome.nodeId, code: (err as ApiError)?.code, detail },
      'upstream failed mid-stream; the client got an error event',
    );
  } else if (result.outcome === 'client_stalled') {
    requestLogger(call.res, call.deps.logger).warn(
      { provider, node: call.outcome.nodeId, idle_ms: call.config.gateway.stream_idle_timeout_ms },
      'client accepted no byte for gateway.stream_idle_timeout_ms: stream cut, upstream aborted, lease released',
    );
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
