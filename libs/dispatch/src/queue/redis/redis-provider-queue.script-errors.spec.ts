import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, type TestRedis } from '../../testing';
import type { AdmissionError } from '../admission-error';
import { DEFAULT_SHARD_TAG, LeaseKeys } from '../lease-keys';
import type { QueueProvider } from '../provider-queue';
import { RedisProviderQueue } from './redis-provider-queue';

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

// docs/architecture.md, "Lease protocol": an admission script that fails in Redis (here a key of the wrong
// type; a bug alike) is no outage, so only this says it: once per request, at error, with Redis's words.
describe('RedisProviderQueue when the admission script fails in Redis', () => {
  it('answers queue_unavailable and says the failure at error', async () => {
    const lines: { level: string; msg: string; obj: object }[] = [];
    const record = (level: string) => (obj: object, msg: string) => void lines.push({ level, msg, obj });
    const logger = { info: record('info'), warn: record('warn'), error: record('error') };
    const prefix = uniquePrefix('script-error');
    const q = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger });
    const p: QueueProvider = { providerId: 'p', maxConcurrency: 2, maxQueued: 10 };
    const team = { id: 'team', band: 0, weight: 1 };
    try {
      await q.configure([p]);
      await admin.set(`${new LeaseKeys(prefix).tagBase(DEFAULT_SHARD_TAG)}:clients`, 'not a hash');
      const failed = (await q
        .acquireLease({ modelGroupKey: 'llama', candidates: [p], maxWaitMs: 2000, client: team })
        .catch((e: unknown) => e)) as AdmissionError;
      expect(failed.code).toBe('queue_unavailable');
      const errors = lines.filter((l) => l.level === 'error');
      expect(errors.map((l) => l.msg)).toEqual(['redis queue: the admission script failed in Redis']);
      expect(errors[0].obj).toMatchObject({ err: expect.stringMatching(/^WRONGTYPE .* script: iop_admit_/) });
      // Redis answers all the while: no outage is said.
      expect(lines.filter((l) => /outage|not connected|no answer/.test(l.msg))).toEqual([]);
    } finally {
      await q.close();
    }
  });
});
