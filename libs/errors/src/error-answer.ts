import {
  ERROR_CATALOG,
  catalogMessage,
  type ErrorCatalogEntry,
  type ErrorCode,
  type ErrorMessageArgs,
  type ErrorSpec,
} from './error-catalog';
import { boundedMessage, echoedFields, echoedParam } from './echoed';

/** An error ready to answer: HTTP status, code, OpenAI `type`, message, `param` and `Retry-After` seconds. */
export interface ErrorParts {
  readonly status: number;
  readonly code: string;
  readonly type: string;
  readonly message: string;
  readonly param?: string | null;
  /** Seconds for `Retry-After`; `null`: retrying the same request cannot help, so none is sent even where the code has a default. */
  readonly retryAfterS?: number | null;
}

/**
 * The parts of a catalog error: status and type of its code, message from its template, `Retry-After`
 * the spec's or the code's default. Client strings are bounded here (`echoed.ts`): each string field
 * but `problem` to `MAX_ECHOED_CHARS`, `param` likewise, the message to `MAX_MESSAGE_CHARS`.
 */
export function resolveError<C extends ErrorCode>(spec: ErrorSpec<C>): ErrorParts {
  const entry: ErrorCatalogEntry = ERROR_CATALOG[spec.code];
  const args = (spec.fields === undefined ? [] : [echoedFields(spec.fields)]) as ErrorMessageArgs<C>;
  return {
    status: entry.status,
    code: spec.code,
    type: entry.type,
    message: boundedMessage(catalogMessage(spec.code, ...args)),
    param: echoedParam(spec.param),
    retryAfterS: spec.retryAfterS ?? entry.retryAfterS,
  };
}

/** The OpenAI-shaped error body (OpenAI API error format). */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

/**
 * The answer for a catalog `code` with its `message` (from {@link catalogMessage}): its status, the
 * headers to set (`retry-after` when the code carries one; `retryAfterS` overrides the catalog's
 * default) and the OpenAI-shaped body, its message and `param` bounded as {@link resolveError}'s. For apps that answer without the gateway's `ApiError` (the
 * status exporter).
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
    body: { error: { message: boundedMessage(message), type: entry.type, param: echoedParam(opts.param), code } },
  };
}
