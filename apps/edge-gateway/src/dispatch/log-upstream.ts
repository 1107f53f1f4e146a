import { ApiError, UpstreamError } from '../errors';
import { requestLogger } from '../http/request/request-id';
import type { SendResult } from '../http/answer/send-upstream';
import type { CompletionRequest } from './completion-request';

/**
 * One warning per upstream failure before the first byte, with everything an operator needs: the
 * request id (the request's child logger carries `request_id`, as the access-log line does), the
 * provider, and the log-only detail that never reaches the client (README "Errors"). Errors the
 * gateway raised itself are not logged here.
 */
export function logUpstreamFailure(req: CompletionRequest, provider: string, err: unknown, msg: string): void {
  if (!(err instanceof UpstreamError)) return;
  requestLogger(req.res, req.deps.logger).warn(
    {
      model: req.res.locals.model,
      provider,
      node: req.outcome.nodeId,
      status: err.status,
      code: err.code,
      detail: err.detail ?? err.message,
    },
    msg,
  );
}

/**
 * Logs how a stream ended when it did not end well (README "Streaming"): an upstream failure
 * mid-stream, or a client that accepted no byte for `gateway.stream_idle_timeout_ms`.
 */
export function logStreamEnd(req: CompletionRequest, provider: string, result: SendResult): void {
  if (result.outcome === 'upstream_failed') {
    const err = result.error;
    const detail = err instanceof UpstreamError ? (err.detail ?? err.message) : (err as Error)?.message;
    requestLogger(req.res, req.deps.logger).warn(
      { provider, node: req.outcome.nodeId, code: (err as ApiError)?.code, detail },
      'upstream failed mid-stream; the client got an error event',
    );
  } else if (result.outcome === 'client_stalled') {
    requestLogger(req.res, req.deps.logger).warn(
      { provider, node: req.outcome.nodeId, idle_ms: req.config.gateway.stream_idle_timeout_ms },
      'client accepted no byte for gateway.stream_idle_timeout_ms: stream cut, upstream aborted, lease released',
    );
  }
}
