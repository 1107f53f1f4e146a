import { entersQueue, resolveRoute, type Lease, type PoolCandidate, type ProviderQueue } from '@iop/dispatch';
import type { AdapterConfig, EdgeConfig } from '@iop/validate';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import type { Adapter, ChatRequest, DispatchContext, ResponsesRequest, UpstreamResponse } from './adapters/adapter';
import type { AdapterRegistry } from './adapters/adapter-registry';
import { ApiError, modelNotFound, upstreamTimeout } from './errors';
import { admissionToApiError } from './http/admission-errors';
import { sendUpstream } from './http/send-upstream';

/** The OpenAI endpoint a request came in on; picks the adapter method. */
export type CompletionEndpoint = 'chat' | 'responses';

/** What a dispatch needs from the running gateway; `config()` is read once per request. */
export interface DispatcherDeps {
  config(): EdgeConfig;
  queue?: ProviderQueue;
  adapters: AdapterRegistry;
  logger: Logger;
}

/** Where a request went, for the access log and metrics. */
export interface DispatchOutcome {
  routeKind: 'pool' | 'direct';
  nodeId?: string;
  resourceId?: string;
  queueWaitMs?: number;
}

/**
 * Serves one completion request end to end (DESIGN §4 dispatch, §6 surface): resolves the
 * route, takes a lease when the admission rule says so, calls the adapter, streams the answer,
 * and releases the lease on every path — success, upstream error, timeout, client disconnect.
 * Direct routes never touch the queue. The client's disconnect aborts the upstream call.
 * @throws ApiError for everything answered before the first byte (404, 429, 502, 503, 504).
 */
export async function dispatchCompletion(
  deps: DispatcherDeps,
  endpoint: CompletionEndpoint,
  body: ChatRequest | ResponsesRequest,
  req: Request,
  res: Response,
  outcome: DispatchOutcome,
): Promise<void> {
  const config = deps.config();
  const route = resolveRoute(config, body.model);
  if (!route) throw modelNotFound(body.model);

  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) abort.abort(new ApiError(499, 'client_closed', 'The client closed the connection.'));
  };
  res.on('close', onClose);
  try {
    if (route.providerPool) {
      outcome.routeKind = 'pool';
      if (route.candidates.length === 0) {
        throw admissionToApiError({ code: 'no_available_provider', message: `No enabled provider can serve model "${body.model}" right now.`, retryAfterS: 5 });
      }
      if (entersQueue(route, deps.queue)) {
        const lease = await acquire(deps.queue!, route.modelGroupKey, route.candidates, config, abort.signal);
        try {
          const candidate = route.candidates.find((c) => c.providerId === lease.providerId)!;
          outcome.queueWaitMs = lease.queueWaitMs;
          res.setHeader('x-iop-queue-wait-ms', String(lease.queueWaitMs));
          await callUpstream(deps, endpoint, body, res, candidate.nodeId, candidate.providerId, candidate.adapter, candidate.upstreamModel, config, abort, outcome);
        } finally {
          await lease.release();
        }
        return;
      }
      const candidate = route.candidates[0];
      await callUpstream(deps, endpoint, body, res, candidate.nodeId, candidate.providerId, candidate.adapter, candidate.upstreamModel, config, abort, outcome);
      return;
    }
    outcome.routeKind = 'direct';
    const { target } = route;
    await callUpstream(deps, endpoint, body, res, target.nodeId, target.providerId ?? target.adapter.id, target.adapter, target.upstreamModel, config, abort, outcome);
  } finally {
    res.off('close', onClose);
  }
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
    throw admissionToApiError(err);
  }
}

async function callUpstream(
  deps: DispatcherDeps,
  endpoint: CompletionEndpoint,
  body: ChatRequest | ResponsesRequest,
  res: Response,
  nodeId: string,
  resourceId: string,
  adapterConfig: AdapterConfig,
  upstreamModel: string,
  config: EdgeConfig,
  abort: AbortController,
  outcome: DispatchOutcome,
): Promise<void> {
  outcome.nodeId = nodeId;
  outcome.resourceId = resourceId;
  res.setHeader('x-iop-node', nodeId);
  res.setHeader('x-iop-resource', resourceId);
  const adapter: Adapter = deps.adapters.get(nodeId, adapterConfig);
  const ctx: DispatchContext = { upstreamModel, signal: abort.signal };
  const timeoutMs = config.gateway.request_timeout_ms;
  // request_timeout_ms bounds the time to the upstream's first byte, not a healthy stream (DESIGN §3).
  const firstByteTimer = setTimeout(() => abort.abort(upstreamTimeout(timeoutMs)), timeoutMs);
  const stopTimer = () => clearTimeout(firstByteTimer);
  try {
    let upstream: UpstreamResponse;
    try {
      upstream = endpoint === 'chat' ? await adapter.chat(body as ChatRequest, ctx) : await adapter.responses(body as ResponsesRequest, ctx);
    } catch (err) {
      throw abort.signal.aborted && abort.signal.reason instanceof ApiError ? abort.signal.reason : err;
    }
    await sendUpstream(res, upstream, stopTimer).catch((err: unknown) => {
      throw abort.signal.aborted && abort.signal.reason instanceof ApiError ? abort.signal.reason : err;
    });
  } finally {
    stopTimer();
  }
}
