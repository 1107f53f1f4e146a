import { CachedHealthStore } from './cached-health-store';
import { INITIAL_HEALTH, nextHealth, type HealthEvent, type HealthThresholds } from './health-record';
import type { HealthTransitionListener } from './health-store';

/** Health of one process's providers, for the memory backend (one gateway). Same rule as every store: `nextHealth`. */
export class MemoryHealthStore extends CachedHealthStore {
  constructor(
    private readonly settings: () => HealthThresholds,
    private readonly onTransition: HealthTransitionListener = () => undefined,
  ) {
    super();
  }

  async refresh(providerIds: readonly string[]): Promise<void> {
    const keep = new Set(providerIds);
    for (const id of [...this.cache.ids()]) if (!keep.has(id)) this.cache.set(id, undefined);
  }

  protected async apply(providerId: string, event: HealthEvent): Promise<boolean> {
    const { next, changed, transition } = nextHealth(
      this.cache.get(providerId) ?? INITIAL_HEALTH,
      event,
      this.settings(),
      this.now(),
    );
    if (!changed) return false;
    this.cache.set(providerId, next);
    if (transition) this.onTransition(providerId, transition);
    return true;
  }
}
