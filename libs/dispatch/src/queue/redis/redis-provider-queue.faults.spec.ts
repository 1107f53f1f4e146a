import { Redis } from 'ioredis';
import { commandsSinceReset, scanKeys, startRedis, uniquePrefix, type TestRedis } from '../../testing';
import type { AdmissionError } from '../admission-error';
import { RedisProviderQueue } from './redis-provider-queue';
import type { RedisProviderQueueOptions } from './redis-queue-options';
import { DEFAULT_SHARD_TAG } from '../lease-keys';
import { readLeaseCounts } from '../lease-store';
import { waitUntil } from '../provider-queue.contract';
import type { Lease, LeaseRequest, QueueProvider } from '../provider-queue';

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

describe('RedisProviderQueue fencing and dead replicas', () => {
  const open: RedisProviderQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  const busyWait = (ms: number) => {
    const until = performance.now() + ms;
    while (performance.now() < until) {
      // a blocked event loop, as a long synchronous task would cause
    }
  };

  it('frees the slots of a replica that died within 3 s, and serves a request waiting on another replica', async () => {
    const prefix = uniquePrefix('crash');
    const [dying, alive] = [makeQueue(prefix), makeQueue(prefix)];
    open.push(dying, alive);
    const p = provider('p', 2);
    await Promise.all([dying.configure([p]), alive.configure([p])]);
    await dying.acquireLease(request([p]));
    await dying.acquireLease(request([p]));
    let granted: Lease | undefined;
    const waiting = alive.acquireLease(request([p])).then((l) => (granted = l));
    await waitUntil(async () => (await alive.counts(['p'])).get('p')?.queued === 1, 5000, 'a waiting request');
    const killedAt = Date.now();
    await dying.simulateCrash();
    await waiting;
    const recoveredMs = Date.now() - killedAt;
    expect(recoveredMs).toBeLessThanOrEqual(3000);
    await waitUntil(
      async () => (await alive.counts(['p'])).get('p')?.inFlight === 1,
      3000,
      'only the new lease in flight',
    );
    await granted!.release();
  });

  it('loses no lease when its event loop is blocked for 1 s', async () => {
    const prefix = uniquePrefix('block');
    const warnings: string[] = [];
    const q = makeQueue(prefix, { logger: { ...silent, warn: (_o, m) => warnings.push(m) } });
    open.push(q);
    const p = provider('p', 1);
    await q.configure([p]);
    const lease = await q.acquireLease(request([p]));
    await new Promise((r) => setTimeout(r, 600));
    busyWait(1000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(lease.signal.aborted).toBe(false);
    expect(warnings).toEqual([]);
    expect((await q.counts(['p'])).get('p')).toEqual({ inFlight: 1, queued: 0 });
    await lease.release();
  });

  it('aborts a lease it could not renew in time, with a warning naming the provider, and keeps its slot until its caller releases it', async () => {
    const prefix = uniquePrefix('fence');
    const warnings: string[] = [];
    const q = makeQueue(prefix, { logger: { ...silent, warn: (_o, m) => warnings.push(m) } });
    const other = makeQueue(prefix);
    open.push(q, other);
    const p = provider('gpu-a-llama', 1);
    await Promise.all([q.configure([p]), other.configure([p])]);
    const lease = await q.acquireLease(request([p]));
    let abortedAt: number | undefined;
    lease.signal.addEventListener('abort', () => (abortedAt = Date.now()));
    busyWait(2500);
    // The stalled holder's connections stay open, so Redis keeps the slot: nobody else is granted it meanwhile.
    expect((await other.counts([p.providerId])).get(p.providerId)?.inFlight).toBe(1);
    await waitUntil(() => abortedAt !== undefined, 1000, 'the lease to be fenced');
    expect(warnings.some((w) => w.includes('"gpu-a-llama"') && w.includes('aborting its upstream call'))).toBe(true);
    // Fenced, the lease stays held (and renewed) until its caller releases it, once the upstream has
    // seen the aborted call's close (docs/architecture.md, "Fencing"): past a lease lifetime, still taken.
    await new Promise((r) => setTimeout(r, 2500));
    expect((await other.counts([p.providerId])).get(p.providerId)?.inFlight).toBe(1);
    await lease.release();
    expect((await other.counts([p.providerId])).get(p.providerId)?.inFlight).toBe(0);
  });

  it('releases a fenced lease its caller never releases after fencedCloseLimitMs, with a warning', async () => {
    const prefix = uniquePrefix('fence-give-up');
    const warnings: string[] = [];
    const q = makeQueue(prefix, { fencedCloseLimitMs: 300, logger: { ...silent, warn: (_o, m) => warnings.push(m) } });
    open.push(q);
    const p = provider('p', 1);
    await q.configure([p]);
    const lease = await q.acquireLease(request([p]));
    busyWait(2000);
    await waitUntil(() => lease.signal.aborted, 1000, 'the lease to be fenced');
    await waitUntil(async () => (await q.counts(['p'])).get('p')?.inFlight === 0, 2000, 'the fenced lease released');
    expect(warnings.some((w) => w.includes('not released by its caller within 300 ms'))).toBe(true);
  });

  it('costs at most 25 Redis commands per pooled request, scripts and their inner commands counted', async () => {
    const own = await startRedis({ forceOwn: true });
    const q = new RedisProviderQueue({ redisUrl: own.url, prefix: uniquePrefix('cost'), logger: silent });
    const admin = new Redis(own.url);
    try {
      const [a, b] = [provider('a', 4), provider('b', 4)];
      await q.configure([a, b]);
      await (await q.acquireLease(request([a, b]))).release();
      await admin.config('RESETSTAT');
      const n = 200;
      for (let i = 0; i < n; i++) await (await q.acquireLease(request([a, b]))).release();
      const total = await commandsSinceReset(admin);
      process.stdout.write(`Redis commands per pooled request (2 candidates, no wait): ${(total / n).toFixed(1)}\n`);
      expect(total / n).toBeLessThanOrEqual(25);
    } finally {
      await q.close();
      admin.disconnect();
      await own.stop();
    }
  });
});

describe('RedisProviderQueue when Redis fails', () => {
  let own: TestRedis;
  const open: RedisProviderQueue[] = [];
  beforeEach(async () => {
    own = await startRedis({ forceOwn: true });
  });
  afterEach(async () => {
    try {
      await Promise.all(open.splice(0).map((q) => q.close()));
    } finally {
      await own.stop();
    }
  }, 15_000);
  const make = (prefix: string, extra: Partial<RedisProviderQueueOptions> = {}) => {
    const q = new RedisProviderQueue({ redisUrl: own.url, prefix, logger: silent, ...extra });
    open.push(q);
    return q;
  };

  it('answers queue_unavailable within 1 s while Redis is down and recovers without a restart', async () => {
    const a = provider('a', 1);
    const queue = make(uniquePrefix('outage'));
    await queue.configure([a]);
    await (await queue.acquireLease(request([a]))).release();
    await own.kill();
    const started = Date.now();
    const error = await queue.acquireLease(request([a])).catch((e: unknown) => e);
    expect((error as AdmissionError).code).toBe('queue_unavailable');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(await queue.isReady()).toBe(false);
    await expect(queue.counts(['a'])).rejects.toMatchObject({ code: 'queue_unavailable' });
    await own.start();
    await waitUntil(() => queue.isReady(), 10_000, 'the queue to reconnect');
    const lease = await queue.acquireLease(request([a], { maxWaitMs: 5000 }));
    expect((await queue.counts(['a'])).get('a')).toEqual({ inFlight: 1, queued: 0 });
    await lease.release();
  });

  it('fails a queued request with queue_unavailable once Redis has been silent for the fencing limit, not at max_wait_ms', async () => {
    const a = provider('a', 1);
    const queue = make(uniquePrefix('outage-waiter'));
    await queue.configure([a]);
    const lease = await queue.acquireLease(request([a]));
    const waiting = queue.acquireLease(request([a], { maxWaitMs: 20_000 })).catch((e: unknown) => e);
    await waitUntil(async () => (await queue.counts(['a'])).get('a')?.queued === 1, 5000, 'a waiting request');
    await own.kill();
    const started = Date.now();
    const error = (await waiting) as AdmissionError;
    expect(error.code).toBe('queue_unavailable');
    expect(error.message).toMatch(/Redis has not answered for \d+ ms while the request waited in the queue/);
    // Fencing limit 1.8 s after the last answer (renewed every 0.5 s), found by the next poll.
    expect(Date.now() - started).toBeLessThan(3500);
    await lease.release();
  }, 15_000);

  it('closes without hanging while Redis is down, failing its waiting requests', async () => {
    const a = provider('a', 1);
    const queue = make(uniquePrefix('close-down'));
    await queue.configure([a]);
    const lease = await queue.acquireLease(request([a]));
    const waiting = queue.acquireLease(request([a])).catch((e: unknown) => e);
    await waitUntil(async () => (await queue.counts(['a'])).get('a')?.queued === 1, 5000, 'a waiting request');
    await own.kill();
    await waitUntil(async () => !(await queue.isReady()), 2000, 'the outage to be seen');
    const started = Date.now();
    await queue.close();
    expect(Date.now() - started).toBeLessThan(3000);
    expect(((await waiting) as AdmissionError).code).toBe('queue_unavailable');
    await lease.release();
  }, 15_000);

  it('keeps the limit after Redis restarts without persistence while leases are held and a request waits', async () => {
    const a = provider('a', 2);
    const prefix = uniquePrefix('restart');
    const warnings: string[] = [];
    const opts = { logger: { ...silent, warn: (_o: object, m: string) => warnings.push(m) } };
    const first = make(prefix, opts);
    const second = make(prefix, opts);
    await first.configure([a]);
    await second.configure([a]);
    const held = [await first.acquireLease(request([a])), await first.acquireLease(request([a]))];
    await own.kill();
    await own.start();
    await waitUntil(
      async () => (await first.isReady()) && (await second.isReady()),
      10_000,
      'both replicas to reconnect',
    );
    await waitUntil(
      async () => (await second.counts(['a']).catch(() => undefined))?.get('a')?.inFlight === 2,
      5000,
      'the running leases to be registered again',
    ).catch((e: Error) => {
      throw new Error(`${e.message}; warnings: ${warnings.join(' | ')}`);
    });
    expect(warnings.some((w) => w.includes('Redis restarted'))).toBe(true);
    let extra: Lease | undefined;
    const waiting = second.acquireLease(request([a], { maxWaitMs: 10_000 })).then((l) => (extra = l));
    await waitUntil(async () => (await second.counts(['a'])).get('a')?.queued === 1, 5000, 'the new request to queue');
    await new Promise((r) => setTimeout(r, 3500));
    expect(extra).toBeUndefined();
    expect(held.every((l) => !l.signal.aborted)).toBe(true);
    expect((await second.counts(['a'])).get('a')).toEqual({ inFlight: 2, queued: 1 });
    await held[0].release();
    await waiting;
    expect(extra?.providerId).toBe('a');
    await extra!.release();
    await held[1].release();
    await waitUntil(async () => (await first.counts(['a'])).get('a')?.inFlight === 0, 5000, 'every lease released');
  }, 30_000);

  it('closes cleanly: waiting requests fail, leases are released, no key of a job is left in Redis', async () => {
    const a = provider('a', 1);
    const prefix = uniquePrefix('close');
    const queue = make(prefix);
    await queue.configure([a]);
    await queue.acquireLease(request([a]));
    const waiting = queue.acquireLease(request([a])).catch((e: AdmissionError) => e.code);
    await waitUntil(async () => (await queue.counts(['a'])).get('a')?.queued === 1, 5000, 'a waiting request');
    await queue.close();
    expect(await waiting).toBe('queue_unavailable');
    const keys = await scanKeys(own.url, prefix);
    expect(keys.filter((k) => /provider\.a:[^:]+\.\d+$/.test(k))).toEqual([]);
    const reader = new Redis(own.url);
    expect(await readLeaseCounts(reader, prefix, [{ providerId: 'a', shardTag: DEFAULT_SHARD_TAG }])).toEqual(
      new Map([['a', { inFlight: 0, queued: 0 }]]),
    );
    reader.disconnect();
  });
});
