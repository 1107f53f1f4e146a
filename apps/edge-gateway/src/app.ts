import type { ProviderQueue } from '@iop/dispatch';
import { ReplicaRequests } from './dispatch/replica-requests';
import { registerConfigInfoGauge } from '@iop/status';
import type { EdgeConfig } from '@iop/validate';
import express from 'express';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DispatcherDeps } from './dispatch/dispatcher-deps';
import { FirstByteClock } from './dispatch/first-byte-clock';
import { notFound } from './errors';
import { apiKeyAuth, statusKeyAuth } from './http/access/api-key-auth';
import { completionBody } from './http/request/body-gates';
import { errorMiddleware } from './http/answer/error-middleware';
import { GatewayMetrics } from './observability/gateway-metrics';
import { observeCompletions } from './observability/request-observer';
import { assignRequestId } from './http/request/request-id';
import { completionRoutes, openAiRoutes } from './routes/openai-routes';
import { probeRoutes, registerQueueReachableGauge } from './routes/probe-routes';
import { statusRoutes } from './routes/status-routes';
import { v1Edge } from './http/access/v1-edge';
import { runRoute, type GatewayRequest, type GatewayResponse } from './http/gateway-handler';

/** Everything the gateway's HTTP app needs; all I/O lives behind these (docs/architecture.md, "Layering": pure core, thin edges). */
export interface AppDeps extends DispatcherDeps {
  /** The config in force; read once per request so a refresh applies to new requests at once. */
  config(): EdgeConfig;
  /** The admission queue for provider pools; undefined = no admission control (pools dispatch directly). */
  queue?: ProviderQueue;
  /** Which file is in force, for `/status` (operators see which replica runs which file). */
  configInfo?(): { hash: string; loadedAt: Date };
  /** The gateway's Prometheus registry; one per app when absent. */
  metrics?: GatewayMetrics;
}

/** The gateway's request listener: `http.createServer(app)` serves it. */
export type GatewayApp = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Builds the gateway's request listener without listening or any other I/O (docs/architecture.md, "Layering"), so tests
 * drive it in-process and `main.ts` only wires real dependencies and listens.
 * Routes: docs/architecture.md, "HTTP surface". Errors: one handler, OpenAI-shaped ("Errors").
 * A `POST` to exactly `/v1/chat/completions`, `/v1/responses` or `/v1/embeddings` runs its route's
 * steps directly (`runRoute`); every other request, other spellings of those paths included, goes
 * through express (docs/architecture.md, "Request path").
 */
export function createApp(appDeps: AppDeps): GatewayApp {
  const metrics = appDeps.metrics ?? new GatewayMetrics();
  // One clock of first bytes per app, for weighing first-byte timeouts (README "Provider health"); the tokens each client used go to the metrics.
  const deps: AppDeps = {
    ...appDeps,
    firstBytes: appDeps.firstBytes ?? new FirstByteClock(),
    replicaRequests: appDeps.replicaRequests ?? new ReplicaRequests(),
    clientTokens: appDeps.clientTokens ?? metrics.clientTokens,
  };
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  const startedAtS = Math.floor(Date.now() / 1000);
  registerQueueReachableGauge(metrics.registry, deps.queue);
  registerConfigInfoGauge(metrics.registry, deps.config);
  const auth = apiKeyAuth(() => deps.config().gateway);

  // 415 unless application/json, 413 from Content-Length at once, then the JSON body, its bytes and values bounded (README "Security").
  const json = completionBody(() => deps.config().gateway);
  const observe = observeCompletions(deps.logger, metrics, () => deps.config());

  // Every answer carries x-request-id; each request logs through a child logger bound to it.
  const requestId = assignRequestId(deps.logger);
  // CORS and the topology headers (README "Security") before any /v1 route, preflights included.
  const edge = v1Edge(() => deps.config().gateway);
  // The completions first, each one route carrying the request id, the edge and its gates (the hot path, tools/bench).
  const completions = completionRoutes(app, deps, { requestId, edge, observe, auth, json });
  app.use(requestId);
  app.use('/v1', edge);
  app.use(openAiRoutes(deps, startedAtS, { observe, auth, json }));
  // Readiness is this process's, never Redis's: a Redis outage must not empty the load balancer.
  app.use(probeRoutes(deps.queue));
  // /status and /metrics (README "Status") take the status keys, not the client keys (README "Security"); probes stay open.
  app.use(
    statusRoutes(
      deps,
      metrics,
      statusKeyAuth(() => deps.config().status.api_keys),
    ),
  );
  // Every other path (unknown, `//v1/...`, `/./v1/...`, `*`) asks for the client key first: without one
  // the caller gets the 401 alone, never the 404 that lists the endpoints (README "Security").
  app.use(auth);
  app.use((req, _res, next) => next(notFound(req.method, req.path)));
  const onError = errorMiddleware(deps.logger, () => deps.config().gateway.max_body_bytes);
  app.use(onError);
  return (req, res) => {
    const route = req.method === 'POST' && req.url !== undefined ? completions.get(req.url) : undefined;
    if (route === undefined) return app(req, res);
    runRoute(route.steps, route.endpoint, onError, req as GatewayRequest, res as GatewayResponse);
  };
}
