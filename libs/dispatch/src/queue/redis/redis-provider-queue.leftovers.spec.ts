import { Redis } from 'ioredis';
import { startRedis, startTcpProxy, uniquePrefix, waitUntil, type TcpProxy, type TestRedis } from '../../testing';
import type { AdmissionError } from '../admission-error';
import { DEFAULT_SHARD_TAG } from '../lease-keys';
import { LeaseStore, readLeaseCounts } from '../lease-store';
import type { Lease, LeaseRequest, QueueProvider } from '../provider-queue';
import { RedisProviderQueue } from './redis-provider-queue';
import type { RedisProviderQueueOptions } from './redis-queue-options';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let redis: TestRedis;
let proxy: TcpProxy;
let reader: Redis;
beforeAll(async () => {
  redis = await startRedis({ forceOwn: true });
  proxy = await startTcpProxy(redis.port ?? 0);
  reader = new Redis(redis.url);
});
afterAll(async () => {
  reader?.disconnect();
  await proxy?.close();
  await redis?.stop();
});

const provider = (providerId: string, maxConcurrency: number, maxQueued = 100): QueueProvider => ({
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
const stored = (providers: QueueProvider[]) => providers.map((p) => ({ ...p, shardTag: DEFAULT_SHARD_TAG }));

describe('RedisProviderQueue: a command whose answer comes too late leaves no job in Redis', () => {
  const open: RedisProviderQueue[] = [];
  afterEach(async () => {
    proxy.releaseReplies();
    proxy.swallowRequests(false);
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  /** A replica that talks to Redis through the proxy (`late`) or directly. */
  const make = (prefix: string, late: boolean, extra: Partial<RedisProviderQueueOptions> = {}) => {
    const q = new RedisProviderQueue({ redisUrl: late ? proxy.url : redis.url, prefix, logger: silent, ...extra });
    open.push(q);
    return q;
  };
  const counts = (prefix: string, providers: QueueProvider[]) => readLeaseCounts(reader, prefix, stored(providers));
  const allFree = async (prefix: string, providers: QueueProvider[]) =>
    [...(await counts(prefix, providers)).values()].every((c) => c.inFlight === 0 && c.queued === 0);
  /** `acquireLease` with every reply held back until it failed; resolves the error. */
  const acquireWithLateReplies = async (q: RedisProviderQueue, r: LeaseRequest, exceptSubscribers = false) => {
    proxy.holdReplies({ exceptSubscribers });
    const error = (await q.acquireLease(r).catch((e: unknown) => e)) as AdmissionError;
    return error;
  };

  it('admit: a lease granted by a script whose reply came after the command timeout is freed once Redis answers', async () => {
    const prefix = uniquePrefix('late-admit');
    const p = provider('p', 2);
    const victim = make(prefix, true);
    await victim.configure([p]);
    // Loads the admission script, so the late one runs (an unknown script would answer NOSCRIPT, held too).
    await (await victim.acquireLease(request([p]))).release();
    const startedAt = Date.now();
    const error = await acquireWithLateReplies(victim, request([p]));
    expect(error.code).toBe('queue_unavailable');
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(900);
    // The script ran: Redis granted the lease that nobody holds.
    expect((await counts(prefix, [p])).get('p')).toEqual({ inFlight: 1, queued: 0 });
    proxy.releaseReplies();
    await waitUntil(() => allFree(prefix, [p]), 3000, 'the lease of the failed admission to be settled');
    expect((await victim.counts(['p'])).get('p')).toEqual({ inFlight: 0, queued: 0 });
    const leases = [await victim.acquireLease(request([p])), await victim.acquireLease(request([p]))];
    for (const l of leases) await l.release();
  });

  it('admit: a job queued by a script whose reply came late and granted later on a non-first candidate is freed', async () => {
    const prefix = uniquePrefix('late-queued');
    const [a, b] = [provider('a', 1), provider('b', 1)];
    const victim = make(prefix, true);
    const other = make(prefix, false);
    await Promise.all([victim.configure([a, b]), other.configure([a, b])]);
    const held = { a: await other.acquireLease(request([a])), b: await other.acquireLease(request([b])) };
    expect((await acquireWithLateReplies(victim, request([a, b]))).code).toBe('queue_unavailable');
    expect((await counts(prefix, [a])).get('a')).toEqual({ inFlight: 1, queued: 1 });
    // b frees first: the job waiting on a is granted on b, the second candidate.
    await held.b.release();
    await waitUntil(async () => (await counts(prefix, [b])).get('b')?.inFlight === 1, 3000, 'the grant on b');
    expect((await counts(prefix, [a])).get('a')).toEqual({ inFlight: 1, queued: 0 });
    proxy.releaseReplies();
    await waitUntil(async () => (await counts(prefix, [b])).get('b')?.inFlight === 0, 3000, 'the lease on b settled');
    await held.a.release();
    await waitUntil(() => allFree(prefix, [a, b]), 3000, 'every lease released');
  });

  it('confirm: a grant whose confirmation got no answer in time is freed once Redis answers', async () => {
    const prefix = uniquePrefix('late-confirm');
    const p = provider('p', 1);
    const victim = make(prefix, true);
    const other = make(prefix, false);
    await Promise.all([victim.configure([p]), other.configure([p])]);
    const held = await other.acquireLease(request([p]));
    const waiting = victim.acquireLease(request([p])).catch((e: AdmissionError) => e);
    await waitUntil(async () => (await counts(prefix, [p])).get('p')?.queued === 1, 3000, 'the victim to queue');
    // The grant message still arrives (its subscriber is not held); the confirmation's reply does not.
    proxy.holdReplies({ exceptSubscribers: true });
    await held.release();
    const error = await waiting;
    expect(error).toMatchObject({ code: 'queue_unavailable' });
    expect((await counts(prefix, [p])).get('p')).toEqual({ inFlight: 1, queued: 0 });
    proxy.releaseReplies();
    await waitUntil(() => allFree(prefix, [p]), 3000, 'the confirmed lease to be settled');
  });

  it('release: a lease whose release never reached Redis, of a replica that restarted under the same id, is freed', async () => {
    const prefix = uniquePrefix('lost-release');
    const p = provider('p', 1);
    const before = make(prefix, true, { replicaId: 'gw-1' });
    await before.configure([p]);
    const lease = await before.acquireLease(request([p]));
    proxy.swallowRequests(true);
    await lease.release();
    await before.close();
    proxy.swallowRequests(false);
    expect((await counts(prefix, [p])).get('p')).toEqual({ inFlight: 1, queued: 0 });
    // The same replica id again (a graceful restart): alive, so never swept as dead.
    const after = make(prefix, false, { replicaId: 'gw-1' });
    await after.configure([p]);
    // Granted once the lost lease is reaped (it expired while the old process closed).
    const next: Lease = await after.acquireLease(request([p], { maxWaitMs: 8000 }));
    expect((await counts(prefix, [p])).get('p')).toEqual({ inFlight: 1, queued: 0 });
    await next.release();
  });
});

describe('RedisProviderQueue: expired leases', () => {
  const open: RedisProviderQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  const make = (prefix: string) => {
    const q = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent });
    open.push(q);
    return q;
  };

  it('reaps an expired lease that names a live replica which does not hold it, within leaseTtl + grace + sweepInterval', async () => {
    const prefix = uniquePrefix('reap');
    const p = provider('p', 1);
    const live = make(prefix);
    await live.configure([p]);
    const store = new LeaseStore(reader, prefix, 2000);
    const seededAt = Date.now();
    await store.admit(DEFAULT_SHARD_TAG, ['p'], `${live.replicaId}.1`, '{}');
    expect((await live.counts(['p'])).get('p')?.inFlight).toBe(1);
    await waitUntil(async () => (await live.counts(['p'])).get('p')?.inFlight === 0, 5000, 'the lease to be reaped');
    const reapedMs = Date.now() - seededAt;
    expect(reapedMs).toBeGreaterThanOrEqual(2000);
    expect(reapedMs).toBeLessThan(2000 + 200 + 500 + 300);
  });

  it("keeps a stalled holder's slot (timers stopped, connections open) until it resumes and fences itself", async () => {
    const prefix = uniquePrefix('reap-stalled');
    const p = provider('p', 1);
    const [stalled, other] = [make(prefix), make(prefix)];
    await Promise.all([stalled.configure([p]), other.configure([p])]);
    const lease = await stalled.acquireLease(request([p]));
    let granted: Lease | undefined;
    const waiting = other.acquireLease(request([p], { maxWaitMs: 15_000 })).then((l) => (granted = l));
    await waitUntil(async () => (await other.counts(['p'])).get('p')?.queued === 1, 3000, 'a waiting request');
    const resume = stalled.simulateStall();
    // Past the lease's expiry, its grace and several sweeps: the stalled holder's slot stays taken.
    await new Promise((r) => setTimeout(r, 4000));
    expect(granted).toBeUndefined();
    expect(lease.signal.aborted).toBe(false);
    expect((await other.counts(['p'])).get('p')).toEqual({ inFlight: 1, queued: 1 });
    resume();
    await waitUntil(() => lease.signal.aborted, 1000, 'the resumed holder to fence its lease');
    // Fenced, the slot is handed on only when the caller releases it, once the upstream has seen the
    // aborted call's close (docs/architecture.md, "Fencing").
    await new Promise((r) => setTimeout(r, 1000));
    expect(granted).toBeUndefined();
    await lease.release();
    await waiting;
    expect(granted?.providerId).toBe('p');
    await granted?.release();
  }, 20_000);
});
