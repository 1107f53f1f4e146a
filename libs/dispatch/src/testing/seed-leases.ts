import { silentLibLogger } from '@iop/validate';
import { RedisProviderQueue } from '../queue/redis/redis-provider-queue';
import { waitUntil } from './wait-until';

/**
 * Puts `active` held leases and `waiting` queued requests on one provider in Redis, the way a
 * gateway replica would (a real `RedisProviderQueue` with `max_concurrency = active`), for
 * readers such as the status exporter; `cluster` for a Redis Cluster seed URL and the provider's shard tag.
 * Resolves a function that releases everything and closes.
 * @throws when `waiting > 0` with `active < 1` (nothing can queue in front of a free slot).
 */
export async function seedLeases(
  redisUrl: string,
  prefix: string,
  providerId: string,
  active: number,
  waiting: number,
  cluster?: { shardTag: string },
): Promise<() => Promise<void>> {
  if (waiting > 0 && active < 1) throw new Error('seedLeases: waiting requests need at least one active lease');
  const queue = new RedisProviderQueue({ redisUrl, prefix, cluster: cluster !== undefined, logger: silentLibLogger });
  const provider = {
    providerId,
    maxConcurrency: Math.max(1, active),
    maxQueued: waiting + 1,
    shardTag: cluster?.shardTag,
  };
  await queue.configure([provider]);
  const request = { modelGroupKey: 'seed', candidates: [provider], maxWaitMs: 600_000 };
  for (let i = 0; i < active; i++) await queue.acquireLease(request);
  const pending = Array.from({ length: waiting }, () => queue.acquireLease(request).catch(() => undefined));
  await waitUntil(
    async () => (await queue.counts([providerId])).get(providerId)?.queued === waiting,
    5000,
    `${waiting} requests to queue on ${providerId}`,
  );
  return async () => {
    await queue.close();
    await Promise.all(pending);
  };
}
