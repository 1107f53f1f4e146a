import type { ClientBudgetWindow } from '@iop/dispatch';
import { ECHO_LLM } from './testing/cli-adapter-runs';
import {
  BUDGET_BACKENDS,
  budgetConfig,
  budgetedClient,
  clientTokensCounted,
  postAs,
  rateLimitHeaderNames,
  statusClients,
  useBudgetGateway,
} from './testing/budget-gateway';

// README "Token budgets: what a client sees": direct routes (CLI providers, legacy `routes[]`) never
// enter admission, so a budgeted client's request there is neither reserved, charged nor refused,
// and its answer carries no x-ratelimit-* header; its reported usage is still counted.

const yaml = budgetConfig({
  gateway: ['cli_sandbox: none'],
  clients: ['{ id: team, keys: ["k-team"], tokens_per_minute: 1000, tokens_per_day: 100000 }'],
  adapters: [
    '{ id: v, type: vllm, base_url: "${UP}" }',
    `{ id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}] }`,
  ],
  providers: [
    '{ id: pv, category: vllm, adapter: v, models: [m], max_concurrency: 4 }',
    '{ id: e, category: cli, adapter: echo, models: [cli-echo] }',
  ],
  routes: [
    '{ model: legacy-m, node: n, adapter: v, upstream: m }',
    '{ model: legacy-emb, node: n, adapter: v, upstream: emb }',
  ],
});
const TEAM = budgetedClient('team', { perMinute: 1000, perDay: 100_000 });
/** Over the whole minute budget: a budgeted request this large is refused for good. */
const OVER = 5000;

describe.each(BUDGET_BACKENDS)('direct routes are never budgeted (%s)', (_b, onRedis) => {
  const ctx = useBudgetGateway({ yaml, onRedis, prefix: 'direct', upstreams: { UP: { models: ['m', 'emb'] } } });
  const post = (path: string, body: object) => postAs(ctx.gateway, 'k-team', path, body);
  const budgetStatus = async () => (await statusClients(ctx.gateway)).find((c) => c.id === 'team')?.token_budgets;
  const counted = (kind: string) => clientTokensCounted(ctx.gateway, 'team', kind);
  // A CLI program takes no length setting: its prompt alone is over the budget.
  const long = 'x'.repeat(3 * OVER);
  const chat = (model: string, stream: boolean, extra: object = {}) => ({
    model,
    stream,
    messages: [{ role: 'user', content: long }],
    ...extra,
  });
  const untouched = (limit: number, window: ClientBudgetWindow['window']) => ({
    clientId: 'team',
    window,
    limitTokens: limit,
    reservedTokens: 0,
    usedTokens: 0,
    remainingTokens: limit,
    resetMs: 0,
  });

  it('answers a CLI provider and a legacy route in full, with no x-ratelimit-* header, reserving and charging nothing', async () => {
    const before = await budgetStatus();
    const requests: Array<[string, object]> = [
      ['/chat/completions', chat('cli-echo', false)],
      ['/chat/completions', chat('cli-echo', true)],
      ['/responses', { model: 'cli-echo', input: long }],
      ['/responses', { model: 'legacy-m', input: 'hello', max_output_tokens: OVER, stream: true }],
      ['/chat/completions', chat('legacy-m', false, { max_tokens: OVER })],
      ['/chat/completions', chat('legacy-m', true, { max_tokens: OVER })],
      ['/embeddings', { model: 'legacy-emb', input: long }],
    ];
    for (const [path, body] of requests) {
      const res = await post(path, body);
      const text = await res.text();
      expect([path, body, res.status]).toEqual([path, body, 200]);
      expect(text.length).toBeGreaterThan(0);
      expect([path, body, rateLimitHeaderNames(res)]).toEqual([path, body, []]);
    }
    // The legacy stream was asked for its usage (counted for the client), never for a budget.
    expect(ctx.upstreams.UP.stats().lastRequest['m'].body).toMatchObject({ stream_options: { include_usage: true } });
    expect(await ctx.queue.clientBudgets([TEAM])).toEqual([untouched(1000, 'minute'), untouched(100_000, 'day')]);
    expect(await budgetStatus()).toEqual(before);
    // Their usage is counted for the client all the same, charged to no budget (above): as reported, and
    // the CLI stream that reported none (it did not ask for a usage chunk) by the gateway's estimate.
    expect(await counted('prompt')).toBeGreaterThan(0);
    expect(await counted('completion')).toBeGreaterThan(0);
    expect(await counted('estimated')).toBeGreaterThan(0);
  });

  it('budgets the same client on its pooled route (the check above can see a budget)', async () => {
    const res = await post('/chat/completions', {
      model: 'm',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(res.status).toBe(200);
    await res.text();
    expect(res.headers.get('x-ratelimit-limit-tokens')).toBe('1000');
    const refused = await post('/chat/completions', chat('m', false, { max_tokens: OVER }));
    expect(refused.status).toBe(429);
    expect(rateLimitHeaderNames(refused)).toEqual([
      'x-ratelimit-limit-tokens',
      'x-ratelimit-remaining-tokens',
      'x-ratelimit-reset-tokens',
    ]);
  });
});
