import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '../../testing';
import type { Lease, LeaseRequest, QueueProvider } from '../provider-queue';
import { RedisProviderQueue } from './redis-provider-queue';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

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

const make = (prefix: string) => {
  const q = new RedisProviderQueue({ redisUrl: own.url, prefix, logger: silent });
  open.push(q);
  return q;
};
const p: QueueProvider = { providerId: 'p', maxConcurrency: 1, maxQueued: 10 };
const request = (maxWaitMs = 15_000): LeaseRequest => ({ modelGroupKey: 'llama', candidates: [p], maxWaitMs });

describe('RedisProviderQueue after Redis restarts without persistence', () => {
  it('a replica started after the restart grants nothing before the running leases are registered again', async () => {
    const prefix = uniquePrefix('restart-fresh');
    const older = make(prefix);
    await older.configure([p]);
    const held = await older.acquireLease(request());
    await own.kill();
    await own.start();
    // A replica that never saw the old run_id: it cannot tell that Redis restarted.
    const fresh = make(prefix);
    await fresh.configure([p]);
    let granted: Lease | undefined;
    const waiting = fresh.acquireLease(request()).then((l) => (granted = l));
    await waitUntil(
      async () => (await fresh.counts(['p'])).get('p')?.inFlight === 1,
      5000,
      'the older replica to register its running lease again',
    );
    expect(granted).toBeUndefined();
    expect(held.signal.aborted).toBe(false);
    // Past the barrier too: the limit (1) is held by the registered lease, so the fresh replica still waits.
    await new Promise((r) => setTimeout(r, 3000));
    expect(granted).toBeUndefined();
    expect((await fresh.counts(['p'])).get('p')).toEqual({ inFlight: 1, queued: 1 });
    await held.release();
    await waiting;
    expect(granted?.providerId).toBe('p');
    await granted?.release();
  }, 30_000);

  it('a new deployment on a Redis up longer than the barrier grants at once', async () => {
    await waitUntil(
      async () => Number(/uptime_in_seconds:(\d+)/.exec(await infoServer(own.url))?.[1]) >= 3,
      5000,
      'Redis to be up 3 s',
    );
    const q = make(uniquePrefix('fresh-deployment'));
    await q.configure([p]);
    const startedAt = Date.now();
    const lease = await q.acquireLease(request());
    expect(Date.now() - startedAt).toBeLessThan(200);
    await lease.release();
  });
});

async function infoServer(url: string): Promise<string> {
  const client = new Redis(url);
  try {
    return await client.info('server');
  } finally {
    client.disconnect();
  }
}
