import {
  MemoryProviderQueue,
  RedisProviderQueue,
  type ClientBudgetWindow,
  type ProviderQueue,
  type QueueClient,
} from '@iop/dispatch';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { RESOURCE_METRICS, type ClientStatus, type StatusSnapshot } from '@iop/status';
import { parsePrometheusText, sampleValue } from '@iop/status/testing';
import pino from 'pino';
import { startTestGateway, type TestGateway } from '../testing/gateway-harness';

// README "Status": a budgeted client's windows in the gateway's /status (`token_budgets`) and /metrics
// (`iop_edge_client_tokens_*{client,window}`), as the queue reads them, on the memory and the Redis backend.

const yaml = `
version: 1
gateway:
  clients:
    - { id: research, keys: ["k-research"], tokens_per_minute: 50000, tokens_per_day: 900000 }
    - { id: chat, keys: ["k-chat"] }
queue: { backend: memory, max_wait_ms: 5000 }
nodes:
  - id: n
    adapters: [{ id: v, type: vllm, base_url: "\${UP}" }]
    providers: [{ id: pv, category: vllm, adapter: v, models: [m], max_concurrency: 4 }]
`;
const RESEARCH: QueueClient = {
  id: 'research',
  band: 0,
  weight: 1,
  tokenBudgets: { perMinute: 50_000, perDay: 900_000 },
};

const chat = (gateway: TestGateway, key: string, delayMs = 0, signal?: AbortSignal) =>
  fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'm',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'count my tokens' }],
      fake: { delay_ms: delayMs },
    }),
    signal,
  });
const clientsOf = async (gateway: TestGateway): Promise<ClientStatus[]> =>
  ((await (await fetch(`${gateway.url}/status`)).json()) as StatusSnapshot).clients!;
/** The snapshot's windows without `reset_ms`, which moves with the clock between two reads. */
const withoutReset = (c: ClientStatus | undefined) => c?.token_budgets?.map(({ reset_ms: _r, ...w }) => w);
const asStatus = (ws: ClientBudgetWindow[]) =>
  ws.map((w) => ({
    window: w.window,
    limit: w.limitTokens,
    reserved: w.reservedTokens,
    used: w.usedTokens,
    remaining: w.remainingTokens,
  }));

describe.each([
  ['memory backend', false],
  ['Redis backend', true],
])('token budgets in the gateway /status and /metrics (%s)', (_b, onRedis) => {
  let redis: TestRedis | undefined;
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  let queue: ProviderQueue;
  const abort = new AbortController();

  beforeAll(async () => {
    redis = onRedis ? await startRedis() : undefined;
    upstream = await startFakeUpstream({ models: ['m'] });
    queue = redis
      ? new RedisProviderQueue({
          redisUrl: redis.url,
          prefix: uniquePrefix('budget-status'),
          logger: pino({ level: 'silent' }),
        })
      : new MemoryProviderQueue();
    gateway = await startTestGateway(yaml, { UP: upstream.url }, queue);
  });
  afterAll(async () => {
    abort.abort();
    await gateway?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('shows each window of a budgeted client as the queue reads it, used and reserved apart, and no field for a client without one', async () => {
    // Before any request: the whole budget remains, nothing charged.
    const idle = (await clientsOf(gateway)).find((c) => c.id === 'research');
    expect(idle?.token_budgets).toEqual([
      { window: 'minute', limit: 50_000, reserved: 0, used: 0, remaining: 50_000, reset_ms: 0 },
      { window: 'day', limit: 900_000, reserved: 0, used: 0, remaining: 900_000, reset_ms: 0 },
    ]);

    expect((await chat(gateway, 'k-research')).status).toBe(200);
    // One request held at the upstream: its reservation stands beside the settled use of the first.
    void chat(gateway, 'k-research', 30_000, abort.signal).catch(() => undefined);
    await waitUntil(
      async () => (await queue.clientBudgets([RESEARCH])).every((w) => w.reservedTokens > 0 && w.usedTokens > 0),
      5000,
      'one request settled and one reserved',
    );
    const clients = await clientsOf(gateway);
    const research = clients.find((c) => c.id === 'research');
    expect(withoutReset(research)).toEqual(asStatus(await queue.clientBudgets([RESEARCH])));
    const [minute, day] = research!.token_budgets!;
    expect(minute.remaining).toBe(50_000 - minute.reserved - minute.used);
    expect(minute.reset_ms).toBeGreaterThan(59_000);
    expect(minute.reset_ms).toBeLessThanOrEqual(61_000);
    expect(day.reset_ms).toBeGreaterThan(86_340_000);
    expect(clients.find((c) => c.id === 'chat')).not.toHaveProperty('token_budgets');

    const samples = parsePrometheusText(await (await fetch(`${gateway.url}/metrics`)).text());
    for (const w of research!.token_budgets!) {
      const labels = { client: 'research', window: w.window };
      expect(sampleValue(samples, RESOURCE_METRICS.clientTokensLimit, labels)).toBe(w.limit);
      expect(sampleValue(samples, RESOURCE_METRICS.clientTokensReserved, labels)).toBe(w.reserved);
      expect(sampleValue(samples, RESOURCE_METRICS.clientTokensUsed, labels)).toBe(w.used);
      expect(sampleValue(samples, RESOURCE_METRICS.clientTokensRemaining, labels)).toBe(w.remaining);
    }
    expect(sampleValue(samples, RESOURCE_METRICS.clientTokensRemaining, { client: 'chat' })).toBeUndefined();
  });
});

/** A queue whose budget reads fail, like a Redis outage that hits them alone. */
class BrokenBudgetsQueue extends MemoryProviderQueue {
  override async clientBudgets(): Promise<ClientBudgetWindow[]> {
    throw new Error('redis down');
  }
}

describe('token budgets that cannot be read', () => {
  it('show as null (never a made-up budget) with no gauge, and leave the counts and the answer alone', async () => {
    const upstream = await startFakeUpstream({ models: ['m'] });
    const gateway = await startTestGateway(yaml, { UP: upstream.url }, new BrokenBudgetsQueue());
    try {
      const res = await fetch(`${gateway.url}/status`);
      expect(res.status).toBe(200);
      const clients = ((await res.json()) as StatusSnapshot).clients!;
      expect(clients.find((c) => c.id === 'research')).toMatchObject({ in_flight: 0, queued: 0, token_budgets: null });
      expect(clients.find((c) => c.id === 'chat')).not.toHaveProperty('token_budgets');
      const metrics = await fetch(`${gateway.url}/metrics`);
      expect(metrics.status).toBe(200);
      const samples = parsePrometheusText(await metrics.text());
      expect(sampleValue(samples, RESOURCE_METRICS.clientTokensRemaining, { client: 'research' })).toBeUndefined();
    } finally {
      await gateway.close();
      await upstream.close();
    }
  });
});
