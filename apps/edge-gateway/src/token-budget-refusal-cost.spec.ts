import { RedisProviderQueue } from '@iop/dispatch';
import { scriptCallsSinceReset, waitUntil } from '@iop/dispatch/testing';
import { Redis } from 'ioredis';
import { RESET_DURATION, budgetConfig, budgetedClient, postAs, useBudgetGateway } from './testing/budget-gateway';

// README "Token budgets: what a client sees": a budget's 429 and its x-ratelimit-*-tokens headers come
// from the one admission script that refused it (docs/architecture.md, "Token budgets"), never from a
// second queue call.

const yaml = budgetConfig({
  clients: ['{ id: tiny, keys: ["k-tiny"], tokens_per_minute: 300, tokens_per_day: 100000 }'],
});
const TINY = budgetedClient('tiny', { perMinute: 300, perDay: 100_000 });

describe('a budget refusal on the Redis backend', () => {
  // Redis of its own: the command counts are this gateway's alone.
  const ctx = useBudgetGateway({
    yaml,
    onRedis: true,
    ownRedis: true,
    prefix: 'budget-429',
    upstreams: { UP: { models: ['m'] } },
  });
  let admin: Redis;
  beforeAll(() => {
    if (!ctx.redis) throw new Error('the Redis backend started no Redis');
    admin = new Redis(ctx.redis.url);
  });
  afterAll(() => admin?.disconnect());

  const post = (body: object) =>
    postAs(ctx.gateway, 'k-tiny', '/chat/completions', {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      ...body,
    });

  it('costs exactly one script call (the admission) and carries the standing that script read', async () => {
    // About 280 tokens reserved; charged the reported prompt and at most the 10 completion tokens it
    // named: what is left of the minute's 300 (`left`) cannot hold a request that asks for as much.
    const first = await post({ max_tokens: 10, messages: [{ role: 'user', content: 'x'.repeat(800) }] });
    expect(first.status).toBe(200);
    await first.text();
    let left = -1;
    await waitUntil(
      async () => {
        const [minute] = await ctx.queue.clientBudgets([TINY]);
        left = minute.remainingTokens;
        return minute.reservedTokens === 0 && minute.usedTokens > 0;
      },
      5000,
      'the first request settled',
    );
    // The queue's own timers (renewal, sweep, poll) stop, so every script call counted is a request's.
    const resume = (ctx.queue as RedisProviderQueue).simulateStall();
    try {
      await admin.config('RESETSTAT');
      const spent = await post({ max_tokens: left });
      const tooLarge = await post({ max_tokens: 1000 });
      expect(await scriptCallsSinceReset(admin)).toBe(2);
      for (const refused of [spent, tooLarge]) {
        expect(refused.status).toBe(429);
        expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
        expect(refused.headers.get('x-ratelimit-limit-tokens')).toBe('300');
        expect(refused.headers.get('x-ratelimit-remaining-tokens')).toBe(String(left));
        expect(refused.headers.get('x-ratelimit-reset-tokens')).toMatch(RESET_DURATION);
      }
      expect(spent.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      expect(tooLarge.headers.get('retry-after')).toBeNull();
    } finally {
      resume();
    }
  });
});
