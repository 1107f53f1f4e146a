import type { GatewayResponse } from '../http/gateway-handler';
import { AttemptSignals } from './attempt-signals';
import { callDirect } from './call-direct';
import { callWithFailover } from './call-with-failover';
import { clientIdOf } from './charge-attempt';
import { carriableCandidates } from './carriable-fields';
import { claimTrial } from './claim-trial';
import { startRequest } from './completion-request';
import type { CompletionEndpoint, DispatchBody, DispatcherDeps } from './dispatcher-deps';
import type { DispatchOutcome } from './outcome';
import { preferAffinity } from './prefer-affinity';
import { resolveCandidates } from './resolve-candidates';

/**
 * Serves one request of `/v1/chat/completions`, `/v1/responses` or `/v1/embeddings` end to end
 * (docs/architecture.md, "Request path"; README "Pooled and direct routes", "Failover", "Provider
 * health"), in named steps, each its own module:
 * 1. {@link resolveCandidates}: the route, with providers out of health left out (a half-open one
 *    stays, for its trial); 404 when nothing serves the model;
 * 2. a direct route is called once ({@link callDirect}): no lease, no failover, nothing booked;
 * 3. {@link carriableCandidates}: the pool's candidates whose adapter can carry the request's fields
 *    (none → 400 naming the field or the endpoint);
 * 4. {@link preferAffinity}: a Responses follow-up goes back to the provider of its previous response;
 * 5. {@link claimTrial}: the request may be the trial of a half-open provider;
 * 6. {@link callWithFailover}: acquire a lease, call, book the outcome (`healthEventOf`, the one
 *    rule of what counts against a provider), release; once more on another candidate after a
 *    failure before the first byte; a trial whose attempt booked nothing is given back.
 * The client's disconnect and the end of the drain abort the running attempt ({@link AttemptSignals}).
 * What reaches the client never names a URL, host or command line (`toClientError`); the log line
 * with the request id has them.
 * @throws ApiError for everything answered before the first byte (400, 404, 429, 502, 503, 504); any
 *   other error as it was raised (the error middleware answers it 500 `internal_error`).
 */
export async function dispatchCompletion(
  deps: DispatcherDeps,
  endpoint: CompletionEndpoint,
  body: DispatchBody,
  res: GatewayResponse,
  outcome: DispatchOutcome,
): Promise<void> {
  const req = startRequest(deps, endpoint, body, res, outcome);
  const { route, trialsDue } = resolveCandidates(deps.health, req.config, body.model);
  const attempts = new AttemptSignals(res, deps.shutdown);
  try {
    if (!route.providerPool) return await callDirect(req, route, attempts.current);
    outcome.routeKind = 'pool';
    const { candidates: carriers, bodies } = carriableCandidates(route.candidates, endpoint, body);
    // Only a Responses follow-up can have an affinity, only a half-open provider a trial: no await on the common path.
    const preferred =
      endpoint === 'responses' && deps.affinity
        ? await preferAffinity(deps.affinity, endpoint, body, carriers)
        : carriers;
    const trialPick =
      trialsDue && trialsDue.size > 0
        ? await claimTrial(deps.health, req.config, preferred, trialsDue)
        : { candidates: preferred };
    // One client's pooled requests never hold more than half of this replica's connections, across pools.
    const leave = deps.replicaRequests?.enter(clientIdOf(req), route.modelGroupKey, req.config.gateway.max_connections);
    try {
      await callWithFailover(req, route, { ...trialPick, bodies }, attempts);
    } finally {
      leave?.();
    }
  } finally {
    attempts.close();
  }
}
