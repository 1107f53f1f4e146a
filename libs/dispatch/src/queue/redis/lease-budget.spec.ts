import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, type TestRedis } from '../../testing';
import { DEFAULT_SHARD_TAG } from '../lease-keys';
import type { LeaseRequest, QueueClient, QueueProvider } from '../provider-queue';
import { RedisProviderQueue } from './redis-provider-queue';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

// An own server: the encodings of its keys are checked.
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
const budgetKey = (prefix: string) => `${prefix}:{${DEFAULT_SHARD_TAG}}:tb:metered`;
/** Redis's own clock, ms. */
const redisNow = async () => {
  const [s, us] = await admin.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
};
/** The windows as a reader shows them, less `resetMs`. */
const numbers = (read: { window: string; reservedTokens: number; usedTokens: number; remainingTokens: number }[]) =>
  read.map((w) => [w.window, w.reservedTokens, w.usedTokens, w.remainingTokens]);

// docs/architecture.md, "Token budgets" (Redis layout, Cost): a budget hash is a hash table whatever its size.
describe('token budgets in Redis', () => {
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
        [`m:${m - 1}`]: 300,
        'm:u': 300,
        'm:r': 0,
        'm:o': m - 1,
        'm:n': m - 1,
        [`d:${d - 1}`]: 300,
        'd:u': 300,
        'd:r': 0,
        'd:o': d - 1,
        'd:n': d - 1,
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
