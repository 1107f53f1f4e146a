import type { HealthSettings } from '@iop/validate';
import { INITIAL_HEALTH, nextHealth, type HealthStore, type ProviderHealth } from './provider-health';

/** Health of one process's providers, for the memory backend (one gateway). */
export class MemoryHealthStore implements HealthStore {
  private readonly records = new Map<string, ProviderHealth>();
  private readonly down = new Set<string>();

  constructor(private readonly settings: () => Pick<HealthSettings, 'unhealthy_after' | 'healthy_after'>) {}

  async record(providerId: string, ok: boolean): Promise<void> {
    const next = nextHealth(this.records.get(providerId) ?? INITIAL_HEALTH, ok, this.settings());
    this.records.set(providerId, next);
    if (next.state === 'unhealthy') this.down.add(providerId);
    else this.down.delete(providerId);
  }

  unhealthy(): ReadonlySet<string> {
    return this.down;
  }

  async refresh(providerIds: readonly string[]): Promise<void> {
    const keep = new Set(providerIds);
    for (const id of this.records.keys()) {
      if (!keep.has(id)) {
        this.records.delete(id);
        this.down.delete(id);
      }
    }
  }
}
