import { DEFAULT_SHARD_TAG } from '../queue/lease-keys';
import type { StoredProvider } from '../queue/lease-store';
import {
  anyTokenBudget,
  configuredClients,
  isPoolCategory,
  modelNames,
  providerPools,
  resolveProviderAdapter,
  usablePoolProvider,
  type EdgeConfig,
  type NodeConfig,
  type ProviderConfig,
} from '@iop/validate';
import type { QueueClient, QueueProvider } from '../queue/provider-queue';
import type { DirectTarget, PoolCandidate, Route } from './route';

/**
 * Resolves a request's `model` (docs/architecture.md, "Request path"):
 * 1. pool: pool-category providers listing the model → `{providerPool: true, candidates}` (the
 *    usable ones, by `usablePoolProvider`);
 * 2. direct: a `cli` provider listing it, else a `routes[]` entry naming it → `{providerPool: false, target}`;
 * 3. else `undefined` (the caller answers 404 `model_not_found`).
 * A model some config entry serves never resolves to `undefined`: a pool whose providers are all
 * disabled (a hot reload), or whose candidates all fail run-time adapter resolution, resolves as a
 * pool with no candidates, and a disabled direct entry as `target: undefined`, so the caller
 * answers 503 `no_available_provider` rather than a misleading 404 (README "Errors").
 * Providers in `opts.exclude` (unhealthy ones, or one that just failed) are left out of candidates.
 * Pure; never throws.
 */
export function resolveRoute(
  config: EdgeConfig,
  model: string,
  opts: { exclude?: ReadonlySet<string> } = {},
): Route | undefined {
  let poolListed = false;
  const candidates: PoolCandidate[] = [];
  for (const { node, provider, entry } of providersListing(config, model)) {
    if (!isPoolCategory(provider.category)) continue;
    poolListed = true;
    if (opts.exclude?.has(provider.id)) continue;
    // Run-time re-check: a disabled provider or a missing, disabled, ambiguous or mistyped adapter is excluded, never dispatched.
    const use = usablePoolProvider(node, provider, config.queue);
    if (!use.usable) continue;
    candidates.push({
      ...queueLimits(provider.id, use),
      nodeId: node.id,
      adapter: use.adapter,
      upstreamModel: entry.upstream,
    });
  }
  if (poolListed) return { providerPool: true, modelGroupKey: model, candidates };
  const direct = resolveDirectTarget(config, model);
  return direct.listed ? { providerPool: false, modelGroupKey: model, target: direct.target } : undefined;
}

/** The direct target of `model`; `listed` when a cli provider or route names it, even a disabled one. */
function resolveDirectTarget(config: EdgeConfig, model: string): { listed: boolean; target?: DirectTarget } {
  let listed = false;
  for (const { node, provider, entry } of providersListing(config, model)) {
    if (provider.category !== 'cli') continue;
    listed = true;
    if (!provider.enabled) continue;
    const resolved = resolveProviderAdapter(node, provider);
    if (resolved.kind === 'ok' && resolved.adapter.type === 'cli') {
      return {
        listed,
        target: { nodeId: node.id, providerId: provider.id, adapter: resolved.adapter, upstreamModel: entry.upstream },
      };
    }
  }
  for (const route of config.routes) {
    if (route.model !== model) continue;
    listed = true;
    const adapter = config.nodes.find((n) => n.id === route.node)?.adapters.find((a) => a.id === route.adapter);
    if (adapter?.enabled)
      return { listed, target: { nodeId: route.node, adapter, upstreamModel: route.upstream ?? model } };
  }
  return { listed };
}

/** Every catalog provider that lists `model`, of any category, with its node and model entry, in file order. */
function* providersListing(
  config: EdgeConfig,
  model: string,
): Generator<{ node: NodeConfig; provider: ProviderConfig; entry: { name: string; upstream: string } }> {
  for (const node of config.nodes) {
    for (const provider of node.providers) {
      const entry = provider.models.map(modelNames).find((m) => m.name === model);
      if (entry) yield { node, provider, entry };
    }
  }
}

/** A usable pool provider as the queue takes it: its id and limits (`usablePoolProvider`). */
function queueLimits(
  providerId: string,
  use: { maxConcurrency: number; maxQueued: number; maxTokensInFlight?: number; defaultCompletionTokens?: number },
): Pick<
  QueueProvider,
  'providerId' | 'maxConcurrency' | 'maxQueued' | 'maxTokensInFlight' | 'defaultCompletionTokens'
> {
  const { maxConcurrency, maxQueued, maxTokensInFlight, defaultCompletionTokens } = use;
  return {
    providerId,
    maxConcurrency,
    maxQueued,
    ...(maxTokensInFlight === undefined ? {} : { maxTokensInFlight, defaultCompletionTokens }),
  };
}

/**
 * Lists every public model name the config serves (pool, cli providers and legacy routes),
 * each once, in file order — the `GET /v1/models` list. A model whose providers are all disabled
 * stays listed: it is served by the config, only unavailable for now (503, not 404).
 */
export function listModels(config: EdgeConfig): string[] {
  const names = new Set<string>();
  for (const node of config.nodes) {
    for (const provider of node.providers) {
      for (const m of provider.models) names.add(modelNames(m).name);
    }
  }
  for (const route of config.routes) names.add(route.model);
  return [...names];
}

/**
 * The configured clients' terms in force (`gateway.clients[]`, flat `api_keys`: `configuredClients`)
 * for `ProviderQueue.configure`, so that a reload that changes a cap applies to requests already
 * waiting or running (docs/architecture.md, "Clients, priority and fair share"). Pure.
 */
export function queueClients(config: EdgeConfig): QueueClient[] {
  return configuredClients(config.gateway).map(({ client }) => ({
    id: client.id,
    band: client.priority,
    weight: client.weight,
    ...(client.maxInFlight !== undefined ? { maxInFlight: client.maxInFlight } : {}),
    ...(client.maxQueued !== undefined ? { maxQueued: client.maxQueued } : {}),
  }));
}

/**
 * Every usable pool provider (`usablePoolProvider`), with its limits, for
 * `ProviderQueue.configure` (docs/architecture.md, "Usable pool providers"). A provider whose
 * adapter is missing, disabled, ambiguous or of another type is left out, so it takes no requests.
 */
export function queueProviders(config: EdgeConfig): QueueProvider[] {
  const pools = providerPools(config);
  const tags = poolShardTags(config);
  const out: QueueProvider[] = [];
  for (const node of config.nodes) {
    for (const provider of node.providers) {
      const use = usablePoolProvider(node, provider, config.queue);
      if (!use.usable) continue;
      out.push({
        ...queueLimits(provider.id, use),
        pool: pools.get(provider.id),
        // On a cluster the pool is also the hash tag, unless a client has a token budget: then every
        // pool shares one tag (docs/architecture.md, "Redis and Redis Cluster", "Token budgets").
        ...(config.queue.cluster ? { shardTag: tags.get(provider.id) } : {}),
      });
    }
  }
  return out;
}

/**
 * Where the Redis backend keeps the counts of `providerIds`: each id with the shard tag that
 * `queueProviders` gives it (an unknown id gets the default tag and reads 0/0). For readers that
 * hold no queue, such as the status exporter (docs/architecture.md, "Key layout").
 */
export function leaseAddresses(config: EdgeConfig, providerIds: readonly string[]): StoredProvider[] {
  const tags = new Map(queueProviders(config).map((p) => [p.providerId, p.shardTag ?? DEFAULT_SHARD_TAG]));
  return providerIds.map((providerId) => ({ providerId, shardTag: tags.get(providerId) ?? DEFAULT_SHARD_TAG }));
}

/**
 * Redis Cluster hash tags of the pool providers (docs/architecture.md, "Redis and Redis Cluster"):
 * providers that serve a common model, directly or through a chain of siblings, can be candidates
 * of one request, so they share a tag (one slot, one atomic admission); unrelated pools get their own
 * tags and spread over the shards. A tag is the provider's pool (`providerPools`, `@iop/validate`):
 * `pool.<smallest provider id of the group>` (URI-encoded). When any client has a token budget
 * (`tokens_per_minute`, `tokens_per_day`), every provider gets the one tag `pools`
 * (`DEFAULT_SHARD_TAG`): a client's budget spans pools and one atomic script must see it beside the
 * leases it admits (docs/architecture.md, "Token budgets": budgets trade the Cluster's spread for
 * exactness). Pure; every enabled pool provider of the file gets an entry.
 */
export function poolShardTags(config: EdgeConfig): Map<string, string> {
  const pools = providerPools(config);
  if (!anyTokenBudget(config.gateway)) return pools;
  return new Map([...pools.keys()].map((id) => [id, DEFAULT_SHARD_TAG]));
}
