import type { ProviderHealth } from './health-record';

/**
 * How a provider shows in `/status` and to the request path at time `now`:
 * - `healthy`: a candidate;
 * - `unhealthy`: not a candidate (`retry_at` says when a provider out for failing requests may be tried);
 * - `half_open`: its cooldown is over; the next request for it claims the trial;
 * - `trial`: a trial request is out; nobody else is sent meanwhile;
 * - `backoff`: healthy, but backing off after an upstream 429 until `retry_at`.
 */
export type HealthViewState = 'healthy' | 'unhealthy' | 'half_open' | 'trial' | 'backoff';

/** A provider's health as `/status` shows it and the request path reads it (see {@link HealthViewState}). */
export interface HealthView {
  state: HealthViewState;
  reason: string | null;
  /**
   * Epoch ms of the last change of the view's state, when known: of `state` in the record, or when
   * the running back-off began (`backoff`), or when the last back-off ended (`healthy`).
   */
  since: number | null;
  /** Epoch ms when it may be tried again (end of a cooldown or a back-off), when it is out. */
  retryAt: number | null;
}

/** The later of two epoch-ms times, or null when neither is known. */
function latest(a: number | undefined, b: number | undefined): number | null {
  if (a === undefined) return b ?? null;
  return b === undefined ? a : Math.max(a, b);
}

/**
 * The view of `record` at `now` (epoch ms): pure, so every reader derives `half_open`, `trial` and
 * `backoff` from the record's times alike (README "Provider health").
 */
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
      since: latest(record.since, record.backoffSince),
      retryAt: record.backoffUntil ?? null,
    };
  }
  // A back-off that ran out was the last change when it ended after the record's own.
  return { state: 'healthy', reason: null, since: latest(record.since, record.backoffUntil), retryAt: null };
}
