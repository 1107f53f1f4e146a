import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { invalidApiKey } from '../errors';

const digest = (key: string) => createHash('sha256').update(key).digest();

/**
 * Client auth (DESIGN §3 `gateway.api_keys`): `Authorization: Bearer <key>` must match one
 * configured key, compared in constant time over SHA-256 digests so neither content nor length
 * leaks through timing. No keys configured = no client auth. Keys are read per request so a
 * config refresh applies at once.
 * @throws ApiError 401 `invalid_api_key` (through `next`).
 */
export function apiKeyAuth(apiKeys: () => readonly string[]): RequestHandler {
  let cachedFor: readonly string[] | undefined;
  let digests: Buffer[] = [];
  return (req, _res, next) => {
    const keys = apiKeys();
    if (keys.length === 0) return next();
    if (keys !== cachedFor) {
      cachedFor = keys;
      digests = keys.map(digest);
    }
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header);
    if (!match) return next(invalidApiKey());
    const presented = digest(match[1].trim());
    let ok = false;
    for (const d of digests) ok = timingSafeEqual(d, presented) || ok;
    next(ok ? undefined : invalidApiKey());
  };
}
