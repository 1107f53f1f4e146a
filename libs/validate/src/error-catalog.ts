/** One entry of {@link ERROR_CATALOG}: how an error code is answered. */
export interface ErrorCatalogEntry {
  /** HTTP status of the answer (499: the client is gone, nothing is sent; the access log records it). */
  readonly status: number;
  /** OpenAI error `type` of the body: `invalid_request_error`, `rate_limit_error` or `server_error`. */
  readonly type: 'invalid_request_error' | 'rate_limit_error' | 'server_error';
  /**
   * Present when the answer carries `Retry-After`: the seconds sent when whoever raised the error
   * gave none (a queue's or an upstream's own value wins).
   */
  readonly retryAfterS?: number;
}

/**
 * Every error code the gateway and the status exporter answer with, and its HTTP status, OpenAI
 * error `type` and `Retry-After` default: the one place these are mapped. Bodies follow the OpenAI
 * API error format, `{"error": {"message", "type", "param", "code"}}`
 * (https://platform.openai.com/docs/guides/error-codes); the rules behind each code are in
 * docs/architecture.md ("Request path", "Admission") and the README's "Errors" table, which a test
 * (`error-catalog.spec.ts`) keeps equal to this map both ways.
 *
 * Not in the catalog: an upstream's own 4xx or 429 passed on to the client keeps the upstream's
 * status, code and type (README "Errors"); a 408 from the HTTP server's header/body timers has no
 * body.
 */
export const ERROR_CATALOG = {
  invalid_request_error: { status: 400, type: 'invalid_request_error' },
  invalid_api_key: { status: 401, type: 'invalid_request_error' },
  origin_not_allowed: { status: 403, type: 'invalid_request_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  queue_full: { status: 429, type: 'rate_limit_error', retryAfterS: 1 },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', retryAfterS: 1 },
  client_closed: { status: 499, type: 'invalid_request_error' },
  internal_error: { status: 500, type: 'server_error' },
  upstream_error: { status: 502, type: 'server_error' },
  queue_timeout: { status: 503, type: 'server_error', retryAfterS: 1 },
  queue_unavailable: { status: 503, type: 'server_error', retryAfterS: 1 },
  no_available_provider: { status: 503, type: 'server_error', retryAfterS: 1 },
  shutting_down: { status: 503, type: 'server_error', retryAfterS: 1 },
  upstream_timeout: { status: 504, type: 'server_error' },
} as const satisfies Record<string, ErrorCatalogEntry>;

/** A code of {@link ERROR_CATALOG}. */
export type ErrorCode = keyof typeof ERROR_CATALOG;

/** True when `code` is a code of {@link ERROR_CATALOG} (an upstream's own code passed on is not). */
export function isCatalogCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_CATALOG, code);
}

/** The OpenAI-shaped error body (OpenAI API error format). */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

/**
 * The answer for a catalog `code`: its status, the headers to set (`retry-after` when the code
 * carries one; `retryAfterS` overrides the catalog's default) and the OpenAI-shaped body.
 * For apps that answer without the gateway's `ApiError` (the status exporter).
 */
export function catalogAnswer(
  code: ErrorCode,
  message: string,
  opts: { param?: string | null; retryAfterS?: number } = {},
): { status: number; headers: Record<string, string>; body: OpenAiErrorBody } {
  const entry: ErrorCatalogEntry = ERROR_CATALOG[code];
  const retryAfterS = opts.retryAfterS ?? entry.retryAfterS;
  return {
    status: entry.status,
    headers: retryAfterS !== undefined ? { 'retry-after': String(retryAfterS) } : {},
    body: { error: { message, type: entry.type, param: opts.param ?? null, code } },
  };
}
