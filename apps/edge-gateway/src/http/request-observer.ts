import type { EdgeConfig } from '@iop/validate';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { DispatchOutcome } from '../completion-dispatcher';
import type { GatewayMetrics } from './gateway-metrics';

/**
 * The one observer of a completion request: when its response closes it writes the access log
 * line (method, path, status, model, route, node, resource, queue wait, ms — never prompts or keys)
 * and the request metrics. It reads `res.locals.model` and `res.locals.outcome`, set by the route.
 * One `close` listener per request, whatever fails before the handler (401, 400, 413 included).
 */
export function observeCompletions(logger: Logger, metrics: GatewayMetrics, config: () => EdgeConfig): RequestHandler {
  return (req, res, next) => {
    const startedAt = performance.now();
    metrics.startCompletion();
    res.once('close', () => {
      const status = res.writableFinished ? res.statusCode : 499;
      const outcome = res.locals.outcome as DispatchOutcome | undefined;
      metrics.finishCompletion(config(), res.locals.model, status, outcome, startedAt);
      if (!logger.isLevelEnabled('info')) return;
      logger.info(
        {
          method: req.method,
          path: req.path,
          status,
          model: res.locals.model,
          route: outcome?.routeKind,
          node: outcome?.nodeId,
          resource: outcome?.resourceId,
          queue_wait_ms: outcome?.queueWaitMs,
          ms: Math.round(performance.now() - startedAt),
        },
        'request',
      );
    });
    next();
  };
}
