import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (key: string) => createHash('sha256').update(key).digest();

/**
 * The key an `Authorization` header presents (README "Security"): `Bearer <key>`, or HTTP Basic
 * auth whose password is the key (any user name), so a browser can open a protected page such as
 * the exporter's dashboard. `undefined` when the header is missing or malformed.
 */
export function presentedKey(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  const bearer = /^Bearer\s+(.+)$/i.exec(authorization);
  if (bearer) return bearer[1].trim();
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
  if (!basic) return undefined;
  const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

/**
 * A set of configured keys that answers "does this key match one of them" in constant time:
 * SHA-256 digests compared with `timingSafeEqual`, every key compared whatever the outcome, so
 * neither a key's content nor its length leaks through timing.
 */
export class KeySet {
  private readonly digests: Buffer[];

  constructor(readonly keys: readonly string[]) {
    this.digests = keys.map(digest);
  }

  /** True when no key is configured (the routes it guards are open). */
  get open(): boolean {
    return this.digests.length === 0;
  }

  /** True when `presented` equals one of the keys. */
  matches(presented: string | undefined): boolean {
    if (presented === undefined) return false;
    const d = digest(presented);
    let ok = false;
    for (const key of this.digests) ok = timingSafeEqual(key, d) || ok;
    return ok;
  }
}
