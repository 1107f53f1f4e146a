import type { AdapterType } from '@iop/validate';

/**
 * State of one resource (docs/architecture.md, "Status model"):
 * - `ready`: enabled, its adapter resolves to an enabled adapter of its category;
 * - `disabled`: the provider (or adapter entry) is disabled, or its adapter reference names a disabled adapter;
 * - `invalid`: the adapter reference does not resolve (missing, ambiguous, or of another type than `category`);
 * - `unhealthy`: would be ready, but the health source reports it unhealthy.
 */
export type ResourceState = 'ready' | 'disabled' | 'invalid' | 'unhealthy';

/** Where a node's resources come from: its provider catalog, or (no catalog) its adapters. */
export type ResourceSource = 'catalog' | 'adapters';

/**
 * One resource of a node, as published in `/status`. Counts that are not tracked
 * (CLI providers, adapter entries, providers the queue does not hold, no counts source) are `null`,
 * never a made-up 0.
 */
export interface ResourceStatus {
  /** The provider id (catalog) or the adapter id (adapter entries). */
  id: string;
  /** The provider's category, or the adapter's type for adapter entries. */
  category: AdapterType;
  /** The resolved adapter id; when the reference does not resolve (`invalid`), the reference as written. */
  adapter: string;
  /** Public model names: the provider's models, or for an adapter entry the legacy `routes[]` models through it. */
  models: string[];
  /** True for providers of a pool category (admission controlled); always false for adapter entries. */
  pool: boolean;
  enabled: boolean;
  state: ResourceState;
  /** Leases at once across every replica; `null` for direct (non-pool) resources. */
  max_concurrency: number | null;
  /** Leases held now; `null` when not tracked. */
  in_flight: number | null;
  /**
   * Requests waiting for a lease of this provider now; `null` when not tracked. Requests parked at
   * their client's `max_in_flight` are in no provider's count (README "Clients, priority and fair share").
   */
  queued: number | null;
  /**
   * Present only for a pool provider with a token limit (README "Token-aware provider limits"): its
   * `max_tokens_in_flight`.
   */
  max_tokens_in_flight?: number;
  /**
   * With `max_tokens_in_flight`: the tokens its leases hold now across every replica (estimated prompt
   * tokens until the first byte, plus completion allowances); `null` when the counts source does not
   * read them (the status exporter's BullMQ counts).
   */
  tokens_in_flight?: number | null;
  /**
   * The provider's health as the gateway sees it (README "Provider health"), present for pool
   * providers with a health record: `state` `healthy`, `unhealthy` (probe or failing requests),
   * `half_open` (cooldown over, the next request is its trial), `trial` (a trial request is out) or
   * `backoff` (an upstream 429's `Retry-After`), why, since when and until when (ISO 8601).
   */
  health?: ResourceHealthDetail;
}

/** See {@link ResourceStatus.health}. */
export interface ResourceHealthDetail {
  state: 'healthy' | 'unhealthy' | 'half_open' | 'trial' | 'backoff';
  reason: string | null;
  since: string | null;
  retry_at: string | null;
}

/** One node and its resources, in config order. */
export interface NodeStatus {
  node_id: string;
  source: ResourceSource;
  resources: ResourceStatus[];
}

/** The resource-first status document (docs/architecture.md, "Status model"), served by `GET /status` and pushed by the exporter. */
export interface StatusSnapshot {
  /** ISO 8601 time the snapshot was built. */
  generated_at: string;
  /** sha256 (hex) of the config file the snapshot was built from; present when the caller knows it. */
  config_hash?: string;
  /** ISO 8601 time that config was loaded; present when the caller knows it. */
  config_loaded_at?: string;
  nodes: NodeStatus[];
  /**
   * Per pool (docs/architecture.md, "Clients, priority and fair share"): its providers, their summed
   * counts and each client's counts there. Present where the caller reads client counts (the gateway).
   */
  pools?: PoolStatus[];
  /** Every configured client: band, weight, caps and its counts summed over the pools. Present with `pools`. */
  clients?: ClientStatus[];
}

/**
 * One client's counts in one pool; `band` is the client's own (a request may lower its own with
 * `x-iop-priority`). `queued` is every waiting request of the client in the pool: those waiting for a
 * provider's slot and those parked at its `max_in_flight`.
 */
export interface PoolClientStatus {
  client: string;
  band: number;
  in_flight: number;
  queued: number;
}

/** One pool: providers linked by shared models, the unit of fair share and client caps. */
export interface PoolStatus {
  /** `pool.<smallest provider id>`. */
  pool: string;
  providers: string[];
  /** Leases held on its providers; `null` when the counts are not known. */
  in_flight: number | null;
  /**
   * Requests waiting for one of its providers' slots (the sum of their `queued`: what more capacity
   * would serve sooner); `null` when not known. Requests held back by their client's `max_in_flight`
   * are not in it (README "Clients, priority and fair share").
   */
  queued: number | null;
  /**
   * Requests of its clients held back at their `max_in_flight` (parked: no provider slot would serve
   * them sooner): the clients' `queued` in the pool minus the pool's `queued`, never below 0; `null`
   * when either is not known.
   */
  parked: number | null;
  /** Clients holding or waiting for a lease in the pool now, in config order. */
  clients: PoolClientStatus[];
}

/** A configured client (`gateway.clients`, a flat `api_keys` entry, or `anonymous`); counts are `null` when not known. */
export interface ClientStatus {
  id: string;
  band: number;
  weight: number;
  max_in_flight: number | null;
  max_queued: number | null;
  in_flight: number | null;
  queued: number | null;
  /**
   * Present only for a client with a token budget (`tokens_per_minute`, `tokens_per_day`; README
   * "Token budgets"): each window it sets, minute first, fleet-wide on Redis; `null` while the
   * windows cannot be read (the queue or Redis does not answer). A client without a budget shows no
   * such field.
   */
  token_budgets?: ClientTokenBudgetStatus[] | null;
}

/**
 * One window of a client's token budget (`ProviderQueue.clientBudgets`; docs/architecture.md, "Token
 * budgets"), in tokens: `limit` the budget, `reserved` held by requests waiting or in flight,
 * `used` charged by finished ones, `remaining` = max(0, limit − reserved − used) what a request can
 * still reserve; `reset_ms` the ms until the window holds nothing of what is charged now (0 when it
 * holds nothing).
 */
export interface ClientTokenBudgetStatus {
  window: 'minute' | 'day';
  limit: number;
  reserved: number;
  used: number;
  remaining: number;
  reset_ms: number;
}
