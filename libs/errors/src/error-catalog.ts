import { rateLimitMessage } from './rate-limit-message';

/**
 * One entry of {@link ERROR_CATALOG}: how an error code is answered. `message` is the code's message
 * template: a function of the named fields that code needs (none for a fixed text), so TypeScript checks
 * every raiser passes them. Templates never put a base URL, a host, a command line or a credential in a
 * message (README "Errors"): their fields are model and provider ids, setting names, numbers and the
 * gateway's own sentences.
 */
export interface ErrorCatalogEntry {
  /** HTTP status of the answer (499: the client is gone, nothing is sent; the access log records it). */
  readonly status: number;
  /** OpenAI error `type` of the body: `invalid_request_error`, `rate_limit_error` or `server_error`. */
  readonly type: 'invalid_request_error' | 'rate_limit_error' | 'server_error';
  /**
   * Present when the answer carries `Retry-After`: the seconds sent when whoever raised the error
   * gave none (a queue's, the health record's or an upstream's own value wins).
   */
  readonly retryAfterS?: number;
  /** The message for the client, from the code's fields. */
  readonly message: (fields: never) => string;
}

/** Which API keys a request lacked (fields of `invalid_api_key`). */
export interface InvalidApiKeyFields {
  /** `gateway.api_keys` for `/v1`; `status.api_keys` for `/status`, `/metrics` and the exporter's pages. */
  readonly keys: 'gateway.api_keys' | 'status.api_keys';
}

/** Why the provider queue could not take or keep a request (fields of `queue_unavailable`). */
export type QueueUnavailableFields =
  /** A Redis command failed; `detail` is the gateway's own account (never a URL or host). */
  | { readonly why: 'redis_error'; readonly detail: string }
  /**
   * A waiting request outwaited Redis's silence (docs/architecture.md, "Fencing"), in ms; `refused`:
   * Redis answered, but refused every write (docs/architecture.md, "Redis over maxmemory").
   */
  | { readonly why: 'redis_silent'; readonly silentMs: number; readonly refused?: boolean }
  /** A held lease could not be renewed in time and was fenced. */
  | { readonly why: 'lease_lost'; readonly provider: string }
  /** The queue is closing: the process is shutting down. */
  | { readonly why: 'closing' }
  /** Something other than a queue refusal failed the admission (a bug). */
  | { readonly why: 'unknown' }
  /**
   * What a client reads whatever the queue's own account was: that may quote the backend (Redis's
   * error text), which stays in the gateway's log (README "Errors"). `outOfMemory`: Redis answered, but
   * is over `maxmemory` and refuses new work (docs/architecture.md, "Redis over maxmemory").
   */
  | { readonly why: 'client'; readonly outOfMemory?: boolean };

/**
 * Why a request found no place in line (fields of `queue_full`; docs/architecture.md, "Clients,
 * priority and fair share"): every candidate's queue was full (`why` absent), its client already had
 * `max_queued` requests waiting in the pool, or half of a replica's `max_connections` waiting or
 * running on that replica across every pool, or it waited and was evicted for a request served before it.
 */
export type QueueFullFields =
  | { readonly model: string; readonly why?: 'queues_full' }
  | { readonly model: string; readonly why: 'client_queued'; readonly client: string; readonly maxQueued: number }
  | { readonly model: string; readonly why: 'shed' }
  | { readonly model: string; readonly why: 'replica_queued'; readonly client: string; readonly limit: number };

/** Which wait an upstream outlived (fields of `upstream_timeout`); `ms` is the limit that ran out. */
export type UpstreamTimeoutFields =
  | { readonly wait: 'first_byte'; readonly ms: number }
  | { readonly wait: 'stream_idle'; readonly ms: number }
  | { readonly wait: 'cli_run'; readonly ms: number; readonly adapter: string };

const STATUS_KEY_HINT =
  'This page needs a status key (status.api_keys): send "Authorization: Bearer <key>", or the key as the password of HTTP Basic auth.';

/**
 * Every error code the gateway and the status exporter answer with, and its HTTP status, OpenAI error
 * `type`, `Retry-After` default and message template: the one place these are mapped. Bodies follow
 * the OpenAI API error format, `{"error": {"message", "type", "param", "code"}}`
 * (https://platform.openai.com/docs/guides/error-codes); the rules behind each code are in
 * docs/architecture.md ("Request path", "Admission", "Errors") and the README's "Errors" table, which
 * a test (`error-catalog.spec.ts`) keeps equal to this map both ways.
 *
 * Not in the catalog: an upstream's own 4xx or 429 passed on to the client keeps the upstream's
 * status, code, type and message (README "Errors").
 */
export const ERROR_CATALOG = {
  invalid_request_error: {
    status: 400,
    type: 'invalid_request_error',
    message: (f: { problem: string }) => f.problem,
  },
  invalid_api_key: {
    status: 401,
    type: 'invalid_request_error',
    message: (f: InvalidApiKeyFields) =>
      f.keys === 'status.api_keys'
        ? STATUS_KEY_HINT
        : 'Incorrect or missing API key. Send it as "Authorization: Bearer <key>".',
  },
  origin_not_allowed: {
    status: 403,
    type: 'invalid_request_error',
    message: () => 'Cross-origin requests from this origin are not allowed (gateway.cors.allowed_origins).',
  },
  model_not_found: {
    status: 404,
    type: 'invalid_request_error',
    message: (f: { model: string }) =>
      `The model "${f.model}" does not exist on this gateway. GET /v1/models lists the models it serves.`,
  },
  not_found: {
    status: 404,
    type: 'invalid_request_error',
    message: (f: { method: string; path: string; served: string }) =>
      `No route for ${f.method} ${f.path}. This server serves ${f.served}.`,
  },
  method_not_allowed: {
    status: 405,
    type: 'invalid_request_error',
    message: (f: { method: string; path: string; allow: string }) =>
      `${f.method} is not allowed on ${f.path}; use ${f.allow}.`,
  },
  request_too_large: {
    status: 413,
    type: 'invalid_request_error',
    message: (f: { limitBytes: number } | { limitValues: number }) =>
      'limitValues' in f
        ? `The request body holds more than ${f.limitValues} JSON values (an array element counts 1, an object member 10); the gateway's limit is gateway.max_body_values.`
        : `The request body is larger than the gateway's limit of ${f.limitBytes} bytes (gateway.max_body_bytes).`,
  },
  request_timeout: {
    status: 408,
    type: 'invalid_request_error',
    message: () =>
      'The request did not arrive in full in time (its headers, then its body, each have a time limit); the connection is closed.',
  },
  request_header_fields_too_large: {
    status: 431,
    type: 'invalid_request_error',
    message: (f: { limitBytes: number }) =>
      `The request's headers are larger than the server reads (${f.limitBytes} bytes in all); the connection is closed.`,
  },
  expectation_failed: {
    status: 417,
    type: 'invalid_request_error',
    message: (f: { expect: string }) =>
      `The server cannot meet the request's Expect header "${f.expect}" (RFC 9110, section 10.1.1); send no Expect header, or Expect: 100-continue. The connection is closed.`,
  },
  unsupported_media_type: {
    status: 415,
    type: 'invalid_request_error',
    message: (f: { contentType: string | undefined }) =>
      `The request body must be JSON sent with Content-Type: application/json${f.contentType ? ` (got ${f.contentType})` : ' (none was sent)'}.`,
  },
  queue_full: {
    status: 429,
    type: 'rate_limit_error',
    retryAfterS: 1,
    message: queueFullMessage,
  },
  rate_limit_exceeded: {
    status: 429,
    type: 'rate_limit_error',
    retryAfterS: 1,
    message: rateLimitMessage,
  },
  client_closed: {
    status: 499,
    type: 'invalid_request_error',
    message: () => 'The client closed the connection.',
  },
  internal_error: {
    status: 500,
    type: 'server_error',
    message: () => 'The gateway failed to handle the request; see its logs.',
  },
  upstream_error: {
    status: 502,
    type: 'server_error',
    message: (f: { problem: string }) => f.problem,
  },
  queue_timeout: {
    status: 503,
    type: 'server_error',
    retryAfterS: 1,
    message: (f: { model: string; waitedMs: number }) =>
      `No provider of model "${f.model}" freed a slot within ${f.waitedMs} ms.`,
  },
  queue_unavailable: {
    status: 503,
    type: 'server_error',
    retryAfterS: 1,
    message: queueUnavailableMessage,
  },
  no_available_provider: {
    status: 503,
    type: 'server_error',
    retryAfterS: 5,
    message: (f: { model: string }) => `No enabled, healthy provider can serve model "${f.model}" right now.`,
  },
  shutting_down: {
    status: 503,
    type: 'server_error',
    retryAfterS: 1,
    message: () => 'The gateway is shutting down and its drain time ran out before this request finished; retry it.',
  },
  upstream_timeout: {
    status: 504,
    type: 'server_error',
    message: upstreamTimeoutMessage,
  },
} as const satisfies Record<string, ErrorCatalogEntry>;

function queueFullMessage(f: QueueFullFields): string {
  if (f.why === 'client_queued')
    return `Client "${f.client}" already has ${f.maxQueued} requests waiting for model "${f.model}" (its max_queued).`;
  if (f.why === 'replica_queued')
    return `Client "${f.client}" already has ${f.limit} requests waiting or running on this gateway replica (half of its gateway.max_connections), across every model.`;
  if (f.why === 'shed')
    return `This request waited for model "${f.model}" and gave its place to a request served before it: one of a higher priority band (this band is sheddable), or of a client under its fair share of the queue.`;
  return `Every provider of model "${f.model}" has a full queue.`;
}

function queueUnavailableMessage(f: QueueUnavailableFields): string {
  switch (f.why) {
    case 'redis_error':
      return `The provider queue (Redis) is unavailable: ${f.detail}`;
    case 'redis_silent':
      return `The provider queue (Redis) is unavailable: Redis has ${f.refused ? 'refused writes' : 'not answered'} for ${f.silentMs} ms while the request waited in the queue.`;
    case 'lease_lost':
      return `The lease on provider "${f.provider}" could not be renewed; the request was stopped to keep the provider's limit.`;
    case 'closing':
      return 'The gateway is shutting down.';
    case 'unknown':
      return 'The provider queue is unavailable.';
    case 'client':
      return f.outOfMemory
        ? "The gateway's provider queue (Redis) is out of memory and takes no new requests right now; retry shortly."
        : "The gateway's provider queue (Redis) cannot be reached right now; retry shortly.";
  }
}

function upstreamTimeoutMessage(f: UpstreamTimeoutFields): string {
  switch (f.wait) {
    case 'first_byte':
      return `The upstream sent no byte within ${f.ms} ms (gateway.request_timeout_ms).`;
    case 'stream_idle':
      return `The upstream sent nothing for ${f.ms} ms mid-stream (gateway.stream_idle_timeout_ms).`;
    case 'cli_run':
      return `The CLI model ran longer than its adapter's timeout_ms (${f.ms} ms, adapter "${f.adapter}") and was stopped.`;
  }
}

/** A code of {@link ERROR_CATALOG}. */
export type ErrorCode = keyof typeof ERROR_CATALOG;

/** The arguments of a code's message template: `[fields]`, or `[]` for a fixed text. */
export type ErrorMessageArgs<C extends ErrorCode> = Parameters<(typeof ERROR_CATALOG)[C]['message']>;

/** The named fields a code's message needs (`undefined` for a fixed text). */
export type ErrorFields<C extends ErrorCode> = ErrorMessageArgs<C>[0];

/**
 * One error to raise, by its catalog code and named fields: `{ code: 'queue_full', fields: { model } }`.
 * `fields` may be left out for a fixed text; `param` is the OpenAI `param`; `retryAfterS` overrides the
 * code's `Retry-After` default.
 */
export type ErrorSpec<C extends ErrorCode = ErrorCode> = {
  readonly code: C;
  readonly param?: string | null;
  readonly retryAfterS?: number;
} & (ErrorMessageArgs<C> extends [] ? { readonly fields?: undefined } : { readonly fields: ErrorFields<C> });

/** True when `code` is a code of {@link ERROR_CATALOG} (an upstream's own code passed on is not). */
export function isCatalogCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_CATALOG, code);
}

/** The message of `code` from its template: `catalogMessage('queue_full', { model })`. */
export function catalogMessage<C extends ErrorCode>(code: C, ...fields: ErrorMessageArgs<C>): string {
  // Each entry's template takes its own fields; `ErrorMessageArgs<C>` already matched them to `code`.
  return (ERROR_CATALOG[code].message as (...args: ErrorMessageArgs<C>) => string)(...fields);
}

/** The `Retry-After` default of `code` in seconds, or undefined when the code carries none. */
export function catalogRetryAfterS(code: ErrorCode): number | undefined {
  const entry: ErrorCatalogEntry = ERROR_CATALOG[code];
  return entry.retryAfterS;
}
