import { HealthCache } from './health-cache';
import type { HealthEvent } from './health-record';
import type { HealthStore, ProbeDetail } from './health-store';
import type { HealthView } from './health-view';

/**
 * What every `HealthStore` shares: the writes become `HealthEvent`s for the store's `apply`
 * (in-process, or compare-and-set in Redis) and the reads come from its `HealthCache`, so the
 * request path never waits on I/O.
 */
export abstract class CachedHealthStore implements HealthStore {
  protected readonly cache = new HealthCache();
  /** This replica's latest request success per provider (epoch ms, `now()`), reported with each probe. */
  private readonly lastOk = new Map<string, number>();

  /** Applies one event to a provider's record and updates the cache; never throws. @returns whether this call wrote a change. */
  protected abstract apply(providerId: string, event: HealthEvent): Promise<boolean>;

  abstract refresh(providerIds: readonly string[]): Promise<void>;

  now(): number {
    return Date.now();
  }

  async record(providerId: string, ok: boolean, reason?: string, detail?: ProbeDetail): Promise<void> {
    const okAt = this.lastOk.get(providerId);
    await this.apply(providerId, { kind: 'probe', ok, reason, ...detail, ...(okAt !== undefined ? { okAt } : {}) });
  }

  async recordRequest(providerId: string, ok: boolean, reason?: string): Promise<void> {
    if (ok) this.lastOk.set(providerId, this.now());
    await this.apply(providerId, { kind: 'request', ok, reason });
  }

  async backOff(providerId: string, seconds: number, reason: string): Promise<void> {
    await this.apply(providerId, { kind: 'backoff', seconds, reason });
  }

  async claimTrial(providerId: string, holdMs: number, claim?: string): Promise<boolean> {
    if (!this.cache.trialsDue(this.now()).has(providerId)) return false;
    return this.apply(providerId, { kind: 'trial', holdMs, claim });
  }

  async releaseTrial(providerId: string, claim: string): Promise<void> {
    await this.apply(providerId, { kind: 'trial_release', claim });
  }

  unhealthy(): ReadonlySet<string> {
    return this.cache.unhealthy(this.now());
  }

  trialsDue(): ReadonlySet<string> {
    return this.cache.trialsDue(this.now());
  }

  views(): ReadonlyMap<string, HealthView> {
    return this.cache.views(this.now());
  }
}
