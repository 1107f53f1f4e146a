import { ERROR_CATALOG, type ErrorCatalogEntry, type ErrorCode } from '@iop/validate';

/**
 * Every error the gateway answers with, as a value with an HTTP status and an OpenAI error
 * `code` (docs/architecture.md, "Errors"). Routes throw these; `errorMiddleware` turns them into the body
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

/** What an {@link UpstreamError} carries besides its status, code and message. */
export interface UpstreamErrorOptions {
  /**
   * What happened, for the log only: it may name the upstream's URL or host, quote its body or a CLI's
   * stderr. When given, the error's `message` is written for the client (it names no URL, host or
   * command line) and is shown as is; without it the message itself is treated as log-only and the
   * client gets a generic one (README "Errors": client errors never name base URLs, hosts or
   * command lines).
   */
  detail?: string;
  /** Seconds for `Retry-After`, e.g. the upstream's own on a 429. */
  retryAfterS?: number;
  /** Overrides {@link UpstreamError.countsAgainstProvider} (default: a 5xx-class failure). */
  counts?: boolean;
  /** Overrides {@link UpstreamError.failsOver} (default: counts against the provider, or a 429). */
  failover?: boolean;
  /** OpenAI `param`, for an upstream 4xx about one field. */
  param?: string | null;
}

/**
 * Something an upstream did, and nothing else: it could not be reached, reset the connection, sent
 * no first byte in time, answered 5xx or an unusable body (502 `upstream_error`, 504
 * `upstream_timeout`), rate-limited the gateway (429), or answered a 4xx that is passed on to the
 * client. Created only where the gateway handles an upstream's connection or bytes (the adapters,
 * the first-byte and stream-idle timers). Every other error, including the gateway's own faults and
 * the client's 4xx, is not an UpstreamError, so it never counts against a provider's health and never
 * fails over (README "Provider health").
 */
export class UpstreamError extends ApiError {
  /** Log-only account of the failure (see {@link UpstreamErrorOptions.detail}); undefined when `message` is log-only itself. */
  readonly detail?: string;
  private readonly counts?: boolean;
  private readonly failover?: boolean;

  constructor(
    status: number,
    code: string,
    message: string,
    type: string = status >= 500 ? 'server_error' : 'invalid_request_error',
    opts: UpstreamErrorOptions = {},
  ) {
    super(status, code, message, type, opts.param ?? null, opts.retryAfterS);
    this.detail = opts.detail;
    this.counts = opts.counts;
    this.failover = opts.failover;
  }

  /**
   * True when this failure counts against the provider's health: 5xx-class failures (unreachable,
   * reset, 5xx, first-byte timeout, a stalled stream). An upstream 4xx passed on is the client's
   * answer, and a 429 is a rate limit (the provider backs off instead): false.
   */
  get countsAgainstProvider(): boolean {
    return this.counts ?? this.status >= 500;
  }

  /**
   * True when a pooled request may be retried on a sibling after this failure, if no byte reached the
   * client yet (README "Failover"): every failure that counts against the provider, and a 429.
   */
  get failsOver(): boolean {
    return this.failover ?? (this.countsAgainstProvider || this.status === 429);
  }

  /** True when `message` may be shown to the client (it was written for it; the log gets `detail`). */
  get messageIsPublic(): boolean {
    return this.detail !== undefined;
  }
}

/** True for an {@link UpstreamError} that counts against its provider (see `countsAgainstProvider`); false for anything else. */
export const countsAgainstProvider = (err: unknown): err is UpstreamError =>
  err instanceof UpstreamError && err.countsAgainstProvider;

/** True for an {@link UpstreamError} after which a pooled request may fail over (see `failsOver`). */
export const failsOver = (err: unknown): err is UpstreamError => err instanceof UpstreamError && err.failsOver;

/**
 * The gateway's own error for a catalog `code`: status, OpenAI `type` and `Retry-After` default come
 * from `ERROR_CATALOG` (`@iop/validate`, the one map of codes; README "Errors"). `opts.retryAfterS`
 * overrides the catalog's default.
 */
export function catalogError(
  code: ErrorCode,
  message: string,
  opts: { param?: string | null; retryAfterS?: number } = {},
): ApiError {
  const entry: ErrorCatalogEntry = ERROR_CATALOG[code];
  return new ApiError(
    entry.status,
    code,
    message,
    entry.type,
    opts.param ?? null,
    opts.retryAfterS ?? entry.retryAfterS,
  );
}

/**
 * An {@link UpstreamError} with a catalog `code` (`upstream_error`, `upstream_timeout`,
 * `rate_limit_exceeded`): status, type and `Retry-After` default from `ERROR_CATALOG`; `status`
 * overrides the catalog's (e.g. a 502-class failure answered with another 5xx).
 */
export function catalogUpstreamError(
  code: 'upstream_error' | 'upstream_timeout' | 'rate_limit_exceeded',
  message: string,
  opts: UpstreamErrorOptions & { status?: number } = {},
): UpstreamError {
  const entry: ErrorCatalogEntry = ERROR_CATALOG[code];
  return new UpstreamError(opts.status ?? entry.status, code, message, entry.type, {
    ...opts,
    retryAfterS: opts.retryAfterS ?? entry.retryAfterS,
  });
}

export const invalidRequest = (message: string, param: string | null = null) =>
  catalogError('invalid_request_error', message, { param });
export const invalidApiKey = () =>
  catalogError('invalid_api_key', 'Incorrect or missing API key. Send it as "Authorization: Bearer <key>".');
export const modelNotFound = (model: string) =>
  catalogError(
    'model_not_found',
    `The model "${model}" does not exist on this gateway. GET /v1/models lists the models it serves.`,
    { param: 'model' },
  );
export const notFound = (path: string) =>
  catalogError(
    'not_found',
    `No route for ${path}. This gateway serves /v1/models, /v1/chat/completions, /v1/responses and /v1/embeddings.`,
  );
export const methodNotAllowed = (method: string, path: string, allow: string) =>
  catalogError('method_not_allowed', `${method} is not allowed on ${path}; use ${allow}.`);
export const requestTooLarge = (limitBytes: number) =>
  catalogError(
    'request_too_large',
    `The request body is larger than the gateway's limit of ${limitBytes} bytes (gateway.max_body_bytes).`,
  );
/** 413: the body holds more JSON values than `gateway.max_body_values` (README "Security"), counted before it is parsed. */
export const tooManyValues = (limit: number) =>
  catalogError(
    'request_too_large',
    `The request body holds more than ${limit} JSON values (an array element counts 1, an object member 10); the gateway's limit is gateway.max_body_values.`,
  );
/**
 * 502 `upstream_error`: an upstream's answer passed `limit` bytes (`gateway.max_response_bytes`):
 * a non-streamed answer, or the text a translated Responses stream must hold for its closing
 * events. Not booked and not failed over: a sibling would send the same (README "Errors").
 * @param detail log-only: where and what passed the limit.
 */
export const responseTooLarge = (limit: number, detail: string) =>
  upstreamError(
    `The upstream's answer is larger than the gateway's limit of ${limit} bytes (gateway.max_response_bytes).`,
    502,
    { detail, counts: false, failover: false },
  );
/** The client closed the connection before the answer (499: nothing is sent; the access log records it). */
export const clientClosed = () => catalogError('client_closed', 'The client closed the connection.');
/**
 * A 5xx-class upstream failure (502 by default). `message` is shown to the client only when
 * `opts.detail` carries the log-only account; otherwise `message` itself goes to the log and the
 * client gets a generic message with the request id (see {@link UpstreamErrorOptions.detail}).
 */
export const upstreamError = (message: string, status = 502, opts: UpstreamErrorOptions = {}) =>
  catalogUpstreamError('upstream_error', message, { ...opts, status });
/**
 * 504 `upstream_timeout`: no first byte from the upstream within `ms` (`gateway.request_timeout_ms`).
 * Its own class so the dispatch can weigh it (`weighFirstByteTimeout`, README "Provider health"):
 * `counts: false` when it is the request's own length rather than the provider's failure.
 */
export class FirstByteTimeout extends UpstreamError {
  constructor(
    readonly ms: number,
    counts?: boolean,
  ) {
    const message = `The upstream sent no byte within ${ms} ms (gateway.request_timeout_ms).`;
    const entry: ErrorCatalogEntry = ERROR_CATALOG.upstream_timeout;
    super(entry.status, 'upstream_timeout', message, entry.type, {
      detail: message,
      retryAfterS: entry.retryAfterS,
      counts,
    });
  }
}
export const upstreamTimeout = (ms: number) => new FirstByteTimeout(ms);
/** No byte moved either way for `ms` in a stream (README "Streaming"), on the upstream's side. */
export const streamIdle = (ms: number) => {
  const message = `The upstream sent nothing for ${ms} ms mid-stream (gateway.stream_idle_timeout_ms).`;
  return catalogUpstreamError('upstream_timeout', message, { detail: message });
};
/** The gateway's own fault (a bug): a fixed message, never the error's text or stack; the cause goes to the log. */
export const internalError = () =>
  catalogError('internal_error', 'The gateway failed to handle the request; see its logs.');

/**
 * The error as the client may see it (README "Errors"): an {@link UpstreamError} whose message is
 * log-only (it may quote an upstream's body, a URL, a CLI's stderr) becomes a generic message; a
 * 5xx-class one names the request id so an operator finds the log line. Anything else is returned
 * as it is.
 */
export function toClientError(err: unknown, requestId: string): unknown {
  if (!(err instanceof UpstreamError)) return err;
  if (err.status < 500 && err.messageIsPublic) return err;
  const message = err.messageIsPublic
    ? `${err.message} (request id ${requestId})`
    : `The model's upstream failed (${err.status === 504 ? 'timed out' : 'error'}); the gateway's log has the details under request id ${requestId}.`;
  return new UpstreamError(err.status, err.code, message, err.type, {
    detail: err.detail ?? err.message,
    retryAfterS: err.retryAfterS,
    param: err.param,
    counts: err.countsAgainstProvider,
    failover: err.failsOver,
  });
}

/**
 * The drain after SIGTERM ran out (`IOP_SHUTDOWN_GRACE_MS`, README "Environment variables") while the
 * request still ran: its upstream call is aborted with this, so the client gets a 503 before the
 * first byte or the stream's error event after it, never a bare cut connection.
 */
export const shuttingDown = () =>
  catalogError(
    'shutting_down',
    'The gateway is shutting down and its drain time ran out before this request finished; retry it.',
  );
