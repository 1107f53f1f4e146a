import type { ProviderQueue } from '../queue/provider-queue';
import type { Route } from './route';

/**
 * Decides whether a request enters a provider queue (docs/architecture.md, "Request path", step 2):
 * `providerPool && modelGroupKey !== "" && queue`. Direct routes never are, whatever
 * their modelGroupKey; everything that is not queued touches no queue, lease or count.
 * A type guard: where it holds, `queue` is the queue to lease from.
 */
export function entersQueue(route: Route, queue: ProviderQueue | undefined): queue is ProviderQueue {
  return route.providerPool && route.modelGroupKey !== '' && queue !== undefined;
}
