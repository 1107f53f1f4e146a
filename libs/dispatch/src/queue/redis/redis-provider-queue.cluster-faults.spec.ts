import {
  proxyClusterMasters,
  startRedisCluster,
  uniquePrefix,
  waitUntil,
  type TcpProxy,
  type TestRedisCluster,
} from '../../testing';
import { Redis } from 'ioredis';
import type { AdmissionError } from '../admission-error';
import { LeaseKeys } from '../lease-keys';
import { LeaseStore, readLeaseCounts } from '../lease-store';
import type { LeaseRequest, QueueProvider } from '../provider-queue';
import { connectRedis, type RedisClient } from '../redis-connection';
import { RedisProviderQueue } from './redis-provider-queue';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let cluster: TestRedisCluster;
let proxies: TcpProxy[];
let reader: RedisClient;
beforeAll(async () => {
  cluster = await startRedisCluster(3);
  proxies = await proxyClusterMasters(cluster);
  reader = connectRedis({ url: proxies[0].url, cluster: true });
  reader.on('error', () => undefined);
}, 150_000);
afterAll(async () => {
  reader?.disconnect();
  await Promise.all((proxies ?? []).map((p) => p.close()));
  await cluster?.stop();
});

const request = (candidates: QueueProvider[]): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates,
  maxWaitMs: 10_000,
});
// Hashes to a slot of the third master of a 3-master cluster (see redis-provider-queue.cluster.spec.ts).
const tag = 'pool-c';

/** LLEN of a provider's `active` list read from the masters themselves (the owner answers; the others MOVED). */
async function activeBehindProxies(prefix: string, providerId: string): Promise<number> {
  const key = new LeaseKeys(prefix).queueKey(tag, providerId, 'active');
  const lengths = await Promise.all(
    cluster.ports.map(async (port) => {
      const node = new Redis({ host: '127.0.0.1', port });
      try {
        return await node.llen(key).catch(() => 0);
      } finally {
        node.disconnect();
      }
    }),
  );
  return lengths.reduce((a, b) => a + b, 0);
}

describe('RedisProviderQueue on a Redis Cluster: leases nobody holds', () => {
  const open: RedisProviderQueue[] = [];
  afterEach(async () => {
    for (const p of proxies) p.releaseReplies();
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  const make = (prefix: string) => {
    const q = new RedisProviderQueue({ redisUrl: proxies[0].url, cluster: true, prefix, logger: silent });
    open.push(q);
    return q;
  };

  it('frees a lease granted by an admission whose reply came after the command timeout', async () => {
    const prefix = uniquePrefix('cluster-late-admit');
    const p = { providerId: 'p', maxConcurrency: 2, maxQueued: 10, shardTag: tag };
    const victim = make(prefix);
    await victim.configure([p]);
    await (await victim.acquireLease(request([p]))).release();
    for (const proxy of proxies) proxy.holdReplies();
    const error = (await victim.acquireLease(request([p])).catch((e: unknown) => e)) as AdmissionError;
    expect(error.code).toBe('queue_unavailable');
    // The script ran: read past the held proxies, on the master that owns the tag.
    expect(await activeBehindProxies(prefix, p.providerId)).toBe(1);
    for (const proxy of proxies) proxy.releaseReplies();
    await waitUntil(
      async () => (await readLeaseCounts(reader, prefix, [p])).get('p')?.inFlight === 0,
      3000,
      'the lease of the failed admission to be settled',
    );
  });

  it('reaps an expired lease that names a live replica which does not hold it', async () => {
    const prefix = uniquePrefix('cluster-reap');
    const p = { providerId: 'p', maxConcurrency: 1, maxQueued: 10, shardTag: tag };
    const live = make(prefix);
    await live.configure([p]);
    await new LeaseStore(reader, prefix, 2000).admit(tag, ['p'], `${live.replicaId}.1`, '{}');
    const seededAt = Date.now();
    expect((await live.counts(['p'])).get('p')?.inFlight).toBe(1);
    await waitUntil(async () => (await live.counts(['p'])).get('p')?.inFlight === 0, 5000, 'the lease to be reaped');
    expect(Date.now() - seededAt).toBeLessThan(2000 + 200 + 500 + 300);
  });
});
