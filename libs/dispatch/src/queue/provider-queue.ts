import { ANONYMOUS_CLIENT } from '@iop/validate';
import type { TokenWeight } from './token-limit';
import type { BudgetStanding, ClientBudgetWindow, TokenBudgets, UsedTokens } from './token-budget';

/**
 * One provider of a pool as the queue sees it: its id and its limits (docs/architecture.md, "Usable pool providers").
 * `maxConcurrency` ≥ 1 leases at once across every replica; `maxQueued` ≥ 0 waiting requests.
 */
export interface QueueProvider {
  readonly providerId: string;
  readonly maxConcurrency: number;
  readonly maxQueued: number;
  /**
   * Redis Cluster hash tag of the provider's keys (Redis backend only). Providers that can be
   * candidates of one request must share it; `providerShardTags` computes it from the config.
   * @defaultValue one tag for every provider
   */
  readonly shardTag?: string;
  /**
   * The provider's pool (`providerPools`, `@iop/validate`): fair-share tags and client caps and counts
   * are kept per pool (docs/architecture.md, "Clients, priority and fair share"). Providers that can be
   * candidates of one request share it. @defaultValue `DEFAULT_POOL`, one pool for every provider
   */
  readonly pool?: string;
  /**
   * Tokens the provider may hold in flight at once across every replica (`max_tokens_in_flight`;
   * docs/architecture.md, "Token limits"): a request is admitted only while its weight fits beside
   * the tokens held, or alone when the provider holds none. Absent: no token limit (admission as
   * without it, at no extra Redis command).
   */
  readonly maxTokensInFlight?: number;
  /** Completion allowance of a request that names none (`default_completion_tokens`), tokens. @defaultValue 1024 */
  readonly defaultCompletionTokens?: number;
}

/** The pool of a provider configured without one. */
export const DEFAULT_POOL = 'pool';

/**
 * Who a request is for, as the queue decides on it (docs/architecture.md, "Clients, priority and
 * fair share"): never a key.
 */
export interface QueueClient {
  /** The client id (`gateway.clients[].id`, `api_keys[<n>]` or `anonymous`). */
  readonly id: string;
  /** The request's band, -1000..1000: higher first; negative is sheddable. */
  readonly band: number;
  /** Its share inside the band while backlogged, 1..100. */
  readonly weight: number;
  /** Leases the client may hold at once in the pool (fleet-wide); absent = no cap. Over it the request waits. */
  readonly maxInFlight?: number;
  /** Requests the client may have waiting in the pool (fleet-wide); absent = no cap. Over it `queue_full`. */
  readonly maxQueued?: number;
  /**
   * True when this is the fleet's only client (flow control off: no `gateway.clients` and at most one
   * flat key; README "Clients, priority and fair share"): with no other client and no cap, its counts
   * decide nothing, so the Redis backend does not keep them (`/status` shows the pool's counts as the
   * client's) and its place in line is its own arrival order (one client's fair-share tags are just
   * that). Ignored when a cap is set. The memory backend decides the same without it.
   */
  readonly solo?: boolean;
  /**
   * The client's token budgets (docs/architecture.md, "Token budgets"): admission reserves the
   * request's weight (`LeaseRequest.tokens`: prompt + completion, an absent completion counted as the
   * largest `defaultCompletionTokens` of the candidates, else `DEFAULT_COMPLETION_TOKENS`, times the
   * weight's `choices`; `budgetWeight`) in each window when it arrives, granted or queued, or refuses with
   * `rate_limit_exceeded` (429, `retryAfterS` ⌈s⌉ until the window can hold it; none when the weight
   * is over a whole window's budget: it never can). Absent: no budget work at all.
   */
  readonly tokenBudgets?: TokenBudgets;
}

/** The client of a request that names none: the anonymous client (band 0, weight 1, no caps). */
export const DEFAULT_QUEUE_CLIENT: QueueClient = {
  id: ANONYMOUS_CLIENT.id,
  band: ANONYMOUS_CLIENT.priority,
  weight: ANONYMOUS_CLIENT.weight,
};

/** A request for one lease on one of `candidates`, all serving the same model group. */
export interface LeaseRequest {
  /** The public model name; never empty (docs/architecture.md, "Request path", step 2). */
  readonly modelGroupKey: string;
  /** Usable providers of the pool, adapters already resolved; at least one. */
  readonly candidates: readonly QueueProvider[];
  /** Aborts the wait: the request leaves the queue and `acquireLease` rejects with `client_aborted`. */
  readonly signal?: AbortSignal;
  /** Longest wait for a grant, in ms (`queue.max_wait_ms`). */
  readonly maxWaitMs: number;
  /** Who the request is for: its band, weight and caps. @defaultValue {@link DEFAULT_QUEUE_CLIENT} */
  readonly client?: QueueClient;
  /**
   * The request's token weight (docs/architecture.md, "Token limits"): reserved on a provider with
   * `maxTokensInFlight` at the grant, its prompt part given back by `Lease.prefillDone`, the rest at
   * release; an absent completion holds the granting provider's `defaultCompletionTokens` times the
   * weight's `choices` (`heldTokens`). Ignored by providers without a token limit. Absent: the request
   * weighs nothing.
   */
  readonly tokens?: TokenWeight;
}

/**
 * One unit of a provider's concurrency, held from grant to release (docs/architecture.md, "Vocabulary").
 * `release()` is idempotent and never throws; call it on every path (success, upstream error,
 * timeout, client disconnect) (docs/architecture.md, "Request path", step 5).
 */
export interface Lease {
  readonly providerId: string;
  /** Time from `acquireLease` to the grant, in ms. */
  readonly queueWaitMs: number;
  /**
   * Aborts when the lease can no longer be proven (Redis backend fencing, docs/architecture.md
   * "Fencing"): the holder must stop its upstream call at once. Never aborts on the memory backend.
   */
  readonly signal: AbortSignal;
  /**
   * Prefill is done (the answer's first byte arrived): the prompt part of the request's token weight
   * is given back to the provider's token limit and may admit a waiter (docs/architecture.md, "Token
   * limits"). Idempotent, never throws, a no-op after `release` or where no tokens are held.
   */
  prefillDone(): Promise<void>;
  /**
   * The client's tightest budget window right after this request's reservation (headers
   * `x-ratelimit-*-tokens`): lowest remaining, on a tie the later reset; for a request that waited,
   * the standing at its arrival. Absent when the client has no token budget.
   */
  readonly budget?: BudgetStanding;
  /**
   * Ends the lease. `used`: the tokens the call used, charged to the client's budget in place of
   * the reservation (over- or under-estimates are settled here, in the buckets of the request's
   * admission that still count); absent, the reservation is charged as it stands. Ignored when the
   * client has no budget, and after the lease ended (released, or fenced: a fenced lease was charged
   * its reservation as it stood) (docs/architecture.md, "Token budgets").
   */
  release(used?: UsedTokens): Promise<void>;
}

/** Live counts of one client in one pool (docs/architecture.md, "Clients, priority and fair share"). */
export interface ClientCounts {
  readonly pool: string;
  readonly clientId: string;
  /** Leases the client holds in the pool. */
  readonly inFlight: number;
  /** Requests of the client waiting in the pool, parked ones included. */
  readonly queued: number;
}

/**
 * Live counts of one provider: `inFlight` leases held, `queued` requests waiting; `tokensInFlight`
 * the tokens its leases hold, only for a provider with `maxTokensInFlight`.
 */
export interface ProviderCounts {
  inFlight: number;
  queued: number;
  tokensInFlight?: number;
}

/**
 * Providers' and clients' counts read at one instant (`ProviderQueue.snapshotCounts`;
 * docs/architecture.md, "Status model"), so that in each pool the clients' `queued` (parked waiters
 * included) minus the providers' `queued` is the pool's parked waiters, and the clients' `inFlight`
 * sums to the providers' (README "Clients, priority and fair share").
 */
export interface QueueCounts {
  /** By provider id, as `ProviderQueue.counts` answers. */
  readonly providers: Map<string, ProviderCounts>;
  /** Every client's counts per pool, as `ProviderQueue.clientCounts` answers. */
  readonly clients: ClientCounts[];
}

/**
 * Admission control for provider pools (docs/architecture.md, "Admission"). Two backends pass one contract suite
 * (`provider-queue.contract.ts`): `memory` (one process) and `redis` (exact across replicas).
 * Only provider-pool requests reach it; direct routes never call it (`entersQueue`).
 */
export interface ProviderQueue {
  /** The `queue.backend` this queue implements (README "Configuration"). */
  readonly backend: 'memory' | 'redis';
  /**
   * Declares the full set of pool providers and their limits; called at start and on every config
   * change. A raised limit takes effect at once; a provider left out takes no new requests, and its
   * waiting requests move to a sibling candidate or fail with `no_available_provider`.
   * `clients`: every configured client (`gateway.clients[]` and the flat keys' clients); its
   * `maxInFlight` (leases per pool, absent = no cap) becomes the cap in force for its requests already
   * waiting or holding a lease, on every replica, in place of the cap each request arrived with
   * (README "Config refresh"; docs/architecture.md, "Clients, priority and fair share"): a raised or
   * removed cap grants its parked requests the room at once, as far as free slots allow; a lowered
   * cap ends no lease and only holds new grants until the client's leases fall under it. A client left
   * out keeps the cap its requests name. Absent: the caps in force stay as the last call set them.
   */
  configure(providers: readonly QueueProvider[], clients?: readonly QueueClient[]): Promise<void>;
  /**
   * Waits for a lease on the least-loaded candidate — lowest `(inFlight + queued) / maxConcurrency`
   * — while staying work-conserving: a waiting request takes any candidate's free slot.
   * @throws AdmissionError `queue_full`, `queue_timeout`, `queue_unavailable`, `no_available_provider`, `client_aborted`.
   */
  acquireLease(request: LeaseRequest): Promise<Lease>;
  /** Counts for the given providers (every configured one when omitted). Exact across replicas for redis. */
  counts(providerIds?: readonly string[]): Promise<Map<string, ProviderCounts>>;
  /**
   * Every client's counts per pool (exact across replicas for redis); a client with nothing held or
   * waiting may be left out.
   */
  clientCounts(): Promise<ClientCounts[]>;
  /**
   * `counts(providerIds)` and `clientCounts()` read together, for `/status` and metrics: the memory
   * backend reads both in one synchronous step; the Redis backend in one read-only script per shard
   * tag (`scripts/counts.lua`), so the numbers of one tag (one pool on a Redis Cluster, every pool on
   * a single Redis) are of one instant; different tags are read by separate calls, not of one instant
   * with each other (a Cluster runs a script on one slot only). Exact across replicas for redis.
   */
  snapshotCounts(providerIds?: readonly string[]): Promise<QueueCounts>;
  /**
   * Every budget window of every client with a token budget among `clients` (exact across replicas
   * for redis), for `/status` and metrics (docs/architecture.md, "Token budgets").
   */
  clientBudgets(clients: readonly QueueClient[]): Promise<ClientBudgetWindow[]>;
  /** True when the backend can admit now (Redis reachable for redis); feeds `/readyz`. */
  isReady(): Promise<boolean>;
  /** Stops admitting, fails this process's waiting requests, releases nothing it does not own, closes connections and timers. */
  close(): Promise<void>;
}

/**
 * The provider a new request should queue on (docs/architecture.md, "Admission"): the lowest
 * `(inFlight + queued) / maxConcurrency`; ties go to the first candidate in config order.
 * Pure. Returns undefined for an empty candidate list.
 */
export function chooseProvider(
  candidates: readonly QueueProvider[],
  counts: ReadonlyMap<string, ProviderCounts>,
): QueueProvider | undefined {
  let best: QueueProvider | undefined;
  let bestLoad = Infinity;
  for (const candidate of candidates) {
    const c = counts.get(candidate.providerId) ?? { inFlight: 0, queued: 0 };
    const load = (c.inFlight + c.queued) / candidate.maxConcurrency;
    if (load < bestLoad) {
      best = candidate;
      bestLoad = load;
    }
  }
  return best;
}
