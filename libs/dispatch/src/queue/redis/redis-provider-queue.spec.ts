import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, type TestRedis } from '../../testing';
import type { AdmissionError } from '../admission-error';
import { RedisProviderQueue } from './redis-provider-queue';
import type { RedisProviderQueueOptions } from './redis-queue-options';
import { DEFAULT_SHARD_TAG } from '../lease-keys';
import { MemoryProviderQueue } from '../memory-queue';
import { describeProviderQueueContract, waitUntil } from '../provider-queue.contract';
import {
  DEFAULT_QUEUE_CLIENT,
  type Lease,
  type LeaseRequest,
  type ProviderQueue,
  type QueueProvider,
} from '../provider-queue';
import { bandRank } from '../fair-order';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

function makeQueue(prefix: string, extra: Partial<RedisProviderQueueOptions> = {}): RedisProviderQueue {
  return new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent, ...extra });
}

describeProviderQueueContract('redis', async () => makeQueue(uniquePrefix('contract')));
// Flow control off: the fleet's only client, whose counts and virtual times the scripts skip, decides alike.
describeProviderQueueContract('redis, solo client', async () => makeQueue(uniquePrefix('solo')), {
  client: { ...DEFAULT_QUEUE_CLIENT, solo: true },
});

const provider = (providerId: string, maxConcurrency: number, maxQueued = 1000): QueueProvider => ({
  providerId,
  maxConcurrency,
  maxQueued,
});
const request = (candidates: QueueProvider[], extra: Partial<LeaseRequest> = {}): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates,
  maxWaitMs: 10_000,
  ...extra,
});

/** Fires `n` acquireLease calls at once over `queues` (round robin); resolves granted leases, queued promises and refusals. */
async function burst(queues: ProviderQueue[], n: number, candidates: QueueProvider[], maxWaitMs = 20_000) {
  const granted: Lease[] = [];
  const refused: string[] = [];
  const all = Array.from({ length: n }, (_, i) =>
    queues[i % queues.length].acquireLease(request(candidates, { maxWaitMs })).then(
      (lease) => void granted.push(lease),
      (e: AdmissionError) => void refused.push(e.code),
    ),
  );
  return { granted, refused, all };
}

describe('RedisProviderQueue admission is one atomic step', () => {
  const open: ProviderQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });

  /** Providers a (max 2) and b (max 3), max_queued 50, one model; `n` requests at once; counts once all are placed. */
  async function placement(queues: ProviderQueue[], n: number) {
    const a = provider('a', 2, 50);
    const b = provider('b', 3, 50);
    await Promise.all(queues.map((q) => q.configure([a, b])));
    const { granted, refused } = await burst(queues, n, [a, b]);
    const admitted = Math.min(n, 105);
    await waitUntil(() => refused.length === n - admitted, 5000, `${n - admitted} refusals`);
    await waitUntil(
      async () => {
        const c = await queues[0].counts(['a', 'b']);
        return c.get('a')!.inFlight + c.get('a')!.queued + c.get('b')!.inFlight + c.get('b')!.queued === admitted;
      },
      5000,
      'every admitted request to be counted',
    );
    const counts = Object.fromEntries([...(await queues[0].counts(['a', 'b']))]);
    const result = { counts, granted: granted.length, refused: [...refused] };
    for (const q of queues) await q.close();
    return result;
  }

  it('gives a burst of 120 into one replica exactly what the memory backend gives: 2+50, 3+50, 15 × queue_full', async () => {
    const memory = await placement([new MemoryProviderQueue()], 120);
    const q = makeQueue(uniquePrefix('burst120'));
    open.push(q);
    const redisResult = await placement([q], 120);
    expect(memory.counts).toEqual({ a: { inFlight: 2, queued: 50 }, b: { inFlight: 3, queued: 50 } });
    expect(redisResult.counts).toEqual(memory.counts);
    expect(redisResult.refused).toEqual(Array(15).fill('queue_full'));
    expect(redisResult.granted).toBe(5);
  });

  it('places a burst of 30 least-loaded as the memory backend does (10 and 15 queued), on one replica and across three', async () => {
    const memory = await placement([new MemoryProviderQueue()], 30);
    expect(memory.counts).toEqual({ a: { inFlight: 2, queued: 10 }, b: { inFlight: 3, queued: 15 } });
    const one = makeQueue(uniquePrefix('burst30'));
    open.push(one);
    expect((await placement([one], 30)).counts).toEqual(memory.counts);
    const prefix = uniquePrefix('burst30x3');
    const three = [makeQueue(prefix), makeQueue(prefix), makeQueue(prefix)];
    open.push(...three);
    expect((await placement(three, 30)).counts).toEqual(memory.counts);
  });

  it('admits exactly 1 running + 1 queued of 6 simultaneous requests over 3 replicas (max_concurrency 1, max_queued 1)', async () => {
    const prefix = uniquePrefix('tiny');
    const queues = [makeQueue(prefix), makeQueue(prefix), makeQueue(prefix)];
    open.push(...queues);
    const p = provider('p', 1, 1);
    await Promise.all(queues.map((q) => q.configure([p])));
    const { granted, refused } = await burst(queues, 6, [p]);
    await waitUntil(() => refused.length === 4, 5000, '4 refusals');
    expect(refused).toEqual(Array(4).fill('queue_full'));
    expect(granted).toHaveLength(1);
    expect((await queues[0].counts(['p'])).get('p')).toEqual({ inFlight: 1, queued: 1 });
    await granted[0].release();
    await waitUntil(() => granted.length === 2, 5000, 'the queued request to be granted');
    await granted[1].release();
  });
});

describe('RedisProviderQueue keeps BullMQ as the queue', () => {
  it("matches BullMQ's public counts: leases are active jobs, waiting requests prioritized jobs in grant order (band, then fair share)", async () => {
    const prefix = uniquePrefix('pin');
    const q = makeQueue(prefix);
    const a = provider('a', 2);
    await q.configure([a]);
    const leases = [await q.acquireLease(request([a])), await q.acquireLease(request([a]))];
    const chat = { id: 'chat', band: 5, weight: 1 };
    const waiting = [
      q.acquireLease(request([a])),
      q.acquireLease(request([a])),
      q.acquireLease(request([a], { client: chat })),
    ];
    await waitUntil(async () => (await q.counts(['a'])).get('a')?.queued === 3, 5000, '3 waiting');
    const bull = new Queue(q.keys.queueName('a'), {
      connection: { url: redis.url },
      prefix: q.keys.tagBase(DEFAULT_SHARD_TAG),
    });
    try {
      const counts = await bull.getJobCounts('active', 'wait', 'prioritized', 'delayed');
      expect(counts).toEqual({ active: 2, wait: 0, prioritized: 3, delayed: 0 });
      // queued is exactly BullMQ's wait + prioritized, in_flight its active.
      expect((await q.counts(['a'])).get('a')).toEqual({ inFlight: 2, queued: counts.wait + counts.prioritized });
      // BullMQ's priority of a job is its band's rank, and BullMQ counts the waiters per band.
      expect(await bull.getCountsPerPriority([bandRank(5), bandRank(0)])).toEqual({
        [bandRank(5)]: 1,
        [bandRank(0)]: 2,
      });
      // BullMQ lists prioritized jobs lowest score first: the order they are granted in.
      const jobs = await bull.getPrioritized();
      expect(jobs.map((j) => [j.name, j.priority, (j.data as { client: string }).client])).toEqual([
        ['lease', bandRank(5), 'chat'],
        ['lease', bandRank(0), 'anonymous'],
        ['lease', bandRank(0), 'anonymous'],
      ]);
      expect(jobs[0].data).toEqual({ origin: q.replicaId, model: 'llama', client: 'chat' });
      expect((await bull.getActive()).map((j) => j.name)).toEqual(['lease', 'lease']);
      await leases[0].release();
      const next = await waiting[2];
      expect(await bull.getJobCounts('active', 'prioritized')).toEqual({ active: 2, prioritized: 2 });
      await Promise.all([leases[1].release(), next.release()]);
      for (const w of waiting.slice(0, 2)) await (await w).release();
      expect(await bull.getJobCounts('active', 'wait', 'prioritized')).toEqual({ active: 0, wait: 0, prioritized: 0 });
    } finally {
      await bull.close();
      await q.close();
    }
  });
});

describe('RedisProviderQueue for a Redis user without Functions (README "Redis requirements")', () => {
  it('serves leases and token budgets by EVALSHA and says so once at info', async () => {
    const admin = new Redis(redis.url);
    const user = `nofn${process.pid}`;
    await admin.acl('SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', '-fcall', '-fcall_ro', '-function');
    const lines: string[] = [];
    const logger = { ...silent, info: (_: object, msg: string) => void lines.push(msg) };
    const url = new URL(redis.url);
    url.username = user;
    url.password = 'pw';
    const q = new RedisProviderQueue({ redisUrl: url.toString(), prefix: uniquePrefix('nofn'), logger });
    try {
      await q.configure([provider('a', 1)]);
      const lease = await q.acquireLease(request([provider('a', 1)]));
      expect((await q.counts(['a'])).get('a')).toEqual({ inFlight: 1, queued: 0 });
      await lease.release();
      expect((await q.counts(['a'])).get('a')).toEqual({ inFlight: 0, queued: 0 });
      // A token budget's scripts alike (their packed values, docs/architecture.md "Token budgets").
      const metered = { id: 'metered', band: 0, weight: 1, tokenBudgets: { perMinute: 1000, perDay: 5000 } };
      const weighed = request([provider('a', 1)], { client: metered, tokens: { prompt: 700, completion: 0 } });
      await (await q.acquireLease(weighed)).release({ tokens: 600, reported: true });
      const over = (await q.acquireLease(weighed).catch((e: unknown) => e)) as AdmissionError;
      expect(over.code).toBe('rate_limit_exceeded');
      expect((await q.clientBudgets([metered])).map((w) => [w.window, w.usedTokens, w.remainingTokens])).toEqual([
        ['minute', 600, 400],
        ['day', 600, 4400],
      ]);
      expect(lines.filter((l) => l.includes('lease scripts run by EVALSHA'))).toEqual([
        'redis queue: the Redis user may not use FCALL or FUNCTION LOAD: lease scripts run by EVALSHA (README "Redis requirements")',
      ]);
    } finally {
      await q.close();
      await admin.acl('DELUSER', user);
      admin.disconnect();
    }
  });
});
