import { LeaseKeys } from './lease-keys';
import type { StoredProvider } from './lease-store';
import type { ProviderCounts } from './provider-queue';
import type { RedisClient } from './redis-connection';

/**
 * Reads the live counts of providers straight from Redis, for processes that hold no leases (the
 * status exporter, tests) as well as for the gateway: `inFlight` = `LLEN active`, `queued` = `LLEN wait`,
 * the numbers admission decides on. Read-only; a provider with no keys reads 0/0. One pipeline.
 * @param prefix `queue.prefix` (no trailing `:`).
 * @throws the Redis error when any command fails (connection lost, wrong key type).
 */
export async function readLeaseCounts(
  redis: RedisClient,
  prefix: string,
  providers: readonly StoredProvider[],
): Promise<Map<string, ProviderCounts>> {
  const keys = new LeaseKeys(prefix);
  const out = new Map<string, ProviderCounts>();
  // One pipeline per shard tag: a cluster pipeline must stay on one slot.
  const byTag = new Map<string, StoredProvider[]>();
  for (const p of providers) byTag.set(p.shardTag, [...(byTag.get(p.shardTag) ?? []), p]);
  await Promise.all(
    [...byTag.values()].map(async (group) => {
      const pipeline = redis.pipeline();
      for (const p of group) {
        pipeline.llen(keys.queueKey(p.shardTag, p.providerId, 'active'));
        pipeline.llen(keys.queueKey(p.shardTag, p.providerId, 'wait'));
      }
      const results = (await pipeline.exec()) ?? [];
      const numbers = results.map(([error, value], i) => {
        if (error) throw error;
        if (typeof value !== 'number') throw new Error(`readLeaseCounts: reply ${i} is not a number`);
        return value;
      });
      if (numbers.length !== group.length * 2) throw new Error('readLeaseCounts: the pipeline was aborted');
      group.forEach((p, i) => out.set(p.providerId, { inFlight: numbers[2 * i], queued: numbers[2 * i + 1] }));
    }),
  );
  return new Map(providers.map((p) => [p.providerId, out.get(p.providerId)!]));
}
