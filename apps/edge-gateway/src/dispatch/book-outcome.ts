import type { HealthStore } from '@iop/dispatch';
import { healthEventOf, type AttemptOutcome } from './health-event';

/**
 * Books one attempt against `providerId`'s health as {@link healthEventOf} decides. A request's
 * result is written in the background (the store never throws; the request path never waits on
 * it); a back-off is awaited, so the failover that follows sees the provider out. Direct routes
 * are never booked: this is called for pool providers only.
 * @returns whether an event was booked (false: the attempt said nothing about the provider).
 */
export async function bookOutcome(
  health: HealthStore | undefined,
  providerId: string,
  attempt: AttemptOutcome,
): Promise<boolean> {
  if (!health) return false;
  const event = healthEventOf(attempt);
  if (event?.kind === 'request') void health.recordRequest(providerId, event.ok, event.reason);
  else if (event?.kind === 'backoff') await health.backOff(providerId, event.seconds, event.reason);
  return event !== undefined;
}
