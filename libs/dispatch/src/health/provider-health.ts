import type { HealthSettings } from '@iop/validate';

/** `healthy` until `unhealthy_after` consecutive failures; `unhealthy` until `healthy_after` consecutive successes. */
export type HealthState = 'healthy' | 'unhealthy';

/** One provider's health record: its state and the current run of failures or successes. */
export interface ProviderHealth {
  state: HealthState;
  /** Consecutive failures (reset by a success). */
  failures: number;
  /** Consecutive successes (reset by a failure). */
  successes: number;
}

export const INITIAL_HEALTH: ProviderHealth = { state: 'healthy', failures: 0, successes: 0 };

/**
 * The health transition of one observation (issue 5 "provider health"): a failure run of
 * `unhealthy_after` turns a provider unhealthy, a success run of `healthy_after` turns it healthy.
 * Active probes and passive checks (connection errors and 5xx on real traffic) both feed it. Pure.
 */
export function nextHealth(prev: ProviderHealth, ok: boolean, settings: Pick<HealthSettings, 'unhealthy_after' | 'healthy_after'>): ProviderHealth {
  if (ok) {
    const successes = prev.successes + 1;
    const state = prev.state === 'unhealthy' && successes >= settings.healthy_after ? 'healthy' : prev.state;
    return { state, failures: 0, successes };
  }
  const failures = prev.failures + 1;
  const state = prev.state === 'healthy' && failures >= settings.unhealthy_after ? 'unhealthy' : prev.state;
  return { state, failures, successes: 0 };
}

/**
 * Where providers' health lives: in-process (`MemoryHealthStore`) or shared by every replica through
 * Redis (`RedisHealthStore`), so replicas agree. `unhealthy()` is synchronous and cached so the
 * request path never waits on I/O; `refresh()` reloads the cache.
 * Stores hold no connection or timer of their own (the Redis store borrows one), so there is nothing to close.
 */
export interface HealthStore {
  /** Records one observation of a provider. Never throws (a store outage is logged, not raised). */
  record(providerId: string, ok: boolean): Promise<void>;
  /** Ids of the providers currently unhealthy (cached). */
  unhealthy(): ReadonlySet<string>;
  /** Reloads the cache from the store. Never throws. */
  refresh(providerIds: readonly string[]): Promise<void>;
}
