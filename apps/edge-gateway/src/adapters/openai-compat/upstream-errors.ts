import { catalogMessage, ERROR_CATALOG } from '@iop/errors';
import type { Dispatcher } from 'undici';
import { responseTooLarge, UpstreamError, upstreamError } from '../../errors';

/**
 * What an upstream did, as the gateway's error (README "Errors"), per the table of
 * `OpenAiCompatAdapter`: a non-2xx answer, an answer over the size limit, a connection error.
 */

/** How much of an upstream's error body is read (README "Errors": limits on an answer); the rest is dropped. */
export const ERROR_BODY_BYTES = 4096;

/** Longest back-off an upstream's `Retry-After` may ask for, in seconds (a guard against a typo upstream). */
export const MAX_RETRY_AFTER_S = 600;

/** `Retry-After` of a 429 that sent none, in seconds (the catalog's default for `rate_limit_exceeded`). */
export const DEFAULT_RETRY_AFTER_S = ERROR_CATALOG.rate_limit_exceeded.retryAfterS;

/** The OpenAI error fields of an upstream's error body, when it is one (`{"error": {...}}` or `{"error": "..."}`). */
export function parseErrorBody(text: string): {
  message?: string;
  type?: string;
  code?: string;
  param?: string | null;
} {
  try {
    const parsed = JSON.parse(text) as { error?: unknown; message?: unknown };
    const error = parsed?.error;
    if (typeof error === 'string') return { message: error };
    if (typeof error === 'object' && error !== null) {
      const e = error as Record<string, unknown>;
      return {
        message: typeof e.message === 'string' ? e.message : undefined,
        type: typeof e.type === 'string' ? e.type : undefined,
        code: typeof e.code === 'string' ? e.code : undefined,
        param: typeof e.param === 'string' ? e.param : null,
      };
    }
    if (typeof parsed?.message === 'string') return { message: parsed.message };
  } catch {
    // not JSON
  }
  return {};
}

/**
 * Seconds of a `Retry-After` header (delta-seconds or an HTTP date), capped at
 * {@link MAX_RETRY_AFTER_S}; `undefined` when absent or unreadable.
 */
export function parseRetryAfter(value: unknown, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string' || text.trim() === '') return undefined;
  const seconds = /^\s*\d+(\.\d+)?\s*$/.test(text) ? Number(text) : (Date.parse(text) - now) / 1000;
  if (!Number.isFinite(seconds)) return undefined;
  return Math.min(MAX_RETRY_AFTER_S, Math.max(0, Math.ceil(seconds)));
}

/**
 * The error for a non-2xx answer, per the table of {@link OpenAiCompatAdapter}. `raw` is the start of
 * its body as sent; `redact` makes a text fit for a client (`UpstreamTarget.redactForClient`): it is
 * applied to the body for the log and to each field parsed from it (after parsing, so a secret
 * quoted inside a JSON string is matched as the client would read it).
 */
export function upstreamFailure(
  status: number,
  headers: Dispatcher.ResponseData['headers'],
  raw: string,
  where: string,
  redact: (text: string) => string,
): UpstreamError {
  const text = redact(raw);
  const fields = parseErrorBody(raw);
  const parsed = {
    message: fields.message === undefined ? undefined : redact(fields.message),
    type: fields.type === undefined ? undefined : redact(fields.type),
    code: fields.code === undefined ? undefined : redact(fields.code),
    param: typeof fields.param === 'string' ? redact(fields.param) : fields.param,
  };
  const detail = `${where} answered ${status}: ${text.slice(0, ERROR_BODY_BYTES)}`;
  if (status === 429) {
    const retryAfterS = parseRetryAfter(headers['retry-after']) ?? DEFAULT_RETRY_AFTER_S;
    // The upstream's own code, type and message when it sent them (README "Errors"); else the catalog's `rate_limit_exceeded`.
    const { status: limited, type } = ERROR_CATALOG.rate_limit_exceeded;
    const message = parsed.message ?? catalogMessage('rate_limit_exceeded', { retryAfterS });
    const code = parsed.code ?? 'rate_limit_exceeded';
    const passedOn = { status: limited, code, type: parsed.type ?? type, message, retryAfterS, param: parsed.param };
    return new UpstreamError(passedOn, { detail });
  }
  if (status === 401 || status === 403) {
    return upstreamError(
      `The provider refused the gateway's credentials (upstream ${status}); an operator must fix its api_key.`,
      { detail },
    );
  }
  if (status === 404 || status === 405) {
    return upstreamError(
      `The provider does not serve this endpoint or model (upstream ${status}); an operator must check its base_url and model names.`,
      {
        detail,
        counts: false,
        failover: true,
      },
    );
  }
  if (status >= 400 && status < 500) {
    // A 4xx about the request itself (context length, a bad field): the client's answer, passed on.
    const message = parsed.message ?? (text.trim().slice(0, 500) || `The upstream answered ${status}.`);
    const code = parsed.code ?? 'invalid_request_error';
    const passedOn = { status, code, type: parsed.type ?? ERROR_CATALOG.invalid_request_error.type, message };
    return new UpstreamError({ ...passedOn, param: parsed.param }, { detail });
  }
  const what =
    status >= 300 && status < 400
      ? `a redirect (${status})`
      : status >= 500
        ? String(status)
        : `an unexpected status (${status})`;
  return upstreamError(`The upstream answered ${what}.`, {
    detail: status >= 300 && status < 400 ? `${detail} location=${redact(String(headers.location ?? ''))}` : detail,
  });
}

/** A 2xx answer over `limit` bytes (`gateway.max_response_bytes`): not booked, no failover. `what` goes to the log. */
export const tooLarge = (limit: number, where: string, what: string) =>
  responseTooLarge(limit, `${where}: ${what}, over gateway.max_response_bytes ${limit}`);

/** An error code fit for a client's eyes (`ECONNREFUSED`, `UND_ERR_SOCKET`): never the message, which may name a host. */
export function clientSafeCode(err: unknown): string {
  // Duck-typed: errors of node's own modules are not `instanceof Error` in every realm (jest's vm).
  const e = (typeof err === 'object' && err !== null ? err : {}) as {
    code?: unknown;
    cause?: { code?: unknown };
    errors?: Array<{ code?: unknown }>;
  };
  const code = [e.code, e.cause?.code, e.errors?.[0]?.code].find(
    (c) => typeof c === 'string' && /^[A-Z][A-Z0-9_]*$/.test(c),
  );
  return (code as string | undefined) ?? 'connection error';
}

/** The error's whole account, for the log. */
export const messageOf = (err: unknown): string => `${clientSafeCode(err)} ${(err as Error)?.message ?? String(err)}`;
