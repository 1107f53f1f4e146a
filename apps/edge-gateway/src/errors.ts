/**
 * Every error the gateway answers with, as a value with an HTTP status and an OpenAI error
 * `code` (DESIGN §6). Routes throw these; `errorMiddleware` turns them into the body
 * `{"error": {"message", "type", "param", "code"}}`. No route builds an error body by hand.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly type: string = status >= 500 ? 'server_error' : 'invalid_request_error',
    readonly param: string | null = null,
    /** Seconds for the `Retry-After` header, when retrying can help. */
    readonly retryAfterS?: number,
  ) {
    super(message);
  }

  /** The OpenAI-shaped body of this error. */
  toBody(): { error: { message: string; type: string; param: string | null; code: string } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/**
 * Something an upstream did, and nothing else: it could not be reached, reset the connection, sent
 * no first byte in time, answered 5xx or an unusable body (502 `upstream_error`, 504
 * `upstream_timeout`), or answered a 4xx that is passed on to the client. Created only where the
 * gateway handles an upstream's connection or bytes (the adapters, the first-byte timer). Every
 * other error, including the gateway's own faults and the client's 4xx, is not an UpstreamError,
 * so it never counts against a provider's health and never fails over (README "Provider health").
 */
export class UpstreamError extends ApiError {
  /**
   * True when this failure counts against the provider's health and allows one failover:
   * 5xx-class failures (unreachable, reset, 5xx, first-byte timeout). An upstream 4xx passed on is
   * the client's answer: false.
   */
  get countsAgainstProvider(): boolean {
    return this.status >= 500;
  }
}

/** True for an {@link UpstreamError} that counts against its provider (see `countsAgainstProvider`); false for anything else. */
export const countsAgainstProvider = (err: unknown): err is UpstreamError => err instanceof UpstreamError && err.countsAgainstProvider;

export const invalidRequest = (message: string, param: string | null = null) =>
  new ApiError(400, 'invalid_request_error', message, 'invalid_request_error', param);
export const invalidApiKey = () =>
  new ApiError(401, 'invalid_api_key', 'Incorrect or missing API key. Send it as "Authorization: Bearer <key>".', 'invalid_request_error');
export const modelNotFound = (model: string) =>
  new ApiError(404, 'model_not_found', `The model "${model}" does not exist on this gateway. GET /v1/models lists the models it serves.`, 'invalid_request_error', 'model');
export const notFound = (path: string) =>
  new ApiError(404, 'not_found', `No route for ${path}. This gateway serves /v1/models, /v1/chat/completions and /v1/responses.`, 'invalid_request_error');
export const methodNotAllowed = (method: string, path: string, allow: string) =>
  new ApiError(405, 'method_not_allowed', `${method} is not allowed on ${path}; use ${allow}.`, 'invalid_request_error');
export const requestTooLarge = (limitBytes: number) =>
  new ApiError(413, 'request_too_large', `The request body is larger than the gateway's limit of ${limitBytes} bytes (gateway.max_body_bytes).`, 'invalid_request_error');
export const upstreamError = (message: string, status = 502) => new UpstreamError(status, 'upstream_error', message, 'server_error');
export const upstreamTimeout = (ms: number) =>
  new UpstreamError(504, 'upstream_timeout', `The upstream sent no byte within ${ms} ms (gateway.request_timeout_ms).`, 'server_error');
/** The gateway's own fault (a bug): a fixed message, never the error's text or stack; the cause goes to the log. */
export const internalError = () => new ApiError(500, 'internal_error', 'The gateway failed to handle the request; see its logs.', 'server_error');
