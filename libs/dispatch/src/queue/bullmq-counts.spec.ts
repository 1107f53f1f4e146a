import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, scanKeys, type TestRedis } from '../testing/redis-server';
import { readBullmqCounts } from './bullmq-counts';
import { BullmqKeys } from './bullmq-keys';

describe('readBullmqCounts (read-only counts of the BullMQ backend, DESIGN §4)', () => {
  let redis: TestRedis;
  let client: Redis;
  const closers: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  afterAll(async () => {
    client.disconnect();
    await redis.stop();
  });

  const queueFor = (prefix: string, providerId: string) => {
    const q = new Queue(new BullmqKeys(prefix).queueName(providerId), { connection: { url: redis.url }, prefix });
    closers.push(() => q.close());
    return q;
  };
  /** Moves `n` jobs of a provider queue to active with a manual worker (no processor), like held leases. */
  const activate = async (prefix: string, providerId: string, n: number): Promise<Job[]> => {
    const worker = new Worker(new BullmqKeys(prefix).queueName(providerId), null, { connection: { url: redis.url }, prefix, autorun: false });
    closers.push(() => worker.close(true));
    const jobs: Job[] = [];
    for (let i = 0; i < n; i++) jobs.push(await worker.getNextJob(`token-${i}`, { block: false }));
    return jobs;
  };

  it('counts active as in_flight and wait + prioritized as queued, per provider, independently', async () => {
    const prefix = uniquePrefix('bullmq-counts');
    const a = queueFor(prefix, 'gpu-a/llama');
    const b = queueFor(prefix, 'gpu-b');
    for (let i = 0; i < 5; i++) await a.add('lease', { i });
    await a.add('lease', { p: 1 }, { priority: 3 });
    await b.add('lease', {});
    const held = await activate(prefix, 'gpu-a/llama', 2);
    expect(held.every((j) => j !== undefined)).toBe(true);

    const counts = await readBullmqCounts(client, prefix, ['gpu-a/llama', 'gpu-b', 'never-used']);
    expect(Object.fromEntries(counts)).toEqual({
      'gpu-a/llama': { inFlight: 2, queued: 4 },
      'gpu-b': { inFlight: 0, queued: 1 },
      'never-used': { inFlight: 0, queued: 0 },
    });
  });

  it('still counts the jobs of a paused queue as queued', async () => {
    const prefix = uniquePrefix('bullmq-counts-paused');
    const q = queueFor(prefix, 'p');
    await q.pause();
    await q.add('lease', {});
    await q.add('lease', {}, { priority: 1 });
    expect((await readBullmqCounts(client, prefix, ['p'])).get('p')).toEqual({ inFlight: 0, queued: 2 });
  });

  it('creates no keys (read-only) and answers an empty map for no providers', async () => {
    const prefix = uniquePrefix('bullmq-counts-ro');
    expect((await readBullmqCounts(client, prefix, [])).size).toBe(0);
    await readBullmqCounts(client, prefix, ['x', 'y']);
    expect(await scanKeys(redis.url, prefix)).toEqual([]);
  });

  it('rejects when Redis is unreachable', async () => {
    const dead = new Redis('redis://127.0.0.1:1', { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null });
    dead.on('error', () => undefined);
    await expect(readBullmqCounts(dead, 'x', ['p'])).rejects.toThrow();
    dead.disconnect();
  });
});
