import { LeaseKeys } from '../queue/lease-keys';
import type { RedisClient } from '../queue/redis-connection';
import { CachedHealthStore } from './cached-health-store';
import {
  INITIAL_HEALTH,
  nextHealth,
  type HealthEvent,
  type HealthThresholds,
  type ProviderHealth,
} from './health-record';
import type { HealthTransitionListener } from './health-store';
import { HEALTH_SCRIPTS } from './scripts/health-scripts';

/** Attempts of one update against concurrent writers before it is given up (and reported). */
const MAX_CAS_ATTEMPTS = 32;

/**
 * Provider health shared by every replica through Redis (README "Provider health": replicas agree;
 * health expires when no replica refreshes it). Keys: `LeaseKeys.healthKey` (hash, PX), all on one
 * cluster slot. Updates are compare-and-set (`scripts/compare-and-set.lua`) of the record `nextHealth` computes, so the
 * transition rule lives in one place, and the replica whose write made a transition is the one that
 * reports it (one log line per transition for the whole fleet). A request that succeeds on a provider
 * whose cached record has nothing to reset writes nothing (no Redis command on the hot path).
 * A Redis outage leaves the cache as it was and is reported through `onError`.
 *
 * Times in a record (`since`, `retryAt`, `trialUntil`, `backoffUntil`) are on Redis's clock, whatever
 * each replica's clock says: the store reads `TIME` every `refresh` (and before its first write) and
 * keeps the offset to this process's clock, so replicas with skewed clocks agree on when a cooldown or
 * a back-off ends (`now()`).
 */
export class RedisHealthStore extends CachedHealthStore {
  private readonly versions = new Map<string, string>();
  private readonly keys: LeaseKeys;

  /**
   * @param redis a connection that fails fast (`enableOfflineQueue: false`); not closed by the store.
   * @param ttlMs lifetime of a record without updates, in ms (e.g. 3 × `health.interval_ms`); a
   *   record in a cooldown or back-off lives at least until it ends, plus this.
   */
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly settings: () => HealthThresholds,
    private readonly ttlMs: () => number,
    private readonly onError: (err: unknown) => void = () => undefined,
    private readonly onTransition: HealthTransitionListener = () => undefined,
    /** This process's clock, epoch ms (a test skews it). @defaultValue `Date.now` */
    private readonly localClock: () => number = () => Date.now(),
  ) {
    super();
    this.keys = new LeaseKeys(prefix);
  }

  /** Now on Redis's clock, epoch ms: this process's clock plus the offset last measured (none before the first). */
  override now(): number {
    return this.localClock() + (this.offsetMs ?? 0);
  }

  /** Redis's clock minus this process's, in ms, from `TIME` (half the round trip assumed each way). */
  private offsetMs: number | undefined;

  private async syncClock(): Promise<void> {
    const sentAt = this.localClock();
    const [seconds, micros] = await this.redis.time();
    const receivedAt = this.localClock();
    this.offsetMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - (sentAt + receivedAt) / 2;
  }

  async refresh(providerIds: readonly string[]): Promise<void> {
    await this.syncClock().catch((err: unknown) => this.onError(err));
    if (providerIds.length === 0) {
      this.cache.replace(new Map());
      this.versions.clear();
      return;
    }
    try {
      const pipeline = this.redis.pipeline();
      for (const id of providerIds) pipeline.hmget(this.keys.healthKey(id), 'v', 'rec');
      const results = (await pipeline.exec()) ?? [];
      const records = new Map<string, ProviderHealth>();
      this.versions.clear();
      providerIds.forEach((id, i) => {
        const [err, value] = results[i] ?? [];
        if (err) throw err;
        const [v, rec] = (value as Array<string | null> | undefined) ?? [];
        const record = parseRecord(rec ?? null);
        if (v && record) {
          records.set(id, record);
          this.versions.set(id, v);
        }
      });
      this.cache.replace(records);
    } catch (err) {
      this.onError(err);
    }
  }

  /**
   * Applies `event` to the record with compare-and-set, retrying on a concurrent write.
   * @returns whether this call wrote a change (false: nothing to change, or Redis unreachable).
   */
  protected apply(providerId: string, event: HealthEvent): Promise<boolean> {
    // One update at a time per provider in this process: concurrent ones would only conflict with each other.
    const previous = this.inFlight.get(providerId) ?? Promise.resolve();
    const run = previous.then(() => this.applyNow(providerId, event));
    const tail = run.then(() => undefined);
    this.inFlight.set(providerId, tail);
    void tail.then(() => {
      if (this.inFlight.get(providerId) === tail) this.inFlight.delete(providerId);
    });
    return run.then(({ wrote }) => wrote);
  }

  private readonly inFlight = new Map<string, Promise<void>>();

  private async applyNow(providerId: string, event: HealthEvent): Promise<{ wrote: boolean }> {
    const key = this.keys.healthKey(providerId);
    try {
      if (this.offsetMs === undefined) await this.syncClock();
      for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
        const now = this.now();
        const prev = this.cache.get(providerId) ?? INITIAL_HEALTH;
        const version = this.versions.get(providerId) ?? '0';
        const { next, changed, transition } = nextHealth(prev, event, this.settings(), now);
        // Nothing to change in the record as last seen: no write (the common case of a request that succeeds).
        if (!changed && event.kind !== 'probe' && event.kind !== 'backoff') return { wrote: false };
        const ttl =
          this.ttlMs() + Math.max(0, ...[next.retryAt, next.trialUntil, next.backoffUntil].map((t) => (t ?? 0) - now));
        const { status, values } = await HEALTH_SCRIPTS.compareAndSet.run(
          this.redis,
          [key],
          [version, JSON.stringify(next), next.state, Math.ceil(ttl)],
        );
        const [currentVersion, currentJson] = values;
        if (status === 'written') {
          this.versions.set(providerId, currentVersion);
          this.cache.set(providerId, next);
          if (transition) this.onTransition(providerId, transition);
          return { wrote: changed };
        }
        // Another replica wrote first: take its record and decide again.
        const current = parseRecord(currentJson ?? null);
        this.versions.set(providerId, currentVersion);
        this.cache.set(providerId, current ?? undefined);
        if (!current) this.versions.delete(providerId);
      }
      throw new Error(`health record of ${providerId} kept changing under ${MAX_CAS_ATTEMPTS} attempts`);
    } catch (err) {
      this.onError(err);
      return { wrote: false };
    }
  }
}

function parseRecord(json: string | null): ProviderHealth | undefined {
  if (!json) return undefined;
  try {
    const parsed = JSON.parse(json) as ProviderHealth;
    return typeof parsed === 'object' && parsed !== null && (parsed.state === 'healthy' || parsed.state === 'unhealthy')
      ? { ...INITIAL_HEALTH, ...parsed }
      : undefined;
  } catch {
    return undefined;
  }
}
