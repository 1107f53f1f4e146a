import { KeySet, presentedKey } from '@iop/validate';
import type { RequestHandler } from 'express';
import { ApiError, invalidApiKey } from '../../errors';

/** Keeps one {@link KeySet} per configured list, rebuilt when a config refresh changes it. */
function keySets(apiKeys: () => readonly string[]): () => KeySet {
  let current = new KeySet([]);
  return () => {
    const keys = apiKeys();
    if (keys !== current.keys) current = new KeySet(keys);
    return current;
  };
}

/**
 * Client auth (`gateway.api_keys`, README "Security"): `Authorization: Bearer <key>` must match one
 * configured key, compared in constant time over SHA-256 digests so neither content nor length
 * leaks through timing. No keys configured = no client auth. Keys are read per request so a
 * config refresh applies at once.
 * A refusal carries `WWW-Authenticate: Bearer`.
 * @throws ApiError 401 `invalid_api_key` (through `next`).
 */
export function apiKeyAuth(apiKeys: () => readonly string[]): RequestHandler {
  const current = keySets(apiKeys);
  return (req, res, next) => {
    const keys = current();
    if (keys.open) return next();
    const match = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
    if (keys.matches(match?.[1].trim())) return next();
    // RFC 6750: a 401 names the scheme it wants.
    res.setHeader('www-authenticate', 'Bearer');
    next(invalidApiKey());
  };
}

/** 401 of the status routes: the answer names the setting, never a key. */
export const invalidStatusKey = () => new ApiError({ code: 'invalid_api_key', fields: { keys: 'status.api_keys' } });

/**
 * Auth of `/status` and `/metrics` (README "Security", `status.api_keys`): `Bearer <key>` or HTTP
 * Basic auth with the key as password; no keys configured = open. A refusal carries
 * `WWW-Authenticate: Basic` so a browser asks for the key. Probes (`/healthz`, `/readyz`) never
 * pass through this.
 * @throws ApiError 401 `invalid_api_key` (through `next`).
 */
export function statusKeyAuth(apiKeys: () => readonly string[]): RequestHandler {
  const current = keySets(apiKeys);
  return (req, res, next) => {
    const keys = current();
    if (keys.open || keys.matches(presentedKey(req.headers.authorization))) return next();
    res.setHeader('www-authenticate', 'Basic realm="iop-edge status", charset="UTF-8"');
    next(invalidStatusKey());
  };
}
