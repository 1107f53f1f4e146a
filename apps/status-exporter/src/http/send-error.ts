import { catalogAnswer, resolveError, type ErrorCode, type ErrorSpec } from '@iop/errors';
import type { Response } from 'express';

/** Answers an OpenAI-shaped error whose status, type, message and `Retry-After` come from `ERROR_CATALOG` (`@iop/errors`; README "Errors"). */
export function sendError<C extends ErrorCode>(res: Response, spec: ErrorSpec<C>): void {
  const answer = catalogAnswer(spec.code, resolveError(spec).message);
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  res.status(answer.status).json(answer.body);
}

/** A client-sent string as an error message echoes it (`@iop/errors`: the one bound, as the gateway's errors). */
export { echoed } from '@iop/errors';
