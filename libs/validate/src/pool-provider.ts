import { resolveProviderAdapter } from './adapter-resolution';
import type { AdapterConfig, NodeConfig, ProviderConfig, QueueSettings } from './schema';
import { DEFAULT_COMPLETION_TOKENS } from './provider-token-settings';
import { DEFAULT_MAX_QUEUED, isPoolCategory } from './schema';

/** Why a catalog provider takes no pooled requests, in the order {@link usablePoolProvider} checks. */
export type UnusableReason =
  /** `enabled: false` on the provider. */
  | 'provider_disabled'
  /** `adapter` names no adapter on the provider's node (nor a type with an enabled adapter there). */
  | 'adapter_missing'
  /** `adapter` names a disabled adapter (or a type whose adapters are all disabled). */
  | 'adapter_disabled'
  /** `adapter` is a type with two or more enabled adapters on the node. */
  | 'adapter_ambiguous'
  /** The resolved adapter's `type` is not the provider's `category`. */
  | 'adapter_type_mismatch'
  /** A `cli` provider: sound, but a direct route, never pooled. */
  | 'not_pool';

/**
 * Outcome of {@link usablePoolProvider}:
 * - `usable: true`: the provider with the adapter it dispatches through and its limits
 *   (`maxConcurrency` ≥ 1; `maxQueued` its own `max_queued`, else `queue.max_queued`; with
 *   `max_tokens_in_flight`, `maxTokensInFlight` and `defaultCompletionTokens`);
 * - `usable: false`: the first broken condition (`reason`), with the resolved adapter when there is
 *   one (it resolved, or it is disabled), for messages and the status snapshot.
 */
export type PoolProviderUse =
  | {
      usable: true;
      provider: ProviderConfig;
      adapter: AdapterConfig;
      maxConcurrency: number;
      maxQueued: number;
      maxTokensInFlight?: number;
      defaultCompletionTokens?: number;
    }
  | { usable: false; reason: UnusableReason; provider: ProviderConfig; adapter?: AdapterConfig };

/**
 * The one rule for which pool providers are usable (docs/architecture.md, "Usable pool providers"):
 * a provider takes pooled requests if and only if it is enabled, its `adapter` resolves on its own
 * node (`resolveProviderAdapter`: an enabled adapter by id, or the single enabled adapter of a type),
 * the adapter's type equals its `category`, and that category is a pool category. Route resolution,
 * the queue's provider list, the health prober and the status snapshot all ask this function;
 * `checkSemantics` reports the same conditions as file errors.
 * Reasons are checked in {@link UnusableReason} order; `not_pool` comes last, so a `cli` provider
 * that is otherwise sound reads `not_pool` with its adapter.
 * `queue` gives the default `max_queued` (the file's `queue` section); without it, the schema's default.
 * Pure; never throws.
 */
export function usablePoolProvider(
  node: Pick<NodeConfig, 'adapters'>,
  provider: ProviderConfig,
  queue: Pick<QueueSettings, 'max_queued'> = { max_queued: DEFAULT_MAX_QUEUED },
): PoolProviderUse {
  const resolved = resolveProviderAdapter(node, provider);
  const adapter = resolved.kind === 'ok' || resolved.kind === 'disabled' ? resolved.adapter : undefined;
  const unusable = (reason: UnusableReason): PoolProviderUse => ({
    usable: false,
    reason,
    provider,
    ...(adapter ? { adapter } : {}),
  });
  if (!provider.enabled) return unusable('provider_disabled');
  if (resolved.kind === 'missing') return unusable('adapter_missing');
  if (resolved.kind === 'disabled') return unusable('adapter_disabled');
  if (resolved.kind === 'ambiguous') return unusable('adapter_ambiguous');
  if (resolved.adapter.type !== provider.category) return unusable('adapter_type_mismatch');
  if (!isPoolCategory(provider.category)) return unusable('not_pool');
  return {
    usable: true,
    provider,
    adapter: resolved.adapter,
    maxConcurrency: Math.max(1, provider.max_concurrency ?? 1),
    maxQueued: provider.max_queued ?? queue.max_queued,
    ...(provider.max_tokens_in_flight === undefined
      ? {}
      : {
          maxTokensInFlight: provider.max_tokens_in_flight,
          defaultCompletionTokens: provider.default_completion_tokens ?? DEFAULT_COMPLETION_TOKENS,
        }),
  };
}
