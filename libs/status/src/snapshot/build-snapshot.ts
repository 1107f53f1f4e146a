import { queueProviders, type ProviderCounts } from '@iop/dispatch';
import {
  isPoolCategory,
  modelNames,
  usablePoolProvider,
  type AdapterConfig,
  type EdgeConfig,
  type NodeConfig,
  type ProviderConfig,
} from '@iop/validate';
import type { ResourceHealthDetail, ResourceState, ResourceStatus, StatusSnapshot } from './snapshot';

/** Health of one resource as reported by a health source (active probes, the `health` settings). */
export type ResourceHealth = 'healthy' | 'unhealthy';

/** Optional inputs of {@link buildSnapshot}. */
export interface SnapshotOptions {
  /**
   * Health by resource key: the provider id for catalog entries, `<node id>/<adapter id>` for adapter
   * entries (adapter ids are only unique within a node). Absent keys count as healthy.
   */
  health?: ReadonlyMap<string, ResourceHealth>;
  /**
   * Health records by provider id (`HealthStore.views()`), copied to each pool provider's `health`;
   * a provider whose record is not `healthy` shows `state: "unhealthy"` (it takes no regular traffic).
   */
  healthDetails?: ReadonlyMap<
    string,
    { state: ResourceHealthDetail['state']; reason: string | null; since: number | null; retryAt: number | null }
  >;
  /** The time written to `generated_at`. @defaultValue now */
  now?: Date;
  /** sha256 of the config file, copied to `config_hash`. */
  configHash?: string;
  /** When the config was loaded, copied to `config_loaded_at`. */
  configLoadedAt?: Date;
}

/**
 * The health key of an adapter entry in {@link SnapshotOptions.health}: `<node id>/<adapter id>`.
 */
export function adapterHealthKey(nodeId: string, adapterId: string): string {
  return `${nodeId}/${adapterId}`;
}

/**
 * Builds the resource-first snapshot (docs/architecture.md, "Status model") from a validated config and a counts source.
 * - A node with providers yields one resource per provider and nothing else (`source: "catalog"`);
 *   counts are joined by provider id, so two providers never share or mix counts.
 * - A node without providers yields one resource per adapter (`source: "adapters"`, `pool: false`),
 *   listing the legacy `routes[]` models that go through it.
 * - `state`: `disabled` (provider disabled, or its adapter reference names a disabled adapter) wins
 *   over `invalid` (missing, ambiguous or mistyped adapter), both by `usablePoolProvider`, which wins
 *   over `unhealthy` (from `opts.health`); otherwise `ready`.
 * - `in_flight`/`queued` come from `counts` for pool providers the map holds; everything else —
 *   CLI providers, adapter entries, providers the queue does not track, or `counts` undefined (no
 *   counts source, or it failed) — is `null`, never a made-up 0. `max_concurrency` is `null` for
 *   non-pool resources.
 * Pure: no I/O, no clock unless `opts.now` is omitted; never throws.
 */
export function buildSnapshot(
  config: Pick<EdgeConfig, 'nodes' | 'routes'>,
  counts: ReadonlyMap<string, ProviderCounts> | undefined,
  opts: SnapshotOptions = {},
): StatusSnapshot {
  const snapshot: StatusSnapshot = { generated_at: (opts.now ?? new Date()).toISOString(), nodes: [] };
  if (opts.configHash !== undefined) snapshot.config_hash = opts.configHash;
  if (opts.configLoadedAt !== undefined) snapshot.config_loaded_at = opts.configLoadedAt.toISOString();
  for (const node of config.nodes) {
    snapshot.nodes.push(
      node.providers.length > 0
        ? {
            node_id: node.id,
            source: 'catalog',
            resources: node.providers.map((p) => catalogEntry(node, p, counts, opts.health, opts.healthDetails)),
          }
        : {
            node_id: node.id,
            source: 'adapters',
            resources: node.adapters.map((a) => adapterEntry(config, node, a, opts.health)),
          },
    );
  }
  return snapshot;
}

function catalogEntry(
  node: NodeConfig,
  provider: ProviderConfig,
  counts: ReadonlyMap<string, ProviderCounts> | undefined,
  health: ReadonlyMap<string, ResourceHealth> | undefined,
  details?: SnapshotOptions['healthDetails'],
): ResourceStatus {
  // The pool rule, read for every catalog provider: a sound cli provider reads `not_pool`.
  const use = usablePoolProvider(node, provider);
  const reason = use.usable ? undefined : use.reason;
  const pool = isPoolCategory(provider.category);
  const detail = pool ? details?.get(provider.id) : undefined;
  let state: ResourceState;
  if (reason === 'provider_disabled' || reason === 'adapter_disabled') state = 'disabled';
  else if (reason !== undefined && reason !== 'not_pool') state = 'invalid';
  else
    state =
      health?.get(provider.id) === 'unhealthy' || (detail !== undefined && detail.state !== 'healthy')
        ? 'unhealthy'
        : 'ready';
  const tracked = pool ? counts?.get(provider.id) : undefined;
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    id: provider.id,
    category: provider.category,
    adapter: use.adapter?.id ?? provider.adapter,
    models: provider.models.map((m) => modelNames(m).name),
    pool,
    enabled: provider.enabled,
    state,
    max_concurrency: pool && provider.max_concurrency !== undefined ? provider.max_concurrency : null,
    in_flight: tracked ? tracked.inFlight : null,
    queued: tracked ? tracked.queued : null,
    ...(pool && provider.max_tokens_in_flight !== undefined
      ? { max_tokens_in_flight: provider.max_tokens_in_flight, tokens_in_flight: tracked?.tokensInFlight ?? null }
      : {}),
    ...(detail
      ? {
          health: {
            state: detail.state,
            reason: detail.reason,
            since: iso(detail.since),
            retry_at: iso(detail.retryAt),
          },
        }
      : {}),
  };
}

function adapterEntry(
  config: Pick<EdgeConfig, 'routes'>,
  node: NodeConfig,
  adapter: AdapterConfig,
  health: ReadonlyMap<string, ResourceHealth> | undefined,
): ResourceStatus {
  const models = [
    ...new Set(config.routes.filter((r) => r.node === node.id && r.adapter === adapter.id).map((r) => r.model)),
  ];
  const unhealthy = health?.get(adapterHealthKey(node.id, adapter.id)) === 'unhealthy';
  return {
    id: adapter.id,
    category: adapter.type,
    adapter: adapter.id,
    models,
    pool: false,
    enabled: adapter.enabled,
    state: !adapter.enabled ? 'disabled' : unhealthy ? 'unhealthy' : 'ready',
    max_concurrency: null,
    in_flight: null,
    queued: null,
  };
}

/**
 * Ids of the providers whose counts a snapshot shows: the pool providers a `ProviderQueue` is
 * configured with (`queueProviders`: the usable ones, by `usablePoolProvider`). Ask the counts source for exactly these.
 */
export function trackedProviderIds(config: EdgeConfig): string[] {
  return queueProviders(config).map((p) => p.providerId);
}
