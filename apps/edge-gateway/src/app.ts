import type { ProviderQueue } from '@iop/dispatch';
import type { EdgeConfig } from '@iop/validate';
import express, { type Express } from 'express';
import type { Logger } from 'pino';
import type { DispatcherDeps } from './completion-dispatcher';
import { notFound } from './errors';
import { apiKeyAuth } from './http/api-key-auth';
import { errorMiddleware } from './http/error-middleware';
import type { GatewayMetrics } from './http/gateway-metrics';
import { openAiRoutes } from './routes/openai-routes';
import { statusRoutes } from './routes/status-routes';

/** Everything the gateway's HTTP app needs; all I/O lives behind these (STYLE "pure core, thin edges"). */
export interface AppDeps extends DispatcherDeps {
  /** The config in force; read once per request so a refresh applies to new requests at once. */
  config(): EdgeConfig;
  /** The admission queue for provider pools; undefined = no admission control (pools dispatch directly). */
  queue?: ProviderQueue;
  /** Which file is in force, for `/status` (issue 5: operators see which replica runs which file). */
  configInfo?(): { hash: string; loadedAt: Date };
  /** The gateway's Prometheus registry; one per app when absent. */
  metrics?: GatewayMetrics;
}

/**
 * Builds the express app of the gateway without listening or any other I/O (DESIGN §2), so tests
 * drive it in-process and `main.ts` only wires real dependencies and listens.
 * Routes: DESIGN §6. Errors: one middleware, OpenAI-shaped.
 */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('json spaces', 0);
  const startedAtS = Math.floor(Date.now() / 1000);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const queueReady = deps.queue ? await deps.queue.isReady().catch(() => false) : true;
    res.status(queueReady ? 200 : 503).json({ status: queueReady ? 'ready' : 'not_ready', queue: deps.queue?.backend ?? 'none', queue_ready: queueReady });
  });

  // /status and /metrics (DESIGN §6), and request metrics of every completion, 401s included.
  app.use(statusRoutes(deps, deps.metrics));
  app.use('/v1', apiKeyAuth(() => deps.config().gateway.api_keys));
  // The limit is read per request so a config refresh changes it; body-parser's 413 maps to request_too_large.
  let jsonParser = { limit: -1, parse: express.json() };
  app.use('/v1', (req, res, next) => {
    const limit = deps.config().gateway.max_body_bytes;
    if (jsonParser.limit !== limit) jsonParser = { limit, parse: express.json({ limit, type: () => true }) };
    jsonParser.parse(req, res, next);
  });
  app.use(accessLog(deps.logger));
  app.use(openAiRoutes(deps, startedAtS));
  app.use((req, _res, next) => next(notFound(`${req.method} ${req.path}`)));
  app.use(errorMiddleware(deps.logger, () => deps.config().gateway.max_body_bytes));
  return app;
}

/** One info line per finished request: method, path, status, model, route, node, resource, ms. Never prompts or keys. */
function accessLog(logger: Logger): express.RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    res.on('close', () => {
      if (!logger.isLevelEnabled('info')) return;
      const outcome = res.locals.outcome as { routeKind?: string; nodeId?: string; resourceId?: string; queueWaitMs?: number } | undefined;
      logger.info(
        {
          method: req.method,
          path: req.path,
          status: res.writableFinished ? res.statusCode : 499,
          model: res.locals.model,
          route: outcome?.routeKind,
          node: outcome?.nodeId,
          resource: outcome?.resourceId,
          queue_wait_ms: outcome?.queueWaitMs,
          ms: Math.round(performance.now() - started),
        },
        'request',
      );
    });
    next();
  };
}
