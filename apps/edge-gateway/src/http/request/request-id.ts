import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { GatewayHandler, GatewayResponse } from '../gateway-handler';

/** Longest client-sent `x-request-id` the gateway keeps, in characters; a longer one is replaced. */
export const MAX_REQUEST_ID_CHARS = 128;

/** Characters a kept `x-request-id` may hold: a plain token, safe in a header, a log line and a message. */
const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]+$/;

/**
 * The request id of a request (README "Errors": every answer carries `x-request-id`): the client's
 * `x-request-id` when it sent exactly one of 1 to {@link MAX_REQUEST_ID_CHARS} characters out of
 * `A-Z a-z 0-9 . _ : -`; otherwise (none, several, too long, other characters) a fresh
 * `crypto.randomUUID()`. Never throws.
 */
export function requestIdFrom(sent: string | string[] | undefined): string {
  return typeof sent === 'string' && sent.length <= MAX_REQUEST_ID_CHARS && SAFE_REQUEST_ID.test(sent)
    ? sent
    : randomUUID();
}

/**
 * The first middleware of the app: gives every request its id ({@link requestIdFrom}), sets it as
 * the `x-request-id` response header at once (so every answer, errors and 404s included, carries
 * it) and keeps it in the request context (`res.locals`, typed in `request-context.d.ts`) for {@link requestIdOf} and {@link requestLogger}, whose pino
 * child logger bound to `{ request_id }` (made on first use, so a request that logs nothing pays
 * nothing) writes the upstream-failure and failover warnings of the request under one id; the
 * access-log line carries the same `request_id` first ({@link loggedRequestId}) from the app's logger.
 */
export function assignRequestId(logger: Logger): GatewayHandler {
  return (req, res, next) => {
    const requestId = requestIdFrom(req.headers['x-request-id']);
    res.setHeader('x-request-id', requestId);
    res.locals.requestId = requestId;
    res.locals.baseLogger = logger;
    next();
  };
}

/** The request id {@link assignRequestId} gave `res`; `undefined` when it did not run (a test app without it). */
export function requestIdOf(res: GatewayResponse): string | undefined {
  return res.locals.requestId;
}

/**
 * The request's child logger, bound to `{ request_id }` and kept for the rest of the request: a
 * child of the logger given to {@link assignRequestId} (else of `fallback`) for the request's id
 * (else the `x-request-id` header already on `res`); `fallback` itself when `res` has no id.
 */
export function requestLogger(res: GatewayResponse, fallback: Logger): Logger {
  const locals = res.locals;
  if (locals.log) return locals.log;
  const id = loggedRequestId(res);
  if (id === undefined) return fallback;
  locals.log = (locals.baseLogger ?? fallback).child({ request_id: id });
  return locals.log;
}

/**
 * The `request_id` the request's log lines carry ({@link requestLogger}): the id {@link assignRequestId} gave `res`, else
 * the non-empty `x-request-id` header already on `res`; `undefined` when there is neither.
 */
export function loggedRequestId(res: GatewayResponse): string | undefined {
  if (res.locals.requestId !== undefined) return res.locals.requestId;
  const header = res.getHeader('x-request-id');
  return typeof header === 'string' && header !== '' ? header : undefined;
}
