import { Redis } from 'ioredis';
import { commandsSinceReset, startRedis, uniquePrefix, type TestRedis } from '../../testing';
import type { AdmissionError } from '../admission-error';
import { DEFAULT_SHARD_TAG, LeaseKeys } from '../lease-keys';
import type { LeaseRequest, QueueClient, QueueProvider } from '../provider-queue';
import { packBudgetCharge, packBudgetState, unpackBudgetState } from './budget-hash';
import { readTokenBudgets } from './lease-budget';
import { RedisProviderQueue } from './redis-provider-queue';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

// An own server: the read's commands are counted with INFO commandstats, so nothing else may run on it.
let redis: TestRedis;
let admin: Redis;
beforeAll(async () => {
  redis = await startRedis({ forceOwn: true });
  admin = new Redis(redis.url);
});
afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

const p: QueueProvider = { providerId: 'p', maxConcurrency: 10, maxQueued: 10 };
const metered: QueueClient = { id: 'metered', band: 0, weight: 1, tokenBudgets: { perMinute: 1000, perDay: 100_000 } };
const request = (prompt: number): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates: [p],
  maxWaitMs: 5000,
  client: metered,
  tokens: { prompt, completion: 0 },
});
/** The budget hash of `metered` under `prefix` (docs/architecture.md, "Token budgets"). */
const budgetKey = (prefix: string) => new LeaseKeys(prefix).budgetKey(DEFAULT_SHARD_TAG, 'metered');
/** A bucket field's value: `charged` tokens, `reserved` of them reserved (`budget-hash.ts`). */
const charge = (charged: number, reserved = 0) => packBudgetCharge({ charged, reserved });
/** Redis's own clock, ms. */
const redisNow = async () => {
  const [s, us] = await admin.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
};
/** The windows as a reader shows them, less `resetMs` (it shrinks as time passes). */
const numbers = (read: { window: string; reservedTokens: number; usedTokens: number; remainingTokens: number }[]) =>
  read.map((w) => [w.window, w.reservedTokens, w.usedTokens, w.remainingTokens]);

// docs/architecture.md, "Token budgets" (Redis layout) and "Status model": the status readers' budgets.lua
// writes nothing, and a budget hash is a hash table whatever its size.
describe('token budgets in Redis', () => {
  it('reads windows whose buckets left them without a write, with the numbers an admission’s expiry leaves', async () => {
    const prefix = uniquePrefix('budget-read');
    const key = budgetKey(prefix);
    const now = await redisNow();
    const [m, d] = [Math.floor(now / 1000), Math.floor(now / 60_000)];
    // The minute: 500 tokens (100 of them reserved) 61 s ago, out of the window, and 900 used 55 s
    // ago, in it for 5 s more. The day: 700 tokens a day and 2 min ago, so the whole window left.
    await admin.hset(key, {
      [`m:${m - 61}`]: charge(500, 100),
      [`m:${m - 55}`]: charge(900),
      m: packBudgetState({ used: 1300, reserved: 100, oldest: m - 61, newest: m - 55 }),
      [`d:${d - 1442}`]: charge(700),
      d: packBudgetState({ used: 700, reserved: 0, oldest: d - 1442, newest: d - 1442 }),
    });
    const stored = await admin.dump(key);
    await admin.config('RESETSTAT');
    // The status exporter's read (the gateway's clientBudgets runs the same script).
    const read = await readTokenBudgets(admin, prefix, [], [metered]);
    expect(numbers(read)).toEqual([
      ['minute', 0, 900, 100],
      ['day', 0, 0, 100_000],
    ]);
    const minuteReset = read[0].resetMs;
    expect(minuteReset).toBeGreaterThan(0);
    expect(minuteReset).toBeLessThanOrEqual(7000);
    expect(read[1].resetMs).toBe(0);
    // The script, its reads and TIME: no HDEL, HSET, PEXPIRE or any other command.
    expect(await commandsSinceReset(admin, ['fcall', 'evalsha', 'eval', 'hget', 'hmget', 'time'])).toBe(0);
    expect(await admin.dump(key)).toEqual(stored);

    // An admission expires what left: it drops those buckets and the sums are what the read showed.
    const q = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent });
    try {
      await q.configure([p]);
      const refused = (await q.acquireLease(request(200)).catch((e: unknown) => e)) as AdmissionError;
      expect(refused.code).toBe('rate_limit_exceeded');
      expect(await admin.hmget(key, `m:${m - 61}`, `d:${d - 1442}`, 'd')).toEqual(Array(3).fill(null));
      const minute = unpackBudgetState(await admin.hgetBuffer(key, 'm'));
      expect([minute.used, minute.reserved]).toEqual([900, 0]);
      expect(minute.oldest).toBeGreaterThanOrEqual(m - 60);
      for (const after of [await readTokenBudgets(admin, prefix, [], [metered]), await q.clientBudgets([metered])]) {
        expect(numbers(after)).toEqual(numbers(read));
        expect(after[0].resetMs).toBeLessThanOrEqual(minuteReset);
        expect(after[1].resetMs).toBe(0);
      }
    } finally {
      await q.close();
    }
  });

  it('keeps a budget hash a hash table: from its first reservation, and one stored as a listpack once a bucket moves', async () => {
    const prefix = uniquePrefix('budget-table');
    const key = budgetKey(prefix);
    const q = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent });
    try {
      await q.configure([p]);
      await (await q.acquireLease(request(100))).release({ tokens: 50, reported: true });
      expect(await admin.object('ENCODING', key)).toBe('hashtable');
      // A hash written before the rule: small, so a listpack; its newest buckets a bucket old.
      const now = await redisNow();
      const [m, d] = [Math.floor(now / 1000), Math.floor(now / 60_000)];
      await admin.del(key);
      await admin.hset(key, {
        [`m:${m - 1}`]: charge(300),
        m: packBudgetState({ used: 300, reserved: 0, oldest: m - 1, newest: m - 1 }),
        [`d:${d - 1}`]: charge(300),
        d: packBudgetState({ used: 300, reserved: 0, oldest: d - 1, newest: d - 1 }),
      });
      expect(['listpack', 'ziplist']).toContain(await admin.object('ENCODING', key));
      const lease = await q.acquireLease(request(100));
      expect(await admin.object('ENCODING', key)).toBe('hashtable');
      await lease.release({ tokens: 100, reported: true });
      expect(numbers(await q.clientBudgets([metered]))).toEqual([
        ['minute', 0, 400, 600],
        ['day', 0, 400, 99_600],
      ]);
    } finally {
      await q.close();
    }
  });
});
