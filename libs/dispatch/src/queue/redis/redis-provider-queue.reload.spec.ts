import { startRedis, uniquePrefix, type TestRedis } from '../../testing';
import { waitUntil } from '../provider-queue.contract';
import type { Lease, LeaseRequest, QueueProvider } from '../provider-queue';
import { RedisProviderQueue } from './redis-provider-queue';

// README "Config refresh": a removed or disabled provider takes no new requests; requests waiting on it
// move to another provider of their model. On the Redis backend a waiter is listed by every candidate
// (its own queue, the others' `wanted` sets), so a slot the removed provider frees must grant none.

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const provider = (providerId: string): QueueProvider => ({ providerId, maxConcurrency: 1, maxQueued: 10 });
const request = (candidates: QueueProvider[]): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates,
  maxWaitMs: 10_000,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('RedisProviderQueue when a reload removes a provider', () => {
  it.each([
    ['on the replica that releases the slot and the one whose requests wait', 'both'],
    ['on the replica whose requests wait only (the releasing one still lists it)', 'waiting'],
  ])('grants none of its freed slots to a waiting request, %s; they go to the remaining provider', async (_, who) => {
    const prefix = uniquePrefix('reload');
    const [holder, other] = [
      new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent }),
      new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent }),
    ];
    const [pa, pb] = [provider('pa'), provider('pb')];
    try {
      await Promise.all([holder.configure([pa, pb]), other.configure([pa, pb])]);
      const onA = await holder.acquireLease(request([pa]));
      const onB = await holder.acquireLease(request([pb]));
      const granted: Lease[] = [];
      const waiting = [other.acquireLease(request([pa, pb])), other.acquireLease(request([pa, pb]))].map((p) =>
        p.then((lease) => void granted.push(lease)),
      );
      await waitUntil(
        async () => [...(await other.counts(['pa', 'pb'])).values()].reduce((n, c) => n + c.queued, 0) === 2,
        5000,
        'two waiting requests',
      );

      await other.configure([pa]);
      if (who === 'both') await holder.configure([pa]);
      await onB.release();
      await sleep(500);
      expect(granted).toEqual([]);
      expect((await holder.counts(['pb'])).get('pb')).toEqual({ inFlight: 0, queued: 0 });
      expect((await other.counts(['pa'])).get('pa')).toEqual({ inFlight: 1, queued: 2 });

      await onA.release();
      await waitUntil(() => granted.length === 1, 5000, 'the first waiter granted');
      expect(granted[0].providerId).toBe('pa');
      await granted[0].release();
      await Promise.all(waiting);
      expect(granted.map((l) => l.providerId)).toEqual(['pa', 'pa']);
      await granted[1].release();
      const counts = await holder.counts(['pa', 'pb']);
      expect([...counts.values()]).toEqual([
        { inFlight: 0, queued: 0 },
        { inFlight: 0, queued: 0 },
      ]);
    } finally {
      await Promise.all([holder.close(), other.close()]);
    }
  });
});
