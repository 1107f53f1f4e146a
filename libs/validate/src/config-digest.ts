import { createHash } from 'node:crypto';
import { redactUrl } from './listen-address';
import type { EdgeConfig } from './schema';
import { matchesSetting, SECRET_SETTINGS, URL_SETTINGS } from './secret-settings';

/** What a secret is replaced with before hashing. */
const SECRET = '<secret>';

/** `value` as JSON with object keys sorted and secrets replaced, so equal settings give equal text whatever their order. */
function canonical(value: unknown, path: string[]): string {
  if (typeof value === 'string') {
    if (matchesSetting(SECRET_SETTINGS, path)) return JSON.stringify(SECRET);
    return JSON.stringify(matchesSetting(URL_SETTINGS, path) ? redactUrl(value) : value);
  }
  if (Array.isArray(value)) return `[${value.map((item, i) => canonical(item, [...path, String(i)])).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonical(item, [...path, key])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

const digests = new WeakMap<EdgeConfig, string>();

/**
 * The digest of a loaded config (README "Metrics, dashboard and traces", `iop_edge_config_info`; `config_hash` of
 * `/status`): sha256 (hex) of the settings as loaded — after `${VAR}` interpolation, defaults
 * applied, keys sorted — with every secret left out: API keys (`gateway.api_keys`,
 * `status.api_keys`, an adapter's `api_key`), a CLI adapter's `env` values, and the user,
 * password and query values of URLs (`queue.redis_url`, `status.push_url`, `base_url`). So
 * replicas that run the same file with the same environment show the same digest (the status
 * exporter too, which is not given the upstream keys), any other setting changes it, and no key
 * can be recovered or even tested against it. Comments and layout do not count. Cached per config
 * object; never throws.
 */
export function configDigest(config: EdgeConfig): string {
  let digest = digests.get(config);
  if (digest === undefined) {
    digest = createHash('sha256').update(canonical(config, [])).digest('hex');
    digests.set(config, digest);
  }
  return digest;
}
