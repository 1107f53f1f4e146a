import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '../../testing';
import { RedisProviderQueue } from './redis-provider-queue';

let own: TestRedis;
let admin: Redis;
beforeAll(async () => {
  own = await startRedis({ forceOwn: true });
  admin = new Redis(own.url);
});
afterAll(async () => {
  admin?.disconnect();
  await own?.stop();
});

/** Starts a queue on `url`, waits for `expected` lines of its start-up check (and a moment for more), resolves them all. */
async function linesAtStart(url: string, expected: number): Promise<{ level: string; msg: string }[]> {
  const lines: { level: string; msg: string }[] = [];
  const log = (level: string) => (_o: object, msg: string) => void lines.push({ level, msg });
  const queue = new RedisProviderQueue({
    redisUrl: url,
    prefix: uniquePrefix('settings'),
    logger: { info: log('info'), warn: log('warn'), error: log('error') },
  });
  try {
    await queue.configure([{ providerId: 'p', maxConcurrency: 1, maxQueued: 1 }]);
    await waitUntil(() => queue.redisReachable(), 3000, 'the queue to connect');
    await waitUntil(() => lines.length >= expected, 3000, `${expected} line(s) of the start-up check`);
    // A moment more: a line too many would show here.
    await new Promise((r) => setTimeout(r, 200));
    return lines;
  } finally {
    await queue.close();
  }
}

describe('start-up check of the Redis settings (README "Redis requirements")', () => {
  it('says nothing on a Redis with the defaults (noeviction, timeout 0)', async () => {
    expect(await linesAtStart(own.url, 0)).toEqual([]);
  });

  it('warns once, naming the fix, when maxmemory-policy may evict any key or idle connections are closed', async () => {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await admin.config('SET', 'timeout', '300');
    try {
      const lines = await linesAtStart(own.url, 2);
      expect(lines.map((l) => l.level)).toEqual(['warn', 'warn']);
      expect(lines[0].msg).toMatch(/maxmemory-policy is allkeys-lru.*set maxmemory-policy noeviction/);
      expect(lines[1].msg).toMatch(/closes idle connections after 300 s.*set timeout 0/);
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await admin.config('SET', 'timeout', '0');
    }
  });

  it('says once at info that it could not check where CONFIG is refused (an ACL, as on managed Redis)', async () => {
    await admin.call('ACL', 'SETUSER', 'gateway', 'on', '>secret', '~*', '&*', '+@all', '-config');
    try {
      const lines = await linesAtStart(own.url.replace('redis://', 'redis://gateway:secret@'), 1);
      expect(lines).toHaveLength(1);
      expect(lines[0].level).toBe('info');
      expect(lines[0].msg).toMatch(/CONFIG GET refused.*maxmemory-policy.*timeout is 0/);
    } finally {
      await admin.call('ACL', 'DELUSER', 'gateway');
    }
  });
});
