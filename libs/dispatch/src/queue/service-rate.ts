import type { QueueClient } from './provider-queue';

/** Longest Retry-After a queue refusal sends, in s. */
export const MAX_RETRY_AFTER_S = 60;

/**
 * A pool's recent service rate, for the Retry-After of `queue_full` (docs/architecture.md, "Clients,
 * priority and fair share"): each replica keeps, per pool, an exponentially weighted mean of the time
 * its leases were held (each new lease weighs `alpha`). A pool of `slots` leases at once then serves
 * about `slots / meanMs` requests per ms, so the waiters ahead are through in `ahead · meanMs / slots`.
 */
export class ServiceRate {
  private readonly meanMs = new Map<string, number>();

  /**
   * @param defaultMs the mean lease time assumed before a pool's first lease ended, ms. @defaultValue 1000
   * @param alpha weight of each new lease in the mean, in (0, 1]. @defaultValue 0.2
   */
  constructor(
    private readonly defaultMs = 1000,
    private readonly alpha = 0.2,
  ) {}

  /** A lease of `pool` ended after `heldMs`. */
  record(pool: string, heldMs: number): void {
    const mean = this.meanMs.get(pool);
    this.meanMs.set(pool, mean === undefined ? heldMs : mean + this.alpha * (heldMs - mean));
  }

  /**
   * Seconds until `ahead` waiters of `pool` are served by `slots` leases at the recent rate, rounded up,
   * from 1 to {@link MAX_RETRY_AFTER_S}.
   */
  retryAfterS(pool: string, ahead: number, slots: number): number {
    const ms = (Math.max(1, ahead) * (this.meanMs.get(pool) ?? this.defaultMs)) / Math.max(1, slots);
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(ms / 1000)));
  }
}

/**
 * The leases that serve a refused request's line: its candidates' `max_concurrency`, or fewer when
 * its client's `max_in_flight` is lower (the `slots` of {@link ServiceRate.retryAfterS}).
 */
export function servingSlots(candidates: readonly { readonly maxConcurrency: number }[], client: QueueClient): number {
  const slots = candidates.reduce((n, p) => n + p.maxConcurrency, 0);
  return Math.min(slots, client.maxInFlight ?? slots);
}
