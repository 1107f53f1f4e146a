import {
  HealthCache,
  INITIAL_HEALTH,
  nextHealth,
  type HealthEvent,
  type HealthStore,
  type HealthThresholds,
  type HealthTransitionListener,
  type HealthView,
} from './provider-health';

/** Health of one process's providers, for the memory backend (one gateway). Same rule as every store: `nextHealth`. */
export class MemoryHealthStore implements HealthStore {
  private readonly cache = new HealthCache();

  constructor(
    private readonly settings: () => HealthThresholds,
    private readonly onTransition: HealthTransitionListener = () => undefined,
  ) {}

  async record(providerId: string, ok: boolean, reason?: string): Promise<void> {
    this.apply(providerId, { kind: 'probe', ok, reason });
  }

  async recordRequest(providerId: string, ok: boolean, reason?: string): Promise<void> {
    this.apply(providerId, { kind: 'request', ok, reason });
  }

  async backOff(providerId: string, seconds: number, reason: string): Promise<void> {
    this.apply(providerId, { kind: 'backoff', seconds, reason });
  }

  async claimTrial(providerId: string, holdMs: number): Promise<boolean> {
    if (!this.cache.trialsDue().has(providerId)) return false;
    this.apply(providerId, { kind: 'trial', holdMs });
    return !this.cache.trialsDue().has(providerId);
  }

  unhealthy(): ReadonlySet<string> {
    return this.cache.unhealthy();
  }

  trialsDue(): ReadonlySet<string> {
    return this.cache.trialsDue();
  }

  views(): ReadonlyMap<string, HealthView> {
    return this.cache.views();
  }

  async refresh(providerIds: readonly string[]): Promise<void> {
    const keep = new Set(providerIds);
    for (const id of [...this.cache.ids()]) if (!keep.has(id)) this.cache.set(id, undefined);
  }

  private apply(providerId: string, event: HealthEvent): void {
    const { next, changed, transition } = nextHealth(this.cache.get(providerId) ?? INITIAL_HEALTH, event, this.settings(), Date.now());
    if (!changed) return;
    this.cache.set(providerId, next);
    if (transition) this.onTransition(providerId, transition);
  }
}
