import type { HealthSettings } from '@iop/validate';
import { healthView, type HealthViewState } from './health-view';

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
  /** Why, in words, for `/status` and the log (e.g. `3 requests failed: upstream answered 503`). */
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
  /** The claim id of the trial request that is out, so only that request gives it back (`trial_release`). */
  trialClaim?: string;
  /** Epoch ms until which the provider is backing off (an upstream 429's `Retry-After`). */
  backoffUntil?: number;
  /** Why it backs off. */
  backoffReason?: string;
  /** Epoch ms when the running back-off began (a 429 that only extends it keeps this). */
  backoffSince?: number;
  /**
   * Epoch ms of the latest request of it that succeeded, on any replica, as the replicas' probe
   * rounds report it (each probe event carries its replica's latest success, so the hot path writes nothing).
   */
  lastOkAt?: number;
}

/** The record of a provider nothing has been seen of yet: healthy, no runs. */
export const INITIAL_HEALTH: ProviderHealth = { state: 'healthy', failures: 0, successes: 0, requestFailures: 0 };

/** One observation of a provider. */
export type HealthEvent =
  /**
   * An active probe's result. `timedOut`: it got no answer within `health.timeout_ms`; `busy`: the
   * provider had requests in flight while it ran (counted fleet-wide where the queue is shared);
   * `okAt`: the latest request success the reporting replica saw (epoch ms, the store's clock).
   */
  | { kind: 'probe'; ok: boolean; reason?: string; timedOut?: boolean; busy?: boolean; okAt?: number }
  /** A request's result: `ok` when the upstream answered properly, else what it did (README "Provider health"). */
  | { kind: 'request'; ok: boolean; reason?: string }
  /** An upstream 429: the provider takes no request for `seconds`. */
  | { kind: 'backoff'; seconds: number; reason: string }
  /** A request claims the trial of a half-open provider, holding it for `holdMs`, under its own `claim` id. */
  | { kind: 'trial'; holdMs: number; claim?: string }
  /**
   * The request holding trial `claim` ended without evidence about the provider (the client's own
   * error, the client gone, a failure of the gateway's): the trial is given back, the provider is
   * half-open again at once. Any other claim, or a trial already over, is left as it is.
   */
  | { kind: 'trial_release'; claim: string };

/** The thresholds the transitions use; `cooldown_ms` defaults to 30000, `interval_ms` to 5000. */
export type HealthThresholds = Pick<HealthSettings, 'unhealthy_after' | 'healthy_after'> & {
  cooldown_ms?: number;
  interval_ms?: number;
};

/** `health.cooldown_ms` when unset: how long a provider out for failing requests waits for its trial, in ms. */
export const DEFAULT_COOLDOWN_MS = 30_000;

/** `health.interval_ms` when unset: the probe period, in ms, and how recent a success keeps a late probe from counting. */
export const DEFAULT_INTERVAL_MS = 5_000;

/**
 * Whether a failed probe is no evidence on its own (README "Provider health"): it timed out while
 * the provider was busy, with requests in flight or a request that succeeded within the last
 * `interval_ms` (on any replica). A busy server answers its probe late, behind the work; its
 * requests say whether it is alive (a hung one is caught by its requests' first-byte and idle
 * timeouts). A refused connection or an error status always counts.
 */
function busyProbeTimeout(
  event: Extract<HealthEvent, { kind: 'probe' }>,
  lastOkAt: number | undefined,
  settings: HealthThresholds,
  now: number,
): boolean {
  if (event.ok || !event.timedOut) return false;
  const recentOk = lastOkAt !== undefined && now - lastOkAt <= (settings.interval_ms ?? DEFAULT_INTERVAL_MS);
  return event.busy === true || recentOk;
}

/** `3 requests failed`, `1 probe failed`: a run of failures in words. */
function runOf(count: number, what: 'probe' | 'request'): string {
  return `${count} ${what}${count === 1 ? '' : 's'} failed`;
}

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
 *   only such a provider; a probe that timed out while the provider was busy (requests in flight,
 *   or one that succeeded within `interval_ms` on any replica) changes nothing ({@link busyProbeTimeout});
 *   every probe event keeps the latest success it reports in `lastOkAt`;
 * - requests outrank probes: `unhealthy_after` consecutive failed requests turn it unhealthy
 *   (`cause: requests`) even while its probe passes; after `cooldown_ms` it is half-open: one request
 *   may claim the trial; a success brings it back, a failure starts another cooldown. A request that
 *   succeeds also ends a run of failed probes and brings back a provider its probe took out;
 * - a 429 backs it off until its `Retry-After` has passed, without touching its health; a 429 while
 *   no back-off runs notes when the back-off began (`backoffSince`), one that extends it does not. A
 *   trial that got a 429 ends with the back-off: the next request may take the trial then;
 * - a trial whose request ended without evidence about the provider is given back by its claim id
 *   (`trial_release`): half-open again at once, not after the claim's `holdMs`.
 * @returns the next record, `changed` false when it equals `prev` (nothing to write), and the
 *   transition to log, if any.
 */
export function nextHealth(
  prev: ProviderHealth,
  event: HealthEvent,
  settings: HealthThresholds,
  now: number,
): { next: ProviderHealth; changed: boolean; transition?: HealthTransition } {
  // The hot path: a request that succeeds on a healthy provider with no failed request or probe to forget.
  if (
    event.kind === 'request' &&
    event.ok &&
    prev.state === 'healthy' &&
    prev.requestFailures === 0 &&
    prev.failures === 0
  )
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
      if (event.okAt !== undefined && event.okAt > (prev.lastOkAt ?? -Infinity)) next.lastOkAt = event.okAt;
      if (busyProbeTimeout(event, next.lastOkAt, settings, now)) break;
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
          turn('unhealthy', 'probe', `${runOf(next.failures, 'probe')}${event.reason ? `: ${event.reason}` : ''}`);
        }
      }
      break;
    case 'request':
      if (event.ok) {
        next.requestFailures = 0;
        next.failures = 0;
        if (prev.state === 'unhealthy') {
          turn('healthy', undefined, undefined);
          delete next.retryAt;
          delete next.trialUntil;
          delete next.trialClaim;
        }
      } else {
        next.requestFailures = prev.requestFailures + 1;
        const why = event.reason ? `: ${event.reason}` : '';
        if (prev.state === 'healthy' && next.requestFailures >= settings.unhealthy_after) {
          turn('unhealthy', 'requests', `${runOf(next.requestFailures, 'request')}${why}`);
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
          delete next.trialClaim;
        }
      }
      break;
    case 'backoff': {
      const until = now + Math.max(0, event.seconds) * 1000;
      if ((prev.backoffUntil ?? 0) < until) {
        // A back-off that ran out is over: this 429 begins a new one.
        if ((prev.backoffUntil ?? 0) <= now) next.backoffSince = now;
        next.backoffUntil = until;
        next.backoffReason = event.reason;
      }
      // The trial was answered (429): it is over when the back-off is, not at the end of its hold.
      if ((prev.trialUntil ?? 0) > now) next.trialUntil = Math.min(prev.trialUntil ?? until, until);
      break;
    }
    case 'trial':
      if (healthView(prev, now).state === 'half_open' && !((prev.trialUntil ?? 0) > now)) {
        next.trialUntil = now + event.holdMs;
        if (event.claim !== undefined) next.trialClaim = event.claim;
        else delete next.trialClaim;
      }
      break;
    case 'trial_release':
      if (prev.trialClaim === event.claim && (prev.trialUntil ?? 0) > now) {
        delete next.trialUntil;
        delete next.trialClaim;
      }
      break;
  }
  const after = healthView(next, now);
  const changed = JSON.stringify(next) !== JSON.stringify(prev);
  const transition =
    after.state !== before ? { from: before, to: after.state, reason: after.reason ?? undefined } : undefined;
  return { next, changed, transition };
}
