import type { HealthSettings } from '@iop/validate';

/** `healthy` or `unhealthy`, as stored; `half_open` and `backoff` are derived from the times in the record ({@link healthView}). */
export type HealthState = 'healthy' | 'unhealthy';

/**
 * One provider's health record (README "Provider health"). Probes and real traffic keep separate
 * runs, so a probe that passes never wipes out failures seen on requests.
 */
export interface ProviderHealth {
  state: HealthState;
  /** What turned it unhealthy: its probe, or failing requests (then it returns through a trial request). */
  cause?: 'probe' | 'requests';
  /** Why, in words, for `/status` and the log (e.g. `3 requests failed: upstream_timeout`). */
  reason?: string;
  /** Epoch ms of the last change of `state`. */
  since?: number;
  /** Consecutive probe failures (reset by a probe success). */
  failures: number;
  /** Consecutive probe successes (reset by a probe failure). */
  successes: number;
  /** Consecutive failed requests (reset by a request that succeeds, never by a probe). */
  requestFailures: number;
  /** Epoch ms from which a provider turned unhealthy by requests may take its trial request (after `cooldown_ms`). */
  retryAt?: number;
  /** Epoch ms until which a trial request is out (half-open): nobody else tries meanwhile. */
  trialUntil?: number;
  /** Epoch ms until which the provider is backing off (an upstream 429's `Retry-After`). */
  backoffUntil?: number;
  /** Why it backs off. */
  backoffReason?: string;
}

export const INITIAL_HEALTH: ProviderHealth = { state: 'healthy', failures: 0, successes: 0, requestFailures: 0 };

/** One observation of a provider. */
export type HealthEvent =
  /** An active probe's result. */
  | { kind: 'probe'; ok: boolean; reason?: string }
  /** A request's result: `ok` when the upstream answered properly, else what it did (README "Provider health"). */
  | { kind: 'request'; ok: boolean; reason?: string }
  /** An upstream 429: the provider takes no request for `seconds`. */
  | { kind: 'backoff'; seconds: number; reason: string }
  /** A request claims the trial of a half-open provider, holding it for `holdMs`. */
  | { kind: 'trial'; holdMs: number };

/** The thresholds the transitions use; `cooldown_ms` defaults to 30000. */
export type HealthThresholds = Pick<HealthSettings, 'unhealthy_after' | 'healthy_after'> & { cooldown_ms?: number };

export const DEFAULT_COOLDOWN_MS = 30_000;

/** A change worth one log line: from → to, and why. */
export interface HealthTransition {
  from: HealthViewState;
  to: HealthViewState;
  reason?: string;
}

/**
 * The health transition of one event (README "Provider health"). Pure: every store runs this one
 * rule (the Redis store applies its result with a compare-and-set, so replicas agree).
 * - probes: `unhealthy_after` consecutive failures turn a healthy provider unhealthy (`cause:
 *   probe`); `healthy_after` consecutive successes bring back a provider the probe took out, and
 *   only such a provider;
 * - requests: `unhealthy_after` consecutive failed requests turn it unhealthy (`cause: requests`)
 *   even while its probe passes; after `cooldown_ms` it is half-open: one request may claim the
 *   trial; a success brings it back, a failure starts another cooldown;
 * - a 429 backs it off until its `Retry-After` has passed, without touching its health.
 * @returns the next record, `changed` false when it equals `prev` (nothing to write), and the
 *   transition to log, if any.
 */
export function nextHealth(
  prev: ProviderHealth,
  event: HealthEvent,
  settings: HealthThresholds,
  now: number,
): { next: ProviderHealth; changed: boolean; transition?: HealthTransition } {
  // The hot path: a request that succeeds on a healthy provider with no failed request to forget.
  if (event.kind === 'request' && event.ok && prev.state === 'healthy' && prev.requestFailures === 0)
    return { next: prev, changed: false };
  const before = healthView(prev, now).state;
  const next: ProviderHealth = { ...prev };
  const cooldown = settings.cooldown_ms ?? DEFAULT_COOLDOWN_MS;
  const turn = (state: HealthState, cause: ProviderHealth['cause'], reason: string | undefined) => {
    next.state = state;
    next.since = now;
    next.cause = cause;
    next.reason = reason;
  };
  switch (event.kind) {
    case 'probe':
      if (event.ok) {
        next.successes = Math.min(prev.successes + 1, settings.healthy_after);
        next.failures = 0;
        if (prev.state === 'unhealthy' && prev.cause !== 'requests' && next.successes >= settings.healthy_after) {
          turn('healthy', undefined, undefined);
          next.requestFailures = 0;
        }
      } else {
        next.failures = prev.failures + 1;
        next.successes = 0;
        if (prev.state === 'healthy' && next.failures >= settings.unhealthy_after) {
          turn('unhealthy', 'probe', `${next.failures} probes failed${event.reason ? `: ${event.reason}` : ''}`);
        }
      }
      break;
    case 'request':
      if (event.ok) {
        next.requestFailures = 0;
        if (prev.state === 'unhealthy' && prev.cause === 'requests') {
          turn('healthy', undefined, undefined);
          delete next.retryAt;
          delete next.trialUntil;
          next.failures = 0;
        }
      } else {
        next.requestFailures = prev.requestFailures + 1;
        const why = event.reason ? `: ${event.reason}` : '';
        if (prev.state === 'healthy' && next.requestFailures >= settings.unhealthy_after) {
          turn('unhealthy', 'requests', `${next.requestFailures} requests failed${why}`);
          next.retryAt = now + cooldown;
        } else if (
          prev.state === 'unhealthy' &&
          prev.cause === 'requests' &&
          prev.retryAt !== undefined &&
          now >= prev.retryAt
        ) {
          // The trial (or a request that ran into the half-open window) failed: another cooldown.
          turn('unhealthy', 'requests', `trial request failed${why}`);
          next.retryAt = now + cooldown;
          delete next.trialUntil;
        }
      }
      break;
    case 'backoff': {
      const until = now + Math.max(0, event.seconds) * 1000;
      if ((prev.backoffUntil ?? 0) < until) {
        next.backoffUntil = until;
        next.backoffReason = event.reason;
      }
      break;
    }
    case 'trial':
      if (healthView(prev, now).state === 'half_open' && !((prev.trialUntil ?? 0) > now)) {
        next.trialUntil = now + event.holdMs;
      }
      break;
  }
  const after = healthView(next, now);
  const changed = JSON.stringify(next) !== JSON.stringify(prev);
  const transition =
    after.state !== before ? { from: before, to: after.state, reason: after.reason ?? undefined } : undefined;
  return { next, changed, transition };
}

/**
 * How a provider shows in `/status` and to the request path at time `now`:
 * - `healthy`: a candidate;
 * - `unhealthy`: not a candidate (`retry_at` says when a provider out for failing requests may be tried);
 * - `half_open`: its cooldown is over; the next request for it claims the trial;
 * - `trial`: a trial request is out; nobody else is sent meanwhile;
 * - `backoff`: healthy, but backing off after an upstream 429 until `retry_at`.
 */
export type HealthViewState = 'healthy' | 'unhealthy' | 'half_open' | 'trial' | 'backoff';

export interface HealthView {
  state: HealthViewState;
  reason: string | null;
  /** Epoch ms of the last change, when known. */
  since: number | null;
  /** Epoch ms when it may be tried again (end of a cooldown or a back-off), when it is out. */
  retryAt: number | null;
}

export function healthView(record: ProviderHealth, now: number): HealthView {
  if (record.state === 'unhealthy') {
    if (record.cause === 'requests' && record.retryAt !== undefined && now >= record.retryAt) {
      const trialOut = (record.trialUntil ?? 0) > now;
      return {
        state: trialOut ? 'trial' : 'half_open',
        reason: record.reason ?? null,
        since: record.since ?? null,
        retryAt: trialOut ? (record.trialUntil ?? null) : record.retryAt,
      };
    }
    return {
      state: 'unhealthy',
      reason: record.reason ?? null,
      since: record.since ?? null,
      retryAt: record.retryAt ?? null,
    };
  }
  if ((record.backoffUntil ?? 0) > now) {
    return {
      state: 'backoff',
      reason: record.backoffReason ?? null,
      since: record.since ?? null,
      retryAt: record.backoffUntil ?? null,
    };
  }
  return { state: 'healthy', reason: null, since: record.since ?? null, retryAt: null };
}

/** A transition as the store reports it, once, by the writer that made it. */
export type HealthTransitionListener = (providerId: string, transition: HealthTransition) => void;

/**
 * Where providers' health lives: in-process (`MemoryHealthStore`) or shared by every replica through
 * Redis (`RedisHealthStore`), so replicas agree. Reads are synchronous and cached so the request
 * path never waits on I/O; `refresh()` reloads the cache. Writes never throw (a store outage is
 * reported, not raised).
 * Stores hold no connection or timer of their own (the Redis store borrows one), so there is nothing to close.
 */
export interface HealthStore {
  /** Records one probe result (`reason`: why it failed). */
  record(providerId: string, ok: boolean, reason?: string): Promise<void>;
  /** Records one request's result on real traffic: a success, or what the upstream did. */
  recordRequest(providerId: string, ok: boolean, reason?: string): Promise<void>;
  /** Backs a provider off for `seconds` (an upstream 429). */
  backOff(providerId: string, seconds: number, reason: string): Promise<void>;
  /** Claims the trial request of a half-open provider; true for the one caller that got it. */
  claimTrial(providerId: string, holdMs: number): Promise<boolean>;
  /** Ids of the providers that are not candidates now: unhealthy, half-open, on trial, backing off (cached). */
  unhealthy(): ReadonlySet<string>;
  /** Ids of the half-open providers whose trial nobody holds (cached): a request may claim one. */
  trialsDue(): ReadonlySet<string>;
  /** Every provider with a record, as `/status` shows it (cached). */
  views(): ReadonlyMap<string, HealthView>;
  /** Reloads the cache from the store, keeping only `providerIds`. Never throws. */
  refresh(providerIds: readonly string[]): Promise<void>;
  /**
   * Now, in epoch ms, on the clock the records' times are on (`since`, `retryAt`): this process's for
   * the memory store, Redis's for the shared one (docs/architecture.md, "Provider health"), so every
   * replica compares a back-off's end with the same clock.
   */
  now(): number;
}

/**
 * What every `HealthStore` shares: the writes become `HealthEvent`s for the store's `apply`
 * (in-process, or compare-and-set in Redis) and the reads come from its `HealthCache`, so the
 * request path never waits on I/O.
 */
export abstract class CachedHealthStore implements HealthStore {
  protected readonly cache = new HealthCache();

  /** Applies one event to a provider's record and updates the cache; never throws. @returns whether this call wrote a change. */
  protected abstract apply(providerId: string, event: HealthEvent): Promise<boolean>;

  abstract refresh(providerIds: readonly string[]): Promise<void>;

  now(): number {
    return Date.now();
  }

  async record(providerId: string, ok: boolean, reason?: string): Promise<void> {
    await this.apply(providerId, { kind: 'probe', ok, reason });
  }

  async recordRequest(providerId: string, ok: boolean, reason?: string): Promise<void> {
    await this.apply(providerId, { kind: 'request', ok, reason });
  }

  async backOff(providerId: string, seconds: number, reason: string): Promise<void> {
    await this.apply(providerId, { kind: 'backoff', seconds, reason });
  }

  async claimTrial(providerId: string, holdMs: number): Promise<boolean> {
    if (!this.cache.trialsDue().has(providerId)) return false;
    return this.apply(providerId, { kind: 'trial', holdMs });
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
