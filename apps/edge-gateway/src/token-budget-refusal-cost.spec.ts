import { RedisProviderQueue, type QueueClient } from '@iop/dispatch';
import { scriptCallsSinceReset, startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { Redis } from 'ioredis';
import pino from 'pino';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

// README "Token budgets: what a client sees": a budget's 429 and its x-ratelimit-*-tokens headers come
// from the one admission script that refused it (docs/architecture.md, "Token budgets"), never from a
// second queue call.

const yaml = `
version: 1
gateway:
  clients:
    - { id: tiny, keys: ["k-tiny"], tokens_per_minute: 300, tokens_per_day: 100000 }
queue: { backend: memory, max_wait_ms: 5000 }
nodes:
  - id: n
    adapters: [{ id: v, type: vllm, base_url: "\${UP}" }]
    providers: [{ id: pv, category: vllm, adapter: v, models: [m], max_concurrency: 4 }]
`;

const TINY: QueueClient = { id: 'tiny', band: 0, weight: 1, tokenBudgets: { perMinute: 300, perDay: 100_000 } };

describe('a budget refusal on the Redis backend', () => {
  let redis: TestRedis;
  let admin: Redis;
  let upstream: FakeUpstream;
  let queue: RedisProviderQueue;
  let gateway: TestGateway;

  beforeAll(async () => {
    // Redis of its own: the command counts are this gateway's alone.
    redis = await startRedis({ forceOwn: true });
    admin = new Redis(redis.url);
    upstream = await startFakeUpstream({ models: ['m'] });
    queue = new RedisProviderQueue({
      redisUrl: redis.url,
      prefix: uniquePrefix('budget-429'),
      logger: pino({ level: 'silent' }),
    });
    gateway = await startTestGateway(yaml, { UP: upstream.url }, queue);
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
    admin?.disconnect();
    await redis?.stop();
  });

  const post = (body: object) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer k-tiny' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...body }),
    });

  it('costs exactly one script call (the admission) and carries the standing that script read', async () => {
    // About 280 tokens reserved, about 400 reported and charged: the minute's 300 are spent.
    const first = await post({ max_tokens: 10, messages: [{ role: 'user', content: 'x'.repeat(800) }] });
    expect(first.status).toBe(200);
    await first.text();
    await waitUntil(
      async () => (await queue.clientBudgets([TINY]))[0].remainingTokens === 0,
      5000,
      'the first request settled',
    );
    // The queue's own timers (renewal, sweep, poll) stop, so every script call counted is a request's.
    const resume = queue.simulateStall();
    try {
      await admin.config('RESETSTAT');
      const spent = await post({ max_tokens: 1 });
      const tooLarge = await post({ max_tokens: 1000 });
      expect(await scriptCallsSinceReset(admin)).toBe(2);
      for (const refused of [spent, tooLarge]) {
        expect(refused.status).toBe(429);
        expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
        expect(refused.headers.get('x-ratelimit-limit-tokens')).toBe('300');
        expect(refused.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
        expect(refused.headers.get('x-ratelimit-reset-tokens')).toMatch(/^(\d+(\.\d{1,3})?s|1m\d+(\.\d{1,3})?s)$/);
      }
      expect(spent.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      expect(tooLarge.headers.get('retry-after')).toBeNull();
    } finally {
      resume();
    }
  });
});
