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

  it('registers a running lease again with the tokens it holds, and its prefill gives them back', async () => {
    // docs/architecture.md, "Token limits": the tokens of a lease come back with the lease after a restart.
    const limited: QueueProvider = { ...p, maxConcurrency: 4, maxTokensInFlight: 1000 };
    const weighed = (prompt: number, completion: number): LeaseRequest => ({
      modelGroupKey: 'llama',
      candidates: [limited],
      maxWaitMs: 15_000,
      tokens: { prompt, completion },
    });
    const prefix = uniquePrefix('restart-tokens');
    const older = make(prefix);
    await older.configure([limited]);
    const held = await older.acquireLease(weighed(700, 100));
    await own.kill();
    await own.start();
    const fresh = make(prefix);
    await fresh.configure([limited]);
    let granted: Lease | undefined;
    const waiting = fresh.acquireLease(weighed(400, 100)).then((l) => (granted = l));
    await waitUntil(
      async () => (await fresh.counts(['p'])).get('p')?.tokensInFlight === 800,
      5000,
      'the older replica to register its lease again with its 800 tokens',
    );
    // Past the barrier: 800 + 500 > 1000, so the fresh replica still waits.
    await new Promise((r) => setTimeout(r, 3000));
    expect(granted).toBeUndefined();
    await held.prefillDone();
    await waiting;
    expect((await fresh.counts(['p'])).get('p')).toEqual({ inFlight: 2, queued: 0, tokensInFlight: 600 });
    await Promise.all([held.release(), granted?.release()]);
    expect((await fresh.counts(['p'])).get('p')?.tokensInFlight).toBe(0);
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
