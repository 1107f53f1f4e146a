import { Redis } from 'ioredis';
import { commandsSinceReset, startRedis, uniquePrefix, type TestRedis } from '../../testing';
import type { AdmissionError } from '../admission-error';
import { DEFAULT_SHARD_TAG, LeaseKeys } from '../lease-keys';
import { waitUntil } from '../provider-queue.contract';
import type { Lease, LeaseRequest, QueueClient, QueueProvider } from '../provider-queue';
import { packBudgetCharge, packBudgetState, unpackBudgetState } from './budget-hash';
import { RedisProviderQueue } from './redis-provider-queue';
import type { RedisProviderQueueOptions } from './redis-queue-options';

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

const p: QueueProvider = { providerId: 'p', maxConcurrency: 100, maxQueued: 100 };
const metered = (tokenBudgets: QueueClient['tokenBudgets'], extra: Partial<QueueClient> = {}): QueueClient => ({
  id: 'metered',
  band: 0,
  weight: 1,
  tokenBudgets,
  ...extra,
});
const request = (client: QueueClient, prompt: number, extra: Partial<LeaseRequest> = {}): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates: [p],
  maxWaitMs: 20_000,
  client,
  tokens: { prompt, completion: 0 },
  ...extra,
});
/** The budget hash of the client `metered` under `prefix` (docs/architecture.md, "Token budgets"). */
const budgetKey = (prefix: string) => new LeaseKeys(prefix).budgetKey(DEFAULT_SHARD_TAG, 'metered');
/** A bucket field's value: `charged` tokens, `reserved` of them reserved (`budget-hash.ts`). */
const charge = (charged: number, reserved = 0) => packBudgetCharge({ charged, reserved });
/** Redis's own clock, ms. */
const redisNow = async () => {
  const [s, us] = await admin.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
};

// docs/architecture.md, "Token budgets": exact across replicas, on Redis time, given back on every path
// that ends a lease or a waiter nobody released.
describe('RedisProviderQueue token budgets across replicas', () => {
  const open: RedisProviderQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });
  const makeQueue = (prefix: string, extra: Partial<RedisProviderQueueOptions> = {}) => {
    const q = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent, ...extra });
    open.push(q);
    return q;
  };

  it('shares one budget exactly between two replicas under a burst', async () => {
    const prefix = uniquePrefix('budget-burst');
    const replicas = [makeQueue(prefix), makeQueue(prefix)];
    await Promise.all(replicas.map((q) => q.configure([p])));
    const c = metered({ perMinute: 1000 });
    const granted: Lease[] = [];
    const refused: AdmissionError[] = [];
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        replicas[i % 2].acquireLease(request(c, 100)).then(
          (l) => void granted.push(l),
          (e: AdmissionError) => void refused.push(e),
        ),
      ),
    );
    expect(granted).toHaveLength(10);
    expect(refused.map((e) => e.code)).toEqual(Array(20).fill('rate_limit_exceeded'));
    const [w] = await replicas[1].clientBudgets([c]);
    expect(w).toMatchObject({ reservedTokens: 1000, usedTokens: 0, remainingTokens: 0 });
    await Promise.all(granted.map((l, i) => l.release({ tokens: i * 10, reported: true })));
    expect((await replicas[0].clientBudgets([c]))[0]).toMatchObject({ reservedTokens: 0, usedTokens: 450 });
  });

  it("gives a dead replica's reservations back (its lease and its waiter) once the sweep frees them", async () => {
    const prefix = uniquePrefix('budget-crash');
    const [dying, alive] = [makeQueue(prefix), makeQueue(prefix)];
    const one: QueueProvider = { ...p, maxConcurrency: 1 };
    await Promise.all([dying.configure([one]), alive.configure([one])]);
    const c = metered({ perMinute: 1000, perDay: 100_000 });
    await dying.acquireLease({ ...request(c, 500), candidates: [one] });
    void dying.acquireLease({ ...request(c, 300), candidates: [one] }).catch(() => undefined);
    await waitUntil(async () => (await alive.counts(['p'])).get('p')?.queued === 1, 5000, 'the waiter to queue');
    expect((await alive.clientBudgets([c])).map((w) => w.reservedTokens)).toEqual([800, 800]);
    const killedAt = Date.now();
    await dying.simulateCrash();
    await waitUntil(
      async () => (await alive.clientBudgets([c])).every((w) => w.reservedTokens === 0),
      5000,
      'the reservations back',
    );
    expect(Date.now() - killedAt).toBeLessThanOrEqual(3000);
    expect((await alive.clientBudgets([c])).map((w) => [w.usedTokens, w.remainingTokens])).toEqual([
      [0, 1000],
      [0, 100_000],
    ]);
    const whole = await alive.acquireLease({ ...request(c, 1000), candidates: [one] });
    await whole.release();
  });

  it('charges a fenced lease its reservation: the used tokens of its release after the fence are not read', async () => {
    const prefix = uniquePrefix('budget-fence');
    const [q, other] = [makeQueue(prefix), makeQueue(prefix)];
    await Promise.all([q.configure([p]), other.configure([p])]);
    const c = metered({ perMinute: 1000 });
    const lease = await q.acquireLease(request(c, 400));
    let aborted = false;
    lease.signal.addEventListener('abort', () => (aborted = true));
    const until = performance.now() + 2500;
    while (performance.now() < until) {
      // a blocked event loop: the lease is not renewed and fences itself
    }
    await waitUntil(() => aborted, 1000, 'the lease to be fenced');
    // The caller releases a fenced lease once the upstream has seen the close (docs/architecture.md, "Fencing").
    expect((await other.clientBudgets([c]))[0]).toMatchObject({ usedTokens: 0, reservedTokens: 400 });
    await lease.release({ tokens: 5, reported: false });
    expect((await other.clientBudgets([c]))[0]).toMatchObject({ usedTokens: 400, reservedTokens: 0 });
    await lease.release({ tokens: 5, reported: false });
    expect((await other.clientBudgets([c]))[0]).toMatchObject({ usedTokens: 400, reservedTokens: 0 });
  });

  it("keeps the sums exact when a request sheds its own client's waiter (a reload raised the client's band)", async () => {
    // admit.lua reads the budget, then the shed gives the waiter's reservation back, then it reserves.
    const q = makeQueue(uniquePrefix('budget-self-shed'));
    const one: QueueProvider = { ...p, maxConcurrency: 1, maxQueued: 1 };
    await q.configure([one]);
    const low = metered({ perMinute: 5000, perDay: 100_000 }, { band: -1 });
    const holder = await q.acquireLease({ ...request({ id: 'chat', band: 5, weight: 1 }, 0), candidates: [one] });
    const shed = q.acquireLease({ ...request(low, 700), candidates: [one] }).catch((e: AdmissionError) => e);
    await waitUntil(async () => (await q.counts(['p'])).get('p')?.queued === 1, 5000, 'the waiter to queue');
    const high = { ...low, band: 5 };
    const newcomer = q.acquireLease({ ...request(high, 300), candidates: [one] });
    expect(((await shed) as AdmissionError).code).toBe('queue_full');
    expect((await q.clientBudgets([high])).map((w) => [w.reservedTokens, w.usedTokens])).toEqual([
      [300, 0],
      [300, 0],
    ]);
    await holder.release();
    await (await newcomer).release({ tokens: 50, reported: true });
    expect((await q.clientBudgets([high])).map((w) => [w.reservedTokens, w.usedTokens])).toEqual([
      [0, 50],
      [0, 50],
    ]);
  });

  // README "Token budgets": a budget bounds what the requests in any minute used, requests longer
  // than the window included: the reservation is held while the lease runs, however old, and the
  // tokens used are charged at release, on Redis time, in the windows that contain it.
  it("holds a lease's reservation while it runs longer than the window, and charges its usage in the window of its release", async () => {
    const prefix = uniquePrefix('budget-long');
    const q = makeQueue(prefix);
    await q.configure([p]);
    const c = metered({ perMinute: 1000 });
    const key = budgetKey(prefix);
    const lease = await q.acquireLease(request(c, 100));
    // The minute passes while the lease runs: every bucket and bound of the hash moved 62 s back.
    const shift = async (by: number) => {
      const fields = await admin.hgetallBuffer(key);
      const moved: Record<string, Buffer> = {};
      for (const [f, v] of Object.entries(fields)) {
        const bucket = /^m:(\d+)$/.exec(f);
        if (bucket) moved[`m:${Number(bucket[1]) - by}`] = v;
        else if (f === 'm') {
          const st = unpackBudgetState(v);
          moved.m = packBudgetState({
            ...st,
            ...(st.oldest !== undefined && st.newest !== undefined
              ? { oldest: st.oldest - by, newest: st.newest - by }
              : {}),
          });
        } else moved[f] = v;
      }
      await admin.del(key);
      await admin.hset(key, moved);
    };
    await shift(62);
    expect((await q.clientBudgets([c]))[0]).toMatchObject({ reservedTokens: 100, usedTokens: 0, remainingTokens: 900 });
    const refused = (await q.acquireLease(request(c, 950)).catch((e: unknown) => e)) as AdmissionError;
    expect(refused.code).toBe('rate_limit_exceeded');
    await lease.release({ tokens: 900, reported: true });
    expect((await q.clientBudgets([c]))[0]).toMatchObject({ reservedTokens: 0, usedTokens: 900, remainingTokens: 100 });
    const over = (await q.acquireLease(request(c, 200)).catch((e: unknown) => e)) as AdmissionError;
    expect(over.code).toBe('rate_limit_exceeded');
    // A lease released without usage (fenced) is charged its reservation as it stands, at release.
    await shift(62);
    const held = await q.acquireLease(request(c, 300));
    await shift(62);
    expect((await q.clientBudgets([c]))[0]).toMatchObject({ reservedTokens: 300, usedTokens: 0 });
    await held.release();
    expect((await q.clientBudgets([c]))[0]).toMatchObject({ reservedTokens: 0, usedTokens: 300 });
  });

  it('drops buckets wholly outside the window on Redis time, and hints the time until the oldest charge leaves', async () => {
    const prefix = uniquePrefix('budget-slide');
    const q = makeQueue(prefix);
    await q.configure([p]);
    const c = metered({ perMinute: 1000 });
    const key = budgetKey(prefix);
    const cur = Math.floor((await redisNow()) / 1000);
    // Charges left by earlier requests: 500 tokens 61 s ago (out of the window) and 900 59 s ago (still in).
    await admin.hset(key, {
      [`m:${cur - 61}`]: charge(500),
      [`m:${cur - 59}`]: charge(900),
      m: packBudgetState({ used: 1400, reserved: 0, oldest: cur - 61, newest: cur - 59 }),
    });
    expect((await q.clientBudgets([c]))[0]).toMatchObject({ usedTokens: 900, reservedTokens: 0, remainingTokens: 100 });
    // The read left the hash alone; the admission below drops the bucket.
    expect(await admin.hexists(key, `m:${cur - 61}`)).toBe(1);
    const refused = (await q.acquireLease(request(c, 200)).catch((e: unknown) => e)) as AdmissionError;
    expect(refused.code).toBe('rate_limit_exceeded');
    // The 900 leave the window at the start of second cur + 2: within 2 s of Redis time.
    expect([1, 2]).toContain(refused.retryAfterS);
    expect(refused.message).toMatch(/Used 900 .*Requested 200\. Please try again in (\d+ms|1(\.\d)?s|2s)\.$/);
    const lease = await q.acquireLease(request(c, 100));
    expect(lease.budget).toMatchObject({ window: 'minute', remainingTokens: 0 });
    expect(await admin.hexists(key, `m:${cur - 61}`)).toBe(0);
    const ttl = await admin.pttl(key);
    expect(ttl).toBeGreaterThan(86_400_000);
    expect(ttl).toBeLessThanOrEqual(86_520_000);
    await lease.release({ tokens: 100, reported: true });
  });
});

describe('RedisProviderQueue token budgets: cost and outages', () => {
  it('costs a client without a budget nothing more, and one with a budget a few commands per window', async () => {
    const q = new RedisProviderQueue({ redisUrl: redis.url, prefix: uniquePrefix('budget-cost'), logger: silent });
    const two: QueueProvider[] = [
      { providerId: 'a', maxConcurrency: 4, maxQueued: 100 },
      { providerId: 'b', maxConcurrency: 4, maxQueued: 100 },
    ];
    const perRequest = async (client: QueueClient) => {
      const r: LeaseRequest = { modelGroupKey: 'llama', candidates: two, maxWaitMs: 10_000, client };
      await (await q.acquireLease(r)).release({ tokens: 1, reported: true });
      await admin.config('RESETSTAT');
      const n = 200;
      for (let i = 0; i < n; i++) await (await q.acquireLease(r)).release({ tokens: 1, reported: true });
      return (await commandsSinceReset(admin)) / n;
    };
    try {
      await q.configure(two);
      const plain = { id: 'chat', band: 0, weight: 1 };
      const without = await perRequest(plain);
      const minute = await perRequest({ ...plain, id: 'm', tokenBudgets: { perMinute: 1e12 } });
      const both = await perRequest({ ...plain, id: 'md', tokenBudgets: { perMinute: 1e12, perDay: 1e12 } });
      process.stdout.write(
        `Redis commands per pooled request (2 candidates, no wait): ${without.toFixed(1)} without a budget, ${minute.toFixed(1)} with a minute budget, ${both.toFixed(1)} with minute and day\n`,
      );
      // 20 as without budgets (redis-provider-queue.flow.spec.ts), half a command of slack for renewals.
      expect(without).toBeLessThanOrEqual(20.5);
      // Both windows in one HMGET and one HSET at admission and at release, and the release's TIME
      // (its usage is charged on Redis time when it ends) (5), PEXPIRE when the newest bucket moves
      // (once a second): half a command of slack for those on a slow run.
      expect(minute - without).toBeLessThanOrEqual(5.5);
      expect(both - without).toBeLessThanOrEqual(5.5);
    } finally {
      await q.close();
    }
  });

  it('refuses a budgeted request with queue_unavailable while Redis is down, and admits it again after', async () => {
    const own = await startRedis({ forceOwn: true });
    const q = new RedisProviderQueue({ redisUrl: own.url, prefix: uniquePrefix('budget-outage'), logger: silent });
    try {
      await q.configure([p]);
      const c = metered({ perMinute: 1000 });
      await (await q.acquireLease(request(c, 100))).release();
      await own.kill();
      const error = (await q.acquireLease(request(c, 100)).catch((e: unknown) => e)) as AdmissionError;
      expect(error.code).toBe('queue_unavailable');
      await expect(q.clientBudgets([c])).rejects.toMatchObject({ code: 'queue_unavailable' });
      await own.start();
      await waitUntil(() => q.isReady(), 10_000, 'the queue to reconnect');
      const lease = await q.acquireLease(request(c, 100, { maxWaitMs: 5000 }));
      expect(lease.budget?.window).toBe('minute');
      await lease.release();
    } finally {
      await q.close();
      await own.stop();
    }
  }, 20_000);
});
