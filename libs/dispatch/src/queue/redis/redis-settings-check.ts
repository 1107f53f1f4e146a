import type { LeaseStore } from '../lease-store';
import type { QueueLogger } from './redis-queue-options';

/**
 * Checks, once at start, the Redis settings the lease protocol relies on (README "Redis
 * requirements"), on every master of a cluster, and says what to fix; never throws:
 * - `maxmemory-policy` `allkeys-*` may evict a lease, a limit or a waiting job under memory pressure
 *   (a warning naming the fix: `noeviction`, or a `volatile-*` policy);
 * - `timeout` other than 0 closes an idle replica's connections, so a stopped replica looks dead
 *   and its slots are freed while its upstream calls may still run (a warning);
 * - where `CONFIG GET` is refused (a managed Redis, an ACL), one info line says to check both by hand.
 */
export async function checkRedisSettings(store: LeaseStore, logger: QueueLogger): Promise<void> {
  let policies: string[];
  let timeouts: string[];
  try {
    [policies, timeouts] = await Promise.all([store.serverConfig('maxmemory-policy'), store.serverConfig('timeout')]);
  } catch (e) {
    logger.info(
      { err: e },
      'redis queue: CONFIG GET refused (managed Redis?); make sure maxmemory-policy is noeviction or volatile-* and timeout is 0 (README "Redis requirements")',
    );
    return;
  }
  const evicting = policies.find((p) => p.startsWith('allkeys-'));
  if (evicting) {
    logger.warn(
      { maxmemory_policy: evicting },
      `redis queue: Redis maxmemory-policy is ${evicting}: under memory pressure it may evict leases and limits and lift max_concurrency; set maxmemory-policy noeviction (or a volatile-* policy)`,
    );
  }
  const idleTimeout = timeouts.find((t) => t !== '' && t !== '0');
  if (idleTimeout) {
    logger.warn(
      { timeout_s: Number(idleTimeout) },
      `redis queue: Redis closes idle connections after ${idleTimeout} s (timeout): a stopped replica's slots would be freed while its upstream calls may still run; set timeout 0`,
    );
  }
}
