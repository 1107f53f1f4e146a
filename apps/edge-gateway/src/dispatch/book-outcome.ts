import type { HealthStore } from '@iop/dispatch';
import { healthEventOf, type AttemptOutcome } from './health-event';

/**
 * Books one attempt against `providerId`'s health as {@link healthEventOf} decides. A request's
 * result is written in the background (the store never throws; the request path never waits on
 * it); a back-off is awaited, so the failover that follows sees the provider out. Direct routes
 * are never booked: this is called for pool providers only.
 * @returns whether an event was booked (false: the attempt said nothing about the provider); a
 *   promise of it only for a back-off, the one booking the caller waits for (no promise per request otherwise).
 */
export function bookOutcome(
  health: HealthStore | undefined,
  providerId: string,
  attempt: AttemptOutcome,
): boolean | Promise<boolean> {
  if (!health) return false;
  const event = healthEventOf(attempt);
  if (event === undefined) return false;
  if (event.kind === 'request') void health.recordRequest(providerId, event.ok, event.reason);
  else if (event.kind === 'backoff') return health.backOff(providerId, event.seconds, event.reason).then(() => true);
  return true;
}
