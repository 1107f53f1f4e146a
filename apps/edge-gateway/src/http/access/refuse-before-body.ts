import { presentedKey, type EdgeConfig } from '@iop/validate';
import type { IncomingMessage } from 'node:http';
import { type ApiError, invalidApiKey, requestTooLarge } from '../../errors';
import { clientKeysOf, invalidStatusKey, keySets } from './api-key-auth';

/** A refusal decided from a request's head alone, and the `WWW-Authenticate` challenge of a 401. */
export interface HeadRefusal {
  error: ApiError;
  challenge?: string;
}

/** The key a path asks for (README "Security"): none for the probes, the status keys, or the client keys. */
export type PathGate = 'open' | 'status' | 'client';

/** Probes, open to everyone. */
const OPEN_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);
/** The status routes: `status.api_keys`. */
const STATUS_PATHS: ReadonlySet<string> = new Set(['/status', '/metrics']);

/**
 * The key the app asks `url` (a request target as sent) for, matched as express matches its routes
 * (case-insensitive, one trailing slash allowed, the query ignored): `/healthz` and `/readyz` none,
 * `/status` and `/metrics` the status keys, every other target (the `/v1` surface, unknown paths,
 * `*`) the client keys.
 */
export function pathGate(url: string | undefined): PathGate {
  const path = (url ?? '').split('?', 1)[0].toLowerCase();
  const bare = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  if (OPEN_PATHS.has(bare)) return 'open';
  return STATUS_PATHS.has(bare) ? 'status' : 'client';
}

/** The bearer token of an `Authorization` header, as `apiKeyAuth` reads it. */
const bearer = (authorization: string | undefined) => /^Bearer\s+(.+)$/i.exec(authorization ?? '')?.[1].trim();

/**
 * What a request that asks `Expect: 100-continue` is refused before its body is asked for (README
 * "Security"), in the app's order: first its key, as the app checks it for its path
 * ({@link pathGate}: `gateway.api_keys` and `gateway.clients` by `Bearer`, `status.api_keys` by
 * `Bearer` or Basic, probes open), so an unauthenticated caller learns nothing but the 401; then,
 * for a POST, a `Content-Length` over `gateway.max_body_bytes`. Keys and limits are read per request.
 * @returns a function giving the refusal of a request's head: 401 `invalid_api_key` with its
 *   challenge, or 413 `request_too_large`; undefined when the body may come.
 */
export function refuseBeforeBody(config: () => EdgeConfig): (req: IncomingMessage) => HeadRefusal | undefined {
  const clientKeys = clientKeysOf(() => config().gateway);
  const statusKeys = keySets(() => config().status.api_keys);
  return (req) => {
    const gate = pathGate(req.url);
    const authorization = req.headers.authorization;
    if (gate === 'client') {
      const keys = clientKeys();
      if (!keys.open && keys.resolve(bearer(authorization)) === undefined)
        return { error: invalidApiKey(), challenge: 'Bearer' };
    } else if (gate === 'status') {
      const keys = statusKeys();
      if (!keys.open && !keys.matches(presentedKey(authorization)))
        return { error: invalidStatusKey(), challenge: 'Basic realm="iop-edge status", charset="UTF-8"' };
    }
    const limit = config().gateway.max_body_bytes;
    const declared = Number(req.headers['content-length']);
    if (req.method === 'POST' && Number.isFinite(declared) && declared > limit)
      return { error: requestTooLarge(limit) };
    return undefined;
  };
}
