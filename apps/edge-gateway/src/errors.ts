import {
  ERROR_CATALOG,
  boundedMessage,
  catalogMessage,
  echoed,
  echoedParam,
  resolveError,
  type ErrorCatalogEntry,
  type ErrorCode,
  type ErrorParts,
  type ErrorSpec,
  type UpstreamTimeoutFields,
} from '@iop/errors';

/**
 * What an {@link ApiError} is made from: a catalog code with its named fields (`ErrorSpec`, the
 * message from the code's template in `ERROR_CATALOG`), or an error written elsewhere (`ErrorParts`):
 * an upstream's own error passed on (README "Errors"), a queue's refusal (made from the catalog in
 * `@iop/dispatch`), or an error re-worded for the client ({@link toClientError}).
 */
export type ApiErrorInit<C extends ErrorCode = ErrorCode> = ErrorSpec<C> | ErrorParts;

/**
 * Every error the gateway answers with, as a value with an HTTP status and an OpenAI error
 * `code` (docs/architecture.md, "Errors"). Routes throw these; `errorMiddleware` turns them into the body
 * `{"error": {"message", "type", "param", "code"}}`. No route builds an error body by hand.
 * `new ApiError({ code: 'model_not_found', fields: { model }, param: 'model' })`.
 */
export class ApiError<C extends ErrorCode = ErrorCode> extends Error {
  override readonly name = 'ApiError';
  readonly status: number;
  readonly code: string;
  /** OpenAI error `type`. */
  readonly type: string;
  /** OpenAI `param`: the request field the error is about, or null. */
  readonly param: string | null;
  /**
   * Seconds for the `Retry-After` header, when retrying can help (a catalog code's default when not
   * given); `null` when retrying the same request cannot help (no header, whatever the code's default).
   */
  readonly retryAfterS?: number | null;

  /** Client strings are bounded here whatever made `init` (`@iop/errors` `echoed.ts`): `param` and the message. */
  constructor(init: ApiErrorInit<C>) {
    const parts: ErrorParts = 'message' in init ? init : resolveError(init);
    super(boundedMessage(parts.message));
    this.status = parts.status;
    this.code = parts.code;
    this.type = parts.type;
    this.param = echoedParam(parts.param);
    this.retryAfterS = parts.retryAfterS;
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
  /** Overrides {@link UpstreamError.countsAgainstProvider} (default: a 5xx-class failure). */
  counts?: boolean;
  /** Overrides {@link UpstreamError.failsOver} (default: counts against the provider, or a 429). */
  failover?: boolean;
}

/** The catalog codes of what an upstream did. */
export type UpstreamErrorCode = 'upstream_error' | 'upstream_timeout' | 'rate_limit_exceeded';

/**
 * Something an upstream did, and nothing else: it could not be reached, reset the connection, sent
 * no first byte in time, answered 5xx or an unusable body (502 `upstream_error`, 504
 * `upstream_timeout`), rate-limited the gateway (429), or answered a 4xx that is passed on to the
 * client. Created only where the gateway handles an upstream's connection or bytes (the adapters,
 * the first-byte and stream-idle timers). Every other error, including the gateway's own faults and
 * the client's 4xx, is not an UpstreamError, so it never counts against a provider's health and never
 * fails over (README "Provider health").
 */
export class UpstreamError<C extends UpstreamErrorCode = UpstreamErrorCode> extends ApiError<C> {
  /** Log-only account of the failure (see {@link UpstreamErrorOptions.detail}); undefined when `message` is log-only itself. */
  readonly detail?: string;
  private readonly counts?: boolean;
  private readonly failover?: boolean;

  /** `init`: a catalog code of an upstream failure with its fields, or the upstream's own error passed on. */
  constructor(init: ApiErrorInit<C>, opts: UpstreamErrorOptions = {}) {
    super(init);
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
 * 400 `invalid_request_error`: `problem` says what is wrong and how to fix it, each client string in
 * it passed through {@link echoed}; `param` names the field (bounded by `ApiError`).
 */
export const invalidRequest = (problem: string, param: string | null = null) =>
  new ApiError({ code: 'invalid_request_error', fields: { problem }, param });
/** 401 of `/v1` (`gateway.api_keys`). */
export const invalidApiKey = () => new ApiError({ code: 'invalid_api_key', fields: { keys: 'gateway.api_keys' } });
/**
 * The one bound on client strings in errors (`@iop/errors`, README "Errors"): {@link echoed} cuts a
 * client string an error message quotes to `MAX_ECHOED_CHARS` (200) characters; `ApiError` bounds
 * every `param` the same way and every message to `MAX_MESSAGE_CHARS`.
 */
export { echoed, MAX_ECHOED_CHARS, MAX_MESSAGE_CHARS } from '@iop/errors';

/** 404 `model_not_found`; the message echoes the model id cut by {@link echoed}. */
export const modelNotFound = (model: string) =>
  new ApiError({ code: 'model_not_found', fields: { model: echoed(model) }, param: 'model' });
/** 404 `not_found` for a path the gateway does not serve; the message echoes the path cut by {@link echoed}. */
export const notFound = (method: string, path: string) =>
  new ApiError({
    code: 'not_found',
    fields: {
      method,
      path: echoed(path),
      served: '/v1/models, /v1/chat/completions, /v1/responses and /v1/embeddings',
    },
  });
export const methodNotAllowed = (f: { method: string; path: string; allow: string }) =>
  new ApiError({ code: 'method_not_allowed', fields: f });
export const requestTooLarge = (limitBytes: number) =>
  new ApiError({ code: 'request_too_large', fields: { limitBytes } });
/** 413: the body holds more JSON values than `gateway.max_body_values` (README "Security"), counted before it is parsed. */
export const tooManyValues = (limitValues: number) =>
  new ApiError({ code: 'request_too_large', fields: { limitValues } });
/**
 * 502 `upstream_error`: an upstream's answer passed `limit` bytes (`gateway.max_response_bytes`):
 * a non-streamed answer, or the text a translated Responses stream must hold for its closing
 * events. Not booked and not failed over: a sibling would send the same (README "Errors").
 * @param detail log-only: where and what passed the limit.
 */
export const responseTooLarge = (limit: number, detail: string) =>
  upstreamError(
    `The upstream's answer is larger than the gateway's limit of ${limit} bytes (gateway.max_response_bytes).`,
    {
      detail,
      counts: false,
      failover: false,
    },
  );
/** The client closed the connection before the answer (499: nothing is sent; the access log records it). */
export const clientClosed = () => new ApiError({ code: 'client_closed' });
/**
 * A 5xx-class upstream failure (502 `upstream_error`). `problem` is shown to the client only when
 * `opts.detail` carries the log-only account; otherwise `problem` itself goes to the log and the
 * client gets a generic message with the request id (see {@link UpstreamErrorOptions.detail}).
 */
export const upstreamError = (problem: string, opts: UpstreamErrorOptions = {}) =>
  new UpstreamError({ code: 'upstream_error', fields: { problem } }, opts);
/**
 * 504 `upstream_timeout` for no first byte from the upstream within `ms` (`gateway.request_timeout_ms`).
 * Its own class so the dispatch can weigh it (`weighFirstByteTimeout`, README "Provider health"):
 * `counts: false` when it is the request's own length rather than the provider's failure.
 */
export class FirstByteTimeout extends UpstreamError<'upstream_timeout'> {
  constructor(
    readonly ms: number,
    counts?: boolean,
  ) {
    const fields = { wait: 'first_byte', ms } as const;
    super({ code: 'upstream_timeout', fields }, { detail: catalogMessage('upstream_timeout', fields), counts });
  }
}
/**
 * 504 `upstream_timeout`: no first byte within `gateway.request_timeout_ms` (a {@link FirstByteTimeout}),
 * nothing for `gateway.stream_idle_timeout_ms` mid-stream (README "Streaming"), or a CLI run past its
 * adapter's `timeout_ms`. The message names only the setting (and the adapter id), so the client sees it as it is.
 */
export const upstreamTimeout = (fields: UpstreamTimeoutFields): UpstreamError =>
  fields.wait === 'first_byte'
    ? new FirstByteTimeout(fields.ms)
    : new UpstreamError({ code: 'upstream_timeout', fields }, { detail: catalogMessage('upstream_timeout', fields) });
/** The gateway's own fault (a bug): a fixed message, never the error's text or stack; the cause goes to the log. */
export const internalError = () => new ApiError({ code: 'internal_error' });

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
  const { status, code, type, retryAfterS, param } = err;
  return new UpstreamError(
    { status, code, type, message, retryAfterS, param },
    { detail: err.detail ?? err.message, counts: err.countsAgainstProvider, failover: err.failsOver },
  );
}

/**
 * The drain after SIGTERM ran out (`IOP_SHUTDOWN_GRACE_MS`, README "Environment variables") while the
 * request still ran: its upstream call is aborted with this, so the client gets a 503 before the
 * first byte or the stream's error event after it, never a bare cut connection.
 */
export const shuttingDown = () => new ApiError({ code: 'shutting_down' });

/**
 * An error with a catalog `code` whose message was already made from the catalog elsewhere (a queue's
 * refusal): status, type and `Retry-After` default of the code, `message` as it is.
 */
export function catalogCodeError(code: ErrorCode, message: string, retryAfterS?: number | null): ApiError {
  const entry: ErrorCatalogEntry = ERROR_CATALOG[code];
  return new ApiError({
    status: entry.status,
    code,
    type: entry.type,
    message,
    retryAfterS: retryAfterS === undefined ? entry.retryAfterS : retryAfterS,
  });
}
