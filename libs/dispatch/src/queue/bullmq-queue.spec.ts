import { startRedis, uniquePrefix, type TestRedis } from '../testing';
import { BullmqProviderQueue } from './bullmq-queue';
import type { BullmqProviderQueueOptions } from './bullmq-options';
import { describeProviderQueueContract, waitUntil } from './provider-queue.contract';
import type { AdmissionError } from './admission-error';
import type { Lease, LeaseRequest, QueueProvider } from './provider-queue';
import type { Redis } from 'ioredis';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

function makeQueue(prefix: string, extra: Partial<BullmqProviderQueueOptions> = {}): BullmqProviderQueue {
  return new BullmqProviderQueue({ redisUrl: redis.url, prefix, logger: silent, ...extra });
}

describeProviderQueueContract('bullmq', async () => makeQueue(uniquePrefix('contract')));

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
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Counts leases in use per provider, as the upstream would see them, and remembers the peak. */
class UsageMeter {
  private readonly now = new Map<string, number>();
  readonly peak = new Map<string, number>();
  enter(id: string): void {
    const n = (this.now.get(id) ?? 0) + 1;
    this.now.set(id, n);
    this.peak.set(id, Math.max(n, this.peak.get(id) ?? 0));
  }
  leave(id: string): void {
    this.now.set(id, (this.now.get(id) ?? 0) - 1);
  }
}

/** Several replicas on one Redis prefix, closed after each test. */
async function replicas(n: number, providers: QueueProvider[], extra: Partial<BullmqProviderQueueOptions> = {}) {
  const prefix = uniquePrefix('replicas');
  const queues = Array.from({ length: n }, () => makeQueue(prefix, extra));
  await Promise.all(queues.map((q) => q.configure(providers)));
  return { prefix, queues };
}

describe('BullmqProviderQueue across replicas', () => {
  const open: BullmqProviderQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  const track = <T extends { queues: BullmqProviderQueue[] }>(group: T): T => {
    open.push(...group.queues);
    return group;
  };

  it('keeps in_flight at or below max_concurrency summed over three replicas under concurrent load', async () => {
    const a = provider('a', 3);
    const b = provider('b', 2);
    const { queues } = track(await replicas(3, [a, b]));
    const meter = new UsageMeter();
    const jobs = Array.from({ length: 90 }, async (_, i) => {
      const lease = await queues[i % 3].acquireLease(request(i % 2 ? [a, b] : [b, a]));
      meter.enter(lease.providerId);
      await pause(2 + (i % 7) * 2);
      meter.leave(lease.providerId);
      await lease.release();
    });
    await Promise.all(jobs);
    expect(meter.peak.get('a')).toBeLessThanOrEqual(3);
    expect(meter.peak.get('b')).toBeLessThanOrEqual(2);
    expect(meter.peak.get('a')).toBe(3); // the pool was really saturated
    await waitUntil(async () => {
      const c = await queues[0].counts(['a', 'b']);
      return [...c.values()].every((x) => x.inFlight === 0 && x.queued === 0);
    }, 5000, 'every lease released');
  });

  it('never exceeds the limit when short deadlines race grants under load, and leaves nothing queued', async () => {
    const a = provider('a', 2);
    const { queues } = track(await replicas(3, [a]));
    const meter = new UsageMeter();
    const outcomes = { granted: 0, timedOut: 0 };
    await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        try {
          const lease = await queues[i % 3].acquireLease(request([a], { maxWaitMs: 5 + (i % 10) * 5 }));
          outcomes.granted++;
          meter.enter('a');
          await pause(3 + (i % 5) * 3);
          meter.leave('a');
          await lease.release();
        } catch (e) {
          expect((e as AdmissionError).code).toBe('queue_timeout');
          outcomes.timedOut++;
        }
      }),
    );
    expect(meter.peak.get('a')).toBeLessThanOrEqual(2);
    expect(outcomes.granted).toBeGreaterThan(0);
    expect(outcomes.timedOut).toBeGreaterThan(0);
    await waitUntil(async () => {
      const c = (await queues[1].counts(['a'])).get('a');
      return c?.inFlight === 0 && c.queued === 0;
    }, 5000, 'no lease or job left');
  });

  it('recovers a lost grant message from the job state', async () => {
    const a = provider('a', 1);
    const { queues } = track(await replicas(1, [a], { grantPollMs: 50 }));
    // Deafen the origin: grant messages are lost, only the job state can tell it.
    const internals = queues[0] as unknown as { subscriber: Redis; keys: { grantChannel(id: string): string } };
    await internals.subscriber.unsubscribe(internals.keys.grantChannel(queues[0].replicaId));
    const lease = await queues[0].acquireLease(request([a], { maxWaitMs: 3000 }));
    expect(lease.providerId).toBe('a');
    expect((await queues[0].counts(['a'])).get('a')).toEqual({ inFlight: 1, queued: 0 });
    await lease.release();
    await waitUntil(async () => (await queues[0].counts(['a'])).get('a')?.inFlight === 0, 5000, 'release');
  });

  /** Makes an origin deaf to grant messages, with a slow poll: only the deadline or abort path can see a grant. */
  async function deafOrigin(a: QueueProvider): Promise<BullmqProviderQueue> {
    const { queues } = track(await replicas(1, [a], { grantPollMs: 60_000 }));
    const internals = queues[0] as unknown as { subscriber: Redis; keys: { grantChannel(id: string): string } };
    await internals.subscriber.unsubscribe(internals.keys.grantChannel(queues[0].replicaId));
    return queues[0];
  }

  it('uses a lease granted while its deadline removes the job, instead of leaking or double-using it', async () => {
    const a = provider('a', 1);
    const queue = await deafOrigin(a);
    const lease = await queue.acquireLease(request([a], { maxWaitMs: 300 }));
    expect(lease.providerId).toBe('a');
    expect((await queue.counts(['a'])).get('a')).toEqual({ inFlight: 1, queued: 0 });
    await lease.release();
    await waitUntil(async () => (await queue.counts(['a'])).get('a')?.inFlight === 0, 5000, 'the used lease to be released');
  });

  it('releases a lease granted to a request whose client aborted', async () => {
    const a = provider('a', 1);
    const queue = await deafOrigin(a);
    const abort = new AbortController();
    const waiting = queue.acquireLease(request([a], { signal: abort.signal })).catch((e: unknown) => e);
    await waitUntil(async () => (await queue.counts(['a'])).get('a')?.inFlight === 1, 5000, 'the unheard grant');
    abort.abort();
    expect(((await waiting) as AdmissionError).code).toBe('client_aborted');
    await waitUntil(async () => (await queue.counts(['a'])).get('a')?.inFlight === 0, 5000, 'the granted lease to be released');
  });

  it('moves the leases of a holder that crashed to another replica without lifting the limit', async () => {
    const a = provider('a', 2);
    const fast = { lockDurationMs: 1000, stalledIntervalMs: 500, originTtlMs: 2000, holderPollMs: 200 };
    const prefix = uniquePrefix('holder-crash');
    const holderA = makeQueue(prefix, fast);
    const origin = makeQueue(prefix, { ...fast, runWorkers: false });
    open.push(origin);
    await holderA.configure([a]);
    await origin.configure([a]);
    const leases = [await origin.acquireLease(request([a])), await origin.acquireLease(request([a]))];
    expect(holderA.heldLeaseCount).toBe(2);
    await holderA.simulateCrash();
    const holderC = makeQueue(prefix, fast);
    open.push(holderC);
    await holderC.configure([a]);
    let third: Lease | undefined;
    const waiting = origin.acquireLease(request([a])).then((l) => (third = l));
    await waitUntil(() => holderC.heldLeaseCount === 2, 8000, 'the two leases to move to the live holder');
    expect(third).toBeUndefined();
    // A second death of the holder (BullMQ's default maxStalledCount 1 would fail the jobs here and free their slots).
    await holderC.simulateCrash();
    const holderD = makeQueue(prefix, fast);
    open.push(holderD);
    await holderD.configure([a]);
    await waitUntil(() => holderD.heldLeaseCount === 2, 8000, 'the two leases to move again');
    expect(third).toBeUndefined();
    expect((await origin.counts(['a'])).get('a')).toEqual({ inFlight: 2, queued: 1 });
    await leases[0].release();
    await waiting;
    expect(third?.providerId).toBe('a');
    await third!.release();
    await leases[1].release();
    await waitUntil(async () => (await origin.counts(['a'])).get('a')?.inFlight === 0, 5000, 'all released');
  });

  it('frees the leases of an origin that crashed once its liveness key expires', async () => {
    const a = provider('a', 2);
    const fast = { lockDurationMs: 1000, stalledIntervalMs: 500, originTtlMs: 1500, holderPollMs: 200 };
    const prefix = uniquePrefix('origin-crash');
    const holder = makeQueue(prefix, fast);
    const origin = makeQueue(prefix, { ...fast, runWorkers: false });
    open.push(holder);
    await holder.configure([a]);
    await origin.configure([a]);
    await origin.acquireLease(request([a]));
    await origin.acquireLease(request([a]));
    expect((await holder.counts(['a'])).get('a')?.inFlight).toBe(2);
    const crashedAt = Date.now();
    await origin.simulateCrash();
    await waitUntil(async () => (await holder.counts(['a'])).get('a')?.inFlight === 0, 8000, 'the dead origin’s leases to free');
    expect(Date.now() - crashedAt).toBeLessThan(15_000);
  });

  it('closes cleanly: waiting requests fail, leases are released, no job is left in Redis', async () => {
    const a = provider('a', 1);
    const { queues } = track(await replicas(2, [a]));
    const [one, two] = queues;
    const lease = await one.acquireLease(request([a]));
    const waiting = one.acquireLease(request([a])).catch((e: unknown) => e);
    await waitUntil(async () => (await two.counts(['a'])).get('a')?.queued === 1, 5000, 'a waiting request');
    await one.close();
    expect(((await waiting) as AdmissionError).code).toBe('queue_unavailable');
    await lease.release(); // after close: a no-op, never throws
    await waitUntil(async () => {
      const c = (await two.counts(['a'])).get('a');
      return c?.inFlight === 0 && c.queued === 0;
    }, 5000, 'no job of the closed replica left');
    const again = await two.acquireLease(request([a]));
    await again.release();
  });
});

describe('BullmqProviderQueue when Redis fails', () => {
  let own: TestRedis;
  const open: BullmqProviderQueue[] = [];
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
  const make = (prefix: string, extra: Partial<BullmqProviderQueueOptions> = {}) => {
    const q = new BullmqProviderQueue({ redisUrl: own.url, prefix, logger: silent, ...extra });
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

  it('keeps the limit after Redis restarts without persistence while leases are held', async () => {
    const a = provider('a', 2);
    const prefix = uniquePrefix('restart');
    const warnings: string[] = [];
    const opts = { restartBarrierMs: 1000, holderPollMs: 200, grantPollMs: 100, logger: { ...silent, warn: (m: string) => warnings.push(m) } };
    const first = make(prefix, opts);
    const second = make(prefix, opts);
    await first.configure([a]);
    await second.configure([a]);
    const held = [await first.acquireLease(request([a])), await first.acquireLease(request([a]))];
    await own.kill();
    await own.start();
    await waitUntil(async () => (await first.isReady()) && (await second.isReady()), 10_000, 'both replicas to reconnect');
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
    // The old holders notice their jobs vanished (holder poll) — the limit must still count the re-registered leases.
    await waitUntil(() => first.heldLeaseCount + second.heldLeaseCount === 2, 5000, 'only re-registered jobs held');
    expect(extra).toBeUndefined();
    expect((await second.counts(['a'])).get('a')).toEqual({ inFlight: 2, queued: 1 });
    await held[0].release();
    await waiting;
    expect(extra?.providerId).toBe('a');
    await extra!.release();
    await held[1].release();
    await waitUntil(async () => (await first.counts(['a'])).get('a')?.inFlight === 0, 5000, 'every lease released');
  });
});
