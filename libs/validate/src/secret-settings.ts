/**
 * Where `edge.yaml` holds secrets (README "Configuration", "Security"), named once for the config
 * digest (`configDigest`) and for what the status exporter may load without (`GATEWAY_ONLY_SECRETS`).
 */

/** A path of the config as its segments, `*` matching any key or index, e.g. `['nodes', '*', 'adapters', '*', 'api_key']`. */
export type SettingPattern = readonly string[];

/** Settings that hold a secret in full: API keys and a CLI adapter's `env` values. */
export const SECRET_SETTINGS: readonly SettingPattern[] = [
  ['gateway', 'api_keys', '*'],
  ['status', 'api_keys', '*'],
  ['nodes', '*', 'adapters', '*', 'api_key'],
  ['nodes', '*', 'adapters', '*', 'env', '*'],
];

/** URLs whose user, password and query values may be secrets (`redactUrl` keeps scheme, host, port and path). */
export const URL_SETTINGS: readonly SettingPattern[] = [
  ['queue', 'redis_url'],
  ['status', 'push_url'],
  ['nodes', '*', 'adapters', '*', 'base_url'],
];

/**
 * The secrets only the gateway reads: client keys and the upstreams' credentials. The status
 * exporter never uses them, so it loads a file whose `${VAR}`s there are unset (README
 * "Kubernetes": the sidecar is given the Redis URL and the status key only).
 */
export const GATEWAY_ONLY_SECRETS: readonly SettingPattern[] = [
  ['gateway', 'api_keys', '*'],
  ['nodes', '*', 'adapters', '*', 'api_key'],
  ['nodes', '*', 'adapters', '*', 'env', '*'],
];

/** True when `path` (segments as strings or indexes) is one of `patterns`. */
export function matchesSetting(patterns: readonly SettingPattern[], path: readonly (string | number)[]): boolean {
  return patterns.some(
    (p) => p.length === path.length && p.every((segment, i) => segment === '*' || segment === String(path[i])),
  );
}
