import type { ProviderHealth } from './health-record';
import { healthView, type HealthView } from './health-view';

/**
 * The cached reads every store shares, computed from records at the current time and recomputed
 * only when a record changes or a cooldown or back-off ends (the request path calls `unhealthy()`
 * once per request).
 */
export class HealthCache {
  private records = new Map<string, ProviderHealth>();
  private computedAt = -1;
  private validUntil = -1;
  private out: Set<string> = new Set();
  private due: Set<string> = new Set();

  get(providerId: string): ProviderHealth | undefined {
    return this.records.get(providerId);
  }

  set(providerId: string, record: ProviderHealth | undefined): void {
    if (record === undefined) this.records.delete(providerId);
    else this.records.set(providerId, record);
    this.validUntil = -1;
  }

  replace(records: Map<string, ProviderHealth>): void {
    this.records = records;
    this.validUntil = -1;
  }

  ids(): IterableIterator<string> {
    return this.records.keys();
  }

  unhealthy(now = Date.now()): ReadonlySet<string> {
    this.compute(now);
    return this.out;
  }

  trialsDue(now = Date.now()): ReadonlySet<string> {
    this.compute(now);
    return this.due;
  }

  views(now = Date.now()): ReadonlyMap<string, HealthView> {
    return new Map([...this.records].map(([id, record]) => [id, healthView(record, now)]));
  }

  private compute(now: number): void {
    if (this.validUntil !== -1 && now < this.validUntil && this.computedAt <= now) return;
    const out = new Set<string>();
    const due = new Set<string>();
    let validUntil = Number.POSITIVE_INFINITY;
    for (const [id, record] of this.records) {
      const view = healthView(record, now);
      if (view.state !== 'healthy') out.add(id);
      if (view.state === 'half_open') due.add(id);
      for (const t of [record.retryAt, record.trialUntil, record.backoffUntil])
        if (t !== undefined && t > now) validUntil = Math.min(validUntil, t);
    }
    this.out = out;
    this.due = due;
    this.computedAt = now;
    this.validUntil = validUntil;
  }
}
