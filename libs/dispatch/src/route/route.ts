import type { AdapterConfig } from '@iop/validate';

/** Where a direct route dispatches: one adapter on one node, never queued (docs/architecture.md, "Request path"). */
export interface DirectTarget {
  nodeId: string;
  /** The catalog provider id, or undefined for a legacy `routes[]` entry. */
  providerId?: string;
  adapter: AdapterConfig;
  /** The model name sent upstream (the public name unless renamed). */
  upstreamModel: string;
}

/** One provider of a pool that can serve a model group, with its adapter already resolved. */
export interface PoolCandidate {
  providerId: string;
  nodeId: string;
  adapter: AdapterConfig;
  upstreamModel: string;
  /** ≥ 1. */
  maxConcurrency: number;
  /** Per-provider queue bound (provider override, else `queue.max_queued`). */
  maxQueued: number;
  /** `max_tokens_in_flight` (docs/architecture.md, "Token limits"); absent: no token limit. */
  maxTokensInFlight?: number;
  /** `default_completion_tokens`, set with `maxTokensInFlight`. */
  defaultCompletionTokens?: number;
}

/**
 * A resolved route (docs/architecture.md, "Request path"). Every route carries `modelGroupKey`, the public model name,
 * whether pooled or direct; only `providerPool` routes may enter a queue.
 */
export type Route =
  | { providerPool: true; modelGroupKey: string; candidates: PoolCandidate[] }
  /** `target` undefined: the model's direct entry exists but is disabled (503 `no_available_provider`, not 404). */
  | { providerPool: false; modelGroupKey: string; target: DirectTarget | undefined };
