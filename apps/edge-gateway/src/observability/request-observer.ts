import type { EdgeConfig } from '@iop/validate';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { GatewayMetrics } from './gateway-metrics';
import { echoed } from '../errors';
import { loggedRequestId, requestIdFrom, requestIdOf } from '../http/request/request-id';
import { requestPath, type GatewayHandler } from '../http/gateway-handler';
import { ensureTracing, flushOnClose, recordRequestSpans, tracingWanted } from './tracing';

/** Longest client-sent string (model, path) written into a log line, in characters (README "Security"). */
export const MAX_LOGGED_CHARS = 256;
/** A client-sent string as logged: at most {@link MAX_LOGGED_CHARS} characters, the rest counted. */
const clip = (text: string) => echoed(text, MAX_LOGGED_CHARS);

/**
 * The one observer of a completion request: when its response closes it writes the access log
 * line (method, path, status, model, client id, route, node, resource, queue wait, ms — never
 * prompts or keys)
 * and the request metrics, and records the request's trace when tracing is on (`recordRequestSpans`).
 * It reads the request context's `model` and `outcome` (`res.locals`), set by the route. One `close` listener per
 * request, whatever fails before the handler (401, 400, 413 included). Every answer carries an
 * `x-request-id` (the client's, when it sent a plain one; given by `assignRequestId`), which the log
 * line (its `request_id` field, the same one the request's child logger writes) and the trace carry too.
 */
export function observeCompletions(logger: Logger, metrics: GatewayMetrics, config: () => EdgeConfig): GatewayHandler {
  // OTLP traces when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set (README "Running a fleet"); off otherwise.
  ensureTracing(process.env, logger);
  return (req, res, next) => {
    const startedAt = performance.now();
    // Spans are built only while tracing is on (or loading): nothing per request otherwise.
    if (tracingWanted()) flushOnClose((req.socket as { server?: Server }).server);
    metrics.startCompletion();
    // 'close' comes once per response: a plain listener, no once-wrapper to make and remove per request.
    res.on('close', () => {
      try {
        recordCompletion();
      } catch (err) {
        // The answer is sent: a fault in its records is logged, never the end of the process (README "Security").
        (res.locals.baseLogger ?? logger).error(
          { request_id: loggedRequestId(res), err },
          'recording a finished request failed; the request was served',
        );
      }
    });
    const recordCompletion = () => {
      const status = res.writableFinished ? res.statusCode : 499;
      const outcome = res.locals.outcome;
      const current = config();
      metrics.finishCompletion(current, res.locals.model, res.locals.client?.id, status, outcome, startedAt);
      if (tracingWanted())
        recordRequestSpans({
          // `assignRequestId` runs before every route that mounts the observer (app.ts) and set the header.
          requestId: requestIdOf(res) ?? requestIdFrom(req.headers['x-request-id']),
          // Always set on a request a server parsed; typed optional for client-side messages.
          method: req.method ?? '',
          route: (req as { route?: { path?: string } }).route?.path ?? requestPath(req),
          status,
          model: metrics.modelLabel(current, res.locals.model),
          outcome,
          startedAt,
          endedAt: performance.now(),
        });
      if (!logger.isLevelEnabled('info')) return;
      // The app's logger with `request_id` as the line's first field: the same JSON as the request's child
      // logger writes (its bindings come first too), without building a child logger per request.
      (res.locals.baseLogger ?? logger).info(
        {
          request_id: loggedRequestId(res),
          method: req.method,
          path: clip(requestPath(req)),
          status,
          model: res.locals.model === undefined ? undefined : clip(res.locals.model),
          route: outcome?.routeKind,
          client: res.locals.client?.id,
          node: outcome?.nodeId,
          resource: outcome?.resourceId,
          queue_wait_ms: outcome?.queueWaitMs,
          input_tokens: outcome?.usage?.input,
          output_tokens: outcome?.usage?.output,
          ms: Math.round(performance.now() - startedAt),
        },
        'request',
      );
    };
    next();
  };
}
