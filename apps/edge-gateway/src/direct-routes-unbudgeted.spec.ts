import {
  MemoryProviderQueue,
  RedisProviderQueue,
  type ClientBudgetWindow,
  type ProviderQueue,
  type QueueClient,
} from '@iop/dispatch';
import { startRedis, uniquePrefix, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import pino from 'pino';
import { ECHO_LLM } from './testing/cli-adapter-runs';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

// README "Token budgets: what a client sees": direct routes (CLI providers, legacy `routes[]`) never
// enter admission, so a budgeted client's request there is neither reserved, charged nor refused,
// and its answer carries no x-ratelimit-* header; its reported usage is still counted.

const yaml = `
version: 1
gateway:
  cli_sandbox: none
  clients:
    - { id: team, keys: ["k-team"], tokens_per_minute: 1000, tokens_per_day: 100000 }
queue: { backend: memory, max_wait_ms: 5000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${UP}" }
      - { id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}] }
    providers:
      - { id: pv, category: vllm, adapter: v, models: [m], max_concurrency: 4 }
      - { id: e, category: cli, adapter: echo, models: [cli-echo] }
routes:
  - { model: legacy-m, node: n, adapter: v, upstream: m }
  - { model: legacy-emb, node: n, adapter: v, upstream: emb }
`;
const TEAM: QueueClient = { id: 'team', band: 0, weight: 1, tokenBudgets: { perMinute: 1000, perDay: 100_000 } };
/** Over the whole minute budget: a budgeted request this large is refused for good. */
const OVER = 5000;

describe.each([
  ['memory backend', false],
  ['Redis backend', true],
])('direct routes are never budgeted (%s)', (_b, onRedis) => {
  let redis: TestRedis | undefined;
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  let queue: ProviderQueue;

  beforeAll(async () => {
    redis = onRedis ? await startRedis() : undefined;
    upstream = await startFakeUpstream({ models: ['m', 'emb'] });
    queue = redis
      ? new RedisProviderQueue({
          redisUrl: redis.url,
          prefix: uniquePrefix('direct'),
          logger: pino({ level: 'silent' }),
        })
      : new MemoryProviderQueue();
    gateway = await startTestGateway(yaml, { UP: upstream.url }, queue);
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
    await redis?.stop();
  });

  const post = (path: string, body: object) =>
    fetch(`${gateway.url}/v1${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer k-team' },
      body: JSON.stringify(body),
    });
  const budgetStatus = async () =>
    ((await (await fetch(`${gateway.url}/status`)).json()) as StatusSnapshot).clients?.find((c) => c.id === 'team')
      ?.token_budgets;
  const rateLimitHeaders = (res: Response) => [...res.headers.keys()].filter((h) => h.startsWith('x-ratelimit'));
  const counted = async (kind: string): Promise<number> => {
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    const line = new RegExp(`^iop_edge_client_tokens_total\\{client="team",kind="${kind}"\\} (\\d+)$`, 'm');
    return Number(line.exec(metrics)?.[1] ?? 0);
  };
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
      expect([path, body, rateLimitHeaders(res)]).toEqual([path, body, []]);
    }
    // The legacy stream went to the upstream as the client sent it: no usage asked for a budget.
    expect(upstream.stats().lastRequest['m'].body).not.toHaveProperty('stream_options');
    expect(await queue.clientBudgets([TEAM])).toEqual([untouched(1000, 'minute'), untouched(100_000, 'day')]);
    expect(await budgetStatus()).toEqual(before);
    // Their reported usage is counted for the client all the same; nothing was estimated for a budget.
    expect(await counted('prompt')).toBeGreaterThan(0);
    expect(await counted('completion')).toBeGreaterThan(0);
    expect(await counted('estimated')).toBe(0);
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
    expect(rateLimitHeaders(refused).sort()).toEqual([
      'x-ratelimit-limit-tokens',
      'x-ratelimit-remaining-tokens',
      'x-ratelimit-reset-tokens',
    ]);
  });
});
