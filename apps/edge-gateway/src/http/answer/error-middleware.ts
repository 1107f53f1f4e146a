import type { Logger } from 'pino';
import { ERROR_CATALOG, catalogRetryAfterS, isCatalogCode } from '@iop/errors';
import { ApiError, clientClosed, internalError, invalidRequest, requestTooLarge } from '../../errors';
import { requestLogger } from '../request/request-id';
import { lingerClose } from '../access/server-limits';
import type { GatewayErrorHandler } from '../gateway-handler';

/**
 * Turns any error into the OpenAI-shaped body `{"error": {...}}` with its status (docs/architecture.md, "Errors"),
 * adding `Retry-After` where retrying helps: the error's own seconds, else the default of its code
 * in `ERROR_CATALOG` (`@iop/errors`, where the gateway's codes get their status, type and message too).
 * Body-parser failures map to 400 (invalid JSON) and 413 (over `max_body_bytes`). Unknown errors are logged and answered 500 without a stack trace.
 * When the headers are already sent (mid-stream), the connection is ended instead. An error
 * answered before the request's body was read to its end (a 413, a 415, a 401 on a large upload)
 * closes the connection after the answer: the rest of the body is never read (README "Security").
 */
export function errorMiddleware(logger: Logger, maxBodyBytes: () => number): GatewayErrorHandler {
  return (err, req, res, _next) => {
    const apiError = toApiError(err, maxBodyBytes);
    if (apiError.status === ERROR_CATALOG.internal_error.status)
      requestLogger(res, logger).error({ err }, 'unhandled error');
    if (res.headersSent) {
      res.end();
      return;
    }
    if (apiError.status === ERROR_CATALOG.client_closed.status) {
      // The client is gone; nothing to answer.
      res.statusCode = 499;
      res.end();
      return;
    }
    const retryAfterS =
      apiError.retryAfterS === null
        ? undefined
        : (apiError.retryAfterS ?? (isCatalogCode(apiError.code) ? catalogRetryAfterS(apiError.code) : undefined));
    if (retryAfterS !== undefined) res.setHeader('retry-after', String(retryAfterS));
    if (!req.complete) lingerClose(req, res);
    // What express's `res.status().json()` writes, without its prototypes (the completions run without them).
    const body = JSON.stringify(apiError.toBody());
    res.statusCode = apiError.status;
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.setHeader('content-length', Buffer.byteLength(body));
    res.end(body);
  };
}

function toApiError(err: unknown, maxBodyBytes: () => number): ApiError {
  if (err instanceof ApiError) return err;
  const bodyParser = err as { type?: string; status?: number };
  if (bodyParser?.type === 'entity.too.large') return requestTooLarge(maxBodyBytes());
  if (bodyParser?.type === 'entity.parse.failed') {
    return invalidRequest(
      'The request body is not a valid JSON object. Send a JSON object with Content-Type: application/json.',
    );
  }
  if (bodyParser?.type === 'encoding.unsupported' || bodyParser?.type === 'charset.unsupported') {
    return invalidRequest('The request body encoding is not supported; send UTF-8 JSON.');
  }
  if (bodyParser?.type === 'request.aborted') return clientClosed();
  // Any other body-reading failure (e.g. a corrupt gzip body) is the client's: 4xx from body-parser.
  if (typeof bodyParser?.status === 'number' && bodyParser.status >= 400 && bodyParser.status < 500) {
    const detail = (err as { expose?: boolean; message?: string }).expose ? `: ${(err as Error).message}` : '';
    return invalidRequest(
      `The request body could not be read${detail}. Send UTF-8 JSON, uncompressed or with a valid Content-Encoding.`,
    );
  }
  return internalError();
}
