import { startRedis, uniquePrefix, type TestRedis } from '../../testing';
import { RedisProviderQueue } from './redis-provider-queue';
import { waitUntil } from '../provider-queue.contract';
import type { Lease, LeaseRequest, QueueProvider } from '../provider-queue';
import type { TokenWeight } from '../token-limit';

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const makeQueue = (prefix: string) => new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: silent });
const limited = (maxTokensInFlight: number, maxConcurrency = 8): QueueProvider => ({
  providerId: 'p',
  maxConcurrency,
  maxQueued: 1000,
  maxTokensInFlight,
});
const request = (p: QueueProvider, tokens: TokenWeight): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates: [p],
  maxWaitMs: 20_000,
  tokens,
});

// docs/architecture.md, "Token limits": exact across replicas, and tokens end with their lease on every path.
describe('RedisProviderQueue token limits across replicas', () => {
  const open: RedisProviderQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((q) => q.close()));
  });

  it("gives a dead replica's tokens back when its leases are swept, and grants a waiter of another replica", async () => {
    const prefix = uniquePrefix('tokens-crash');
    const [dying, alive] = [makeQueue(prefix), makeQueue(prefix)];
    open.push(dying, alive);
    const p = limited(1000);
    await Promise.all([dying.configure([p]), alive.configure([p])]);
    await dying.acquireLease(request(p, { prompt: 700, completion: 100 }));
    let granted: Lease | undefined;
    const waiting = alive.acquireLease(request(p, { prompt: 400, completion: 100 })).then((l) => (granted = l));
    await waitUntil(
      async () => (await alive.counts(['p'])).get('p')?.queued === 1,
      5000,
      'a request waiting for tokens',
    );
    expect((await alive.counts(['p'])).get('p')).toEqual({ inFlight: 1, queued: 1, tokensInFlight: 800 });
    const killedAt = Date.now();
    await dying.simulateCrash();
    await waiting;
    expect(Date.now() - killedAt).toBeLessThanOrEqual(3000);
    expect((await alive.counts(['p'])).get('p')).toEqual({ inFlight: 1, queued: 0, tokensInFlight: 500 });
    await granted!.release();
    expect((await alive.counts(['p'])).get('p')).toEqual({ inFlight: 0, queued: 0, tokensInFlight: 0 });
  });

  it('admits a waiter of another replica when a lease gives its prompt back at prefillDone', async () => {
    const prefix = uniquePrefix('tokens-prefill');
    const [a, b] = [makeQueue(prefix), makeQueue(prefix)];
    open.push(a, b);
    const p = limited(1000);
    await Promise.all([a.configure([p]), b.configure([p])]);
    const long = await a.acquireLease(request(p, { prompt: 900, completion: 50 }));
    const waiting = b.acquireLease(request(p, { prompt: 600, completion: 50 }));
    await waitUntil(async () => (await b.counts(['p'])).get('p')?.queued === 1, 5000, 'a request waiting for tokens');
    await long.prefillDone();
    const short = await waiting;
    expect((await b.counts(['p'])).get('p')).toEqual({ inFlight: 2, queued: 0, tokensInFlight: 700 });
    await Promise.all([long.release(), short.release()]);
    expect((await b.counts(['p'])).get('p')?.tokensInFlight).toBe(0);
  });

  it('never holds more than max_tokens_in_flight over 3 replicas under a burst, and ends with 0 tokens', async () => {
    const prefix = uniquePrefix('tokens-burst');
    const queues = [makeQueue(prefix), makeQueue(prefix), makeQueue(prefix)];
    open.push(...queues);
    const p = limited(1000, 20);
    await Promise.all(queues.map((q) => q.configure([p])));
    let held = 0;
    let peak = 0;
    const weights = Array.from({ length: 36 }, (_, i) => ({ prompt: [600, 100, 50][i % 3], completion: 30 }));
    await Promise.all(
      weights.map(async (w, i) => {
        const lease = await queues[i % 3].acquireLease(request(p, w));
        held += w.prompt + w.completion;
        peak = Math.max(peak, held);
        await new Promise((r) => setTimeout(r, 20));
        held -= w.prompt;
        await lease.prefillDone();
        await new Promise((r) => setTimeout(r, 20));
        held -= w.completion;
        await lease.release();
      }),
    );
    expect(peak).toBeLessThanOrEqual(1000);
    expect(peak).toBeGreaterThan(600);
    expect((await queues[0].counts(['p'])).get('p')).toEqual({ inFlight: 0, queued: 0, tokensInFlight: 0 });
  });
});
