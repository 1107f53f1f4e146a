import { edgeConfigSchema } from '@iop/validate';
import { startRedisCluster, uniquePrefix, type TestRedisCluster } from '../../testing';
import { queueProviders } from '../../route/resolve-route';
import type { AdmissionError } from '../admission-error';
import { RedisProviderQueue } from './redis-provider-queue';
import { readLeaseCounts } from '../lease-store';
import { waitUntil } from '../provider-queue.contract';
import type { Lease, LeaseRequest, QueueProvider } from '../provider-queue';
import { connectRedis, masterNodes, type RedisClient } from '../redis-connection';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let cluster: TestRedisCluster;
let reader: RedisClient;
beforeAll(async () => {
  cluster = await startRedisCluster(3);
  reader = connectRedis({ url: cluster.urls[0], cluster: true });
  reader.on('error', () => undefined);
}, 150_000);
afterAll(async () => {
  reader?.disconnect();
  await cluster?.stop();
});

const request = (candidates: QueueProvider[], extra: Partial<LeaseRequest> = {}): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates,
  maxWaitMs: 10_000,
  ...extra,
});

describe('RedisProviderQueue on a real 3-master Redis Cluster', () => {
  const open: RedisProviderQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  const replicas = (prefix: string, n: number) => {
    const queues = Array.from(
      { length: n },
      (_, i) =>
        new RedisProviderQueue({
          redisUrl: cluster.urls[i % cluster.urls.length],
          cluster: true,
          prefix,
          logger: silent,
        }),
    );
    open.push(...queues);
    return queues;
  };

  // Shard tags chosen to hash to slots on different masters of a 3-master cluster (slots 0–5460, 5461–10922, 10923–16383).
  const pools = { a: 'pool-a', c: 'pool-c' };

  it('spreads providers of unrelated pools over shards and keeps each pool on one slot', async () => {
    const prefix = uniquePrefix('spread');
    const [q] = replicas(prefix, 1);
    const a = { providerId: 'a', maxConcurrency: 1, maxQueued: 10, shardTag: pools.a };
    const b = { providerId: 'b', maxConcurrency: 1, maxQueued: 10, shardTag: pools.a };
    const c = { providerId: 'c', maxConcurrency: 1, maxQueued: 10, shardTag: pools.c };
    await q.configure([a, b, c]);
    const leases = [
      await q.acquireLease(request([a, b])),
      await q.acquireLease(request([a, b])),
      await q.acquireLease(request([c])),
    ];
    const owners = await Promise.all(
      masterNodes(reader).map(async (node) => {
        const keys = (await node.keys(`${prefix}:*`)).filter((k) => /:provider\.\w:active$/.test(k));
        return keys.map((k) => /provider\.(\w):active$/.exec(k)![1]).sort();
      }),
    );
    const withKeys = owners.filter((o) => o.length > 0);
    expect(withKeys).toHaveLength(2);
    expect(withKeys).toEqual(expect.arrayContaining([['a', 'b'], ['c']]));
    for (const l of leases) await l.release();
  });

  it('holds max_concurrency across three replicas under load, counts agree, and queue_full is exact', async () => {
    const prefix = uniquePrefix('limits');
    const queues = replicas(prefix, 3);
    const a = { providerId: 'a', maxConcurrency: 2, maxQueued: 1000, shardTag: pools.a };
    const b = { providerId: 'b', maxConcurrency: 3, maxQueued: 1000, shardTag: pools.a };
    await Promise.all(queues.map((q) => q.configure([a, b])));
    const inUse = new Map<string, number>();
    const peak = new Map<string, number>();
    await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const lease = await queues[i % 3].acquireLease(request([a, b]));
        const n = (inUse.get(lease.providerId) ?? 0) + 1;
        inUse.set(lease.providerId, n);
        peak.set(lease.providerId, Math.max(n, peak.get(lease.providerId) ?? 0));
        await new Promise((r) => setTimeout(r, 20));
        inUse.set(lease.providerId, inUse.get(lease.providerId)! - 1);
        await lease.release();
      }),
    );
    expect(peak.get('a')).toBe(2);
    expect(peak.get('b')).toBe(3);
    expect(await readLeaseCounts(reader, prefix, [a, b])).toEqual(
      new Map([
        ['a', { inFlight: 0, queued: 0 }],
        ['b', { inFlight: 0, queued: 0 }],
      ]),
    );

    const tiny = { providerId: 'tiny', maxConcurrency: 1, maxQueued: 1, shardTag: pools.c };
    await Promise.all(queues.map((q) => q.configure([a, b, tiny])));
    const granted: Lease[] = [];
    const refused: string[] = [];
    queues.concat(queues).forEach(
      (q) =>
        void q.acquireLease(request([tiny])).then(
          (l) => void granted.push(l),
          (e: AdmissionError) => void refused.push(e.code),
        ),
    );
    await waitUntil(() => refused.length === 4 && granted.length === 1, 5000, '1 grant and 4 refusals');
    expect(refused).toEqual(Array(4).fill('queue_full'));
    expect((await readLeaseCounts(reader, prefix, [tiny])).get('tiny')).toEqual({ inFlight: 1, queued: 1 });
    await granted[0].release();
    await waitUntil(() => granted.length === 2, 5000, 'the queued request to be granted');
    await granted[1].release();
  });

  it('frees the slots of a replica that died within 3 s', async () => {
    const prefix = uniquePrefix('crash');
    const [dying, alive] = replicas(prefix, 2);
    const p = { providerId: 'p', maxConcurrency: 1, maxQueued: 10, shardTag: pools.c };
    await Promise.all([dying.configure([p]), alive.configure([p])]);
    await dying.acquireLease(request([p]));
    const waiting = alive.acquireLease(request([p]));
    await waitUntil(
      async () => (await readLeaseCounts(reader, prefix, [p])).get('p')?.queued === 1,
      5000,
      'a waiting request',
    );
    const killedAt = Date.now();
    await dying.simulateCrash();
    const lease = await waiting;
    expect(Date.now() - killedAt).toBeLessThanOrEqual(3000);
    await lease.release();
  });

  it('grants in band order and holds a client at max_in_flight across three replicas on a pool of its own shard', async () => {
    const prefix = uniquePrefix('flow');
    const queues = replicas(prefix, 3);
    const p = { providerId: 'p', maxConcurrency: 1, maxQueued: 50, shardTag: pools.a, pool: pools.a };
    await Promise.all(queues.map((q) => q.configure([p])));
    const holder = await queues[0].acquireLease(request([p]));
    const bands: number[] = [];
    const waits = Array.from({ length: 12 }, (_, i) => {
      const client = { id: `c${i % 3}`, band: [3, 0, -2][i % 3], weight: 1, maxInFlight: 1 };
      return queues[i % 3].acquireLease(request([p], { client })).then(async (lease) => {
        bands.push(client.band);
        await lease.release();
      });
    });
    await waitUntil(
      async () => (await readLeaseCounts(reader, prefix, [p])).get('p')?.queued === 12,
      5000,
      '12 requests queued',
    );
    await holder.release();
    await Promise.all(waits);
    expect(bands).toEqual([...bands].sort((x, y) => y - x));
    expect(await queues[1].clientCounts()).toEqual([]);
  });

  it('holds one token budget exactly over two pools sharing the one tag a budget gives them, from three replicas', async () => {
    const prefix = uniquePrefix('budget');
    const queues = replicas(prefix, 3);
    // Two unrelated pools, as the config makes them: with a budget they share one tag, each its own pool.
    const node = (id: string) => ({
      id,
      adapters: [{ id: `${id}-c`, type: 'openai_compat', base_url: 'http://127.0.0.1:1/v1' }],
      providers: [
        { id, category: 'openai_compat', adapter: `${id}-c`, models: [`m-${id}`], max_concurrency: 20, max_queued: 10 },
      ],
    });
    const config = edgeConfigSchema.parse({
      version: 1,
      gateway: { clients: [{ id: 'metered', keys: ['k'], tokens_per_minute: 1000 }] },
      queue: { cluster: true },
      nodes: [node('a'), node('c')],
    });
    const [a, c] = queueProviders(config);
    expect([a.pool, c.pool]).toEqual(['pool.a', 'pool.c']);
    await Promise.all(queues.map((q) => q.configure([a, c])));
    const client = { id: 'metered', band: 0, weight: 1, tokenBudgets: { perMinute: 1000 } };
    const granted: Lease[] = [];
    const refused: string[] = [];
    await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        queues[i % 3].acquireLease(request([i % 2 ? a : c], { client, tokens: { prompt: 100, completion: 0 } })).then(
          (l) => void granted.push(l),
          (e: AdmissionError) => void refused.push(e.code),
        ),
      ),
    );
    expect(granted).toHaveLength(10);
    expect(refused).toEqual(Array(14).fill('rate_limit_exceeded'));
    expect(new Set(granted.map((l) => l.providerId))).toEqual(new Set(['a', 'c']));
    expect((await queues[2].clientBudgets([client]))[0]).toMatchObject({ reservedTokens: 1000, remainingTokens: 0 });
    await Promise.all(granted.map((l) => l.release({ tokens: 10, reported: true })));
    expect((await queues[0].clientBudgets([client]))[0]).toMatchObject({ reservedTokens: 0, usedTokens: 100 });
  });
});
