import type { Route } from '@iop/dispatch';
import { ApiError, toClientError } from '../errors';
import { carriedBody } from './carriable-fields';
import { callUpstream } from './call-upstream';
import type { CompletionRequest } from './completion-request';
import { logStreamEnd, logUpstreamFailure } from './log-upstream';

/** A route that dispatches to one adapter, never queued. */
export type DirectRoute = Extract<Route, { providerPool: false }>;

/**
 * Serves a direct route (README "Pooled and direct routes"): its one target, with the body its
 * field table carries, called once. No lease, no failover, and nothing booked against any health.
 * No token budget either: a direct route never enters admission, so nothing is reserved or charged
 * (README "Token budgets: what a client sees"); the usage an upstream reports is counted for the
 * client's metrics all the same (`callUpstream`).
 * @throws ApiError 503 `no_available_provider` when the route's entry is disabled; 400 for a field
 *   or endpoint the adapter cannot carry; the upstream's failure before the first byte, as the
 *   client may see it (`toClientError`).
 */
export async function callDirect(req: CompletionRequest, route: DirectRoute, attempt: AbortController): Promise<void> {
  req.outcome.routeKind = 'direct';
  const { target } = route;
  if (!target) throw new ApiError({ code: 'no_available_provider', fields: { model: req.body.model } });
  const sent = carriedBody(target.adapter, req.endpoint, req.body);
  const resourceId = target.providerId ?? target.adapter.id;
  const result = await callUpstream(
    req,
    sent,
    { nodeId: target.nodeId, resourceId, adapter: target.adapter, upstreamModel: target.upstreamModel },
    attempt,
  ).catch((err: unknown) => {
    logUpstreamFailure(req, resourceId, err, 'upstream failed');
    throw toClientError(err, req.requestId);
  });
  logStreamEnd(req, resourceId, result);
}
