import type { RequestHandler } from 'express';
import { methodNotAllowed } from '../errors';

/** What a path served only by `router.get` allows: express answers HEAD with the GET route. */
export const GET_AND_HEAD = 'GET, HEAD';

/**
 * The handler for any other method on a path served by GET (`/status`, `/metrics`, `/healthz`,
 * `/readyz`): `405 method_not_allowed`, OpenAI-shaped, with `Allow: GET, HEAD` (README "Errors":
 * a known path with the wrong method; RFC 9110, section 15.5.6, the 405 carries `Allow`). Mount it
 * with `router.all(path, ...)` after the GET route, so GET and HEAD never reach it.
 */
export function onlyGet(path: string): RequestHandler {
  return (req, res, next) => {
    res.setHeader('allow', GET_AND_HEAD);
    next(methodNotAllowed({ method: req.method, path, allow: GET_AND_HEAD }));
  };
}
