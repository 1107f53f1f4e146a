import { Redis } from 'ioredis';
import { commandsSinceReset, scanKeys, startRedis, uniquePrefix, waitUntil, type TestRedis } from '../../testing';
import { DEFAULT_SHARD_TAG, LeaseKeys } from '../lease-keys';
import { LeaseStore, renewedClient } from '../lease-store';
import {
  DEFAULT_QUEUE_CLIENT,
  type Lease,
  type LeaseRequest,
  type QueueClient,
  type QueueProvider,
} from '../provider-queue';
import { RedisProviderQueue } from './redis-provider-queue';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let redis: TestRedis;
let admin: Redis;
beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});
afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

/** The fleet's only client (flow control off): the scripts keep no counts and no virtual time for it. */
const solo: QueueClient = { ...DEFAULT_QUEUE_CLIENT, solo: true };
const p: QueueProvider = { providerId: 'p', maxConcurrency: 1, maxQueued: 100, pool: 'pool.p' };
const request = (client: QueueClient, maxWaitMs = 10_000): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates: [p],
  maxWaitMs,
  client,
});

/** Fields of the tag's `clients` hash (the client counts) and the `v|` fields of its `fair` hash. */
async function flowState(prefix: string): Promise<{ counts: Record<string, string>; virtual: string[] }> {
  const base = new LeaseKeys(prefix).tagBase(DEFAULT_SHARD_TAG);
  const counts = await admin.hgetall(`${base}:clients`);
  const virtual = Object.keys(await admin.hgetall(`${base}:fair`)).filter((f) => f.startsWith('v|'));
  return { counts, virtual };
}

/**
 * Flow control off (`QueueClient.solo`; docs/architecture.md, "Clients, priority and fair share"):
 * the same answers as with counts kept (the contract runs with a solo client too), without the
 * commands that only other clients or caps need.
 */
describe('RedisProviderQueue: the fleet’s only client', () => {
  const open: RedisProviderQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  const make = (prefix: string) => {
    const q = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent });
    open.push(q);
    return q;
  };

  it('serves one band after the other, first come first served in each, and keeps no count or virtual time', async () => {
    const prefix = uniquePrefix('solo-order');
    const q = make(prefix);
    await q.configure([p]);
    const holder = await q.acquireLease(request(solo));
    const order: string[] = [];
    const waits: Promise<void>[] = [];
    // x-iop-priority lowers single requests of the one client: bands still come first.
    const bands = [0, -5, 0, -5, 0];
    for (const [i, band] of bands.entries()) {
      waits.push(
        q.acquireLease(request({ ...solo, band })).then(async (lease: Lease) => {
          order.push(`${band}:${i}`);
          await lease.release();
        }),
      );
      await waitUntil(async () => (await q.counts(['p'])).get('p')?.queued === i + 1, 5000, `request ${i} queued`);
    }
    expect(await flowState(prefix)).toEqual({ counts: {}, virtual: [] });
    await holder.release();
    await Promise.all(waits);
    expect(order).toEqual(['0:0', '0:2', '0:4', '-5:1', '-5:3']);
    expect(await flowState(prefix)).toEqual({ counts: {}, virtual: [] });
    expect(await q.clientCounts()).toEqual([]);
  });

  it('leaves nothing of a dead replica’s solo leases and waiters after the sweep, and serves the waiter of a live one', async () => {
    const prefix = uniquePrefix('solo-crash');
    const [dying, alive] = [make(prefix), make(prefix)];
    await Promise.all([dying.configure([p]), alive.configure([p])]);
    await dying.acquireLease(request(solo));
    const lost = dying.acquireLease(request(solo));
    lost.catch(() => undefined);
    const waiting = alive.acquireLease(request(solo));
    await waitUntil(async () => (await alive.counts(['p'])).get('p')?.queued === 2, 5000, 'two waiters');
    await dying.simulateCrash();
    const lease = await waiting;
    await lease.release();
    await waitUntil(async () => (await alive.counts(['p'])).get('p')?.inFlight === 0, 5000, 'every lease ended');
    expect(await flowState(prefix)).toEqual({ counts: {}, virtual: [] });
    const left = await scanKeys(redis.url, `${prefix}:`);
    expect(left.filter((k) => /:provider\.p:[^:]+\.\d+$/.test(k))).toEqual([]);
  });

  it('registers a solo lease again without a count after Redis lost it, and ends it without one', async () => {
    const prefix = uniquePrefix('solo-renew');
    const store = new LeaseStore(admin, prefix, 5000);
    await store.configure(DEFAULT_SHARD_TAG, [p], 0);
    const owner = { pool: 'pool.p', client: solo };
    expect(await store.admit(DEFAULT_SHARD_TAG, ['p'], 'r.1', '{}', owner)).toEqual({
      kind: 'granted',
      providerId: 'p',
    });
    // Redis lost the lease (a restart), the barrier stands: the holder's renewal registers it again.
    const base = new LeaseKeys(prefix).tagBase(DEFAULT_SHARD_TAG);
    await admin.del(`${base}:provider.p:r.1`, `${base}:provider.p:leases`, `${base}:provider.p:active`);
    await store.raiseBarrier(DEFAULT_SHARD_TAG, 5000);
    expect(renewedClient(owner)).toBe('');
    expect(await store.renew(DEFAULT_SHARD_TAG, [{ providerId: 'p', jobId: 'r.1', owner }], false)).toEqual([]);
    expect((await store.counts([{ providerId: 'p', shardTag: DEFAULT_SHARD_TAG }])).get('p')).toEqual({
      inFlight: 1,
      queued: 0,
    });
    expect(await store.release({ providerId: 'p', shardTag: DEFAULT_SHARD_TAG }, 'r.1')).toBe(true);
    expect(await flowState(prefix)).toEqual({ counts: {}, virtual: [] });
  });

  it('costs fewer Redis commands than a counted client, pooled and queued', async () => {
    const prefix = uniquePrefix('solo-cost');
    const q = make(prefix);
    await q.configure([{ ...p, maxConcurrency: 1 }]);
    /** Commands per request of `n` requests two at a time on one slot: the second of each pair queues. */
    const perRequest = async (client: QueueClient, queued: boolean) => {
      await (await q.acquireLease(request(client))).release();
      await admin.config('RESETSTAT');
      const n = 100;
      for (let i = 0; i < n; i += queued ? 2 : 1) {
        const first = await q.acquireLease(request(client));
        if (!queued) {
          await first.release();
          continue;
        }
        const second = q.acquireLease(request(client));
        await waitUntil(async () => (await q.counts(['p'])).get('p')?.queued === 1, 5000, 'the second queued');
        await first.release();
        await (await second).release();
      }
      return (await commandsSinceReset(admin, ['llen', 'zcard'])) / n;
    };
    const counted = { ...DEFAULT_QUEUE_CLIENT };
    const pooled = { solo: await perRequest(solo, false), counted: await perRequest(counted, false) };
    const queued = { solo: await perRequest(solo, true), counted: await perRequest(counted, true) };
    process.stdout.write(
      `Redis commands per request, solo vs counted client: pooled ${pooled.solo.toFixed(1)} vs ${pooled.counted.toFixed(1)}, ` +
        `half queued ${queued.solo.toFixed(1)} vs ${queued.counted.toFixed(1)} (the test's own LLEN/ZCARD left out)\n`,
    );
    expect(pooled.solo).toBeLessThanOrEqual(pooled.counted - 2);
    expect(queued.solo).toBeLessThanOrEqual(queued.counted - 3);
  });
});

/**
 * A lease its origin holds was granted at once or confirmed, so its release skips the `granted` entry
 * (docs/architecture.md, "Lease protocol"): none may be left behind, with or without counts.
 */
describe('RedisProviderQueue: released leases leave no unconfirmed grant', () => {
  it.each([
    ['a counted client', { ...DEFAULT_QUEUE_CLIENT }],
    ['the solo client', solo],
  ])('with %s, after leases granted at once and through the line are released', async (_, client) => {
    const prefix = uniquePrefix('granted');
    const q = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent });
    try {
      await q.configure([p]);
      const first = await q.acquireLease(request(client));
      const waiting = q.acquireLease(request(client));
      await waitUntil(async () => (await q.counts(['p'])).get('p')?.queued === 1, 5000, 'a waiter');
      await first.release();
      const second = await waiting;
      const base = new LeaseKeys(prefix).tagBase(DEFAULT_SHARD_TAG);
      expect(await admin.hlen(`${base}:granted`)).toBe(0);
      await second.release();
      await waitUntil(async () => (await q.counts(['p'])).get('p')?.inFlight === 0, 5000, 'both released');
      expect(await admin.hlen(`${base}:granted`)).toBe(0);
      expect(await q.clientCounts()).toEqual([]);
    } finally {
      await q.close();
    }
  });
});
