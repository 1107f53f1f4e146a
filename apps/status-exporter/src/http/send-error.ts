import { catalogAnswer, resolveError, type ErrorCode, type ErrorSpec } from '@iop/errors';
import type { Response } from 'express';

/** Answers an OpenAI-shaped error whose status, type, message and `Retry-After` come from `ERROR_CATALOG` (`@iop/errors`; README "Errors"). */
export function sendError<C extends ErrorCode>(res: Response, spec: ErrorSpec<C>): void {
  const answer = catalogAnswer(spec.code, resolveError(spec).message);
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  res.status(answer.status).json(answer.body);
}

/** Longest client-sent string (a path) an error message echoes, in characters. */
export const MAX_ECHOED_CHARS = 200;

/**
 * A client-sent string as an error message echoes it: at most {@link MAX_ECHOED_CHARS} characters,
 * then `…(N more characters)` (as the gateway's errors do).
 */
export function echoed(text: string): string {
  return text.length <= MAX_ECHOED_CHARS
    ? text
    : `${text.slice(0, MAX_ECHOED_CHARS)}…(${text.length - MAX_ECHOED_CHARS} more characters)`;
}
