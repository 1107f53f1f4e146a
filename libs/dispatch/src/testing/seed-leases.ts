import { silentLibLogger } from '@iop/validate';
import type { QueueClient } from '../queue/provider-queue';
import { RedisProviderQueue } from '../queue/redis/redis-provider-queue';
import { waitUntil } from './wait-until';

/** Where and for whom {@link seedLeases} puts its requests. */
export interface SeedOptions {
  /** The provider's shard tag on a Redis Cluster (`redisUrl` is then a seed node). */
  readonly shardTag?: string;
  /** The provider's pool, as `providerPools` names it for the config under test. @defaultValue `pool` */
  readonly pool?: string;
  /** The client of each lease, in order; a lease past the list is the anonymous client's. */
  readonly leaseClients?: readonly QueueClient[];
  /** The client of each waiting request, in order; past the list, the anonymous client's. */
  readonly waitClients?: readonly QueueClient[];
  /**
   * Requests of a client already at its `maxInFlight` (through `leaseClients`), put after the
   * waiting ones: they are parked at the client's cap (docs/architecture.md, "Clients, priority and
   * fair share"), so they count in the client's `queued` and in no provider's.
   */
  readonly parked?: { readonly client: QueueClient; readonly count: number };
}

/**
 * Puts `active` held leases and `waiting` queued requests on one provider in Redis, the way a
 * gateway replica would (a real `RedisProviderQueue` with `max_concurrency = active`), for
 * readers such as the status exporter; `opts.shardTag` for a Redis Cluster seed URL and the
 * provider's shard tag, `opts.pool` and the clients for the client counts.
 * Resolves a function that releases everything and closes.
 * @throws when `waiting > 0` with `active < 1` (nothing can queue in front of a free slot).
 */
export async function seedLeases(
  redisUrl: string,
  prefix: string,
  providerId: string,
  active: number,
  waiting: number,
  opts: SeedOptions = {},
): Promise<() => Promise<void>> {
  if (waiting > 0 && active < 1) throw new Error('seedLeases: waiting requests need at least one active lease');
  const cluster = opts.shardTag !== undefined;
  const queue = new RedisProviderQueue({ redisUrl, prefix, cluster, logger: silentLibLogger });
  const provider = {
    providerId,
    maxConcurrency: Math.max(1, active),
    maxQueued: waiting + 1,
    shardTag: opts.shardTag,
    pool: opts.pool,
  };
  await queue.configure([provider]);
  const request = (client?: QueueClient) => ({
    modelGroupKey: 'seed',
    candidates: [provider],
    maxWaitMs: 600_000,
    client,
  });
  for (let i = 0; i < active; i++) await queue.acquireLease(request(opts.leaseClients?.[i]));
  const pending: Promise<unknown>[] = Array.from({ length: waiting }, (_, i) =>
    queue.acquireLease(request(opts.waitClients?.[i])).catch(() => undefined),
  );
  await waitUntil(
    async () => (await queue.counts([providerId])).get(providerId)?.queued === waiting,
    5000,
    `${waiting} requests to queue on ${providerId}`,
  );
  const parked = opts.parked;
  if (parked) {
    const before = await clientQueued(queue, parked.client.id);
    for (let i = 0; i < parked.count; i++)
      pending.push(queue.acquireLease(request(parked.client)).catch(() => undefined));
    await waitUntil(
      async () =>
        (await clientQueued(queue, parked.client.id)) === before + parked.count &&
        (await queue.counts([providerId])).get(providerId)?.queued === waiting,
      5000,
      `${parked.count} requests of ${parked.client.id} to park at its max_in_flight`,
    );
  }
  return async () => {
    await queue.close();
    await Promise.all(pending);
  };
}

/** The client's waiting requests over every pool the queue holds. */
async function clientQueued(queue: RedisProviderQueue, clientId: string): Promise<number> {
  return (await queue.clientCounts()).filter((c) => c.clientId === clientId).reduce((n, c) => n + c.queued, 0);
}
