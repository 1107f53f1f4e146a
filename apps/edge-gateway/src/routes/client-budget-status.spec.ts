import { MemoryProviderQueue, type ClientBudgetWindow } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream } from '@iop/fake-upstream';
import { RESOURCE_METRICS, type ClientStatus, type StatusSnapshot } from '@iop/status';
import { parsePrometheusText, sampleValue } from '@iop/status/testing';
import {
  BUDGET_BACKENDS,
  budgetConfig,
  budgetedClient,
  postAs,
  statusClients as clientsOf,
  useBudgetGateway,
} from '../testing/budget-gateway';
import { startTestGateway, type TestGateway } from '../testing/gateway-harness';

// README "Status": a budgeted client's windows in the gateway's /status (`token_budgets`) and /metrics
// (`iop_edge_client_tokens_*{client,window}`), as the queue reads them, on the memory and the Redis backend.

const yaml = budgetConfig({
  clients: [
    '{ id: research, keys: ["k-research"], tokens_per_minute: 50000, tokens_per_day: 900000 }',
    '{ id: chat, keys: ["k-chat"] }',
  ],
});
const RESEARCH = budgetedClient('research', { perMinute: 50_000, perDay: 900_000 });

const chat = (gateway: TestGateway, key: string, delayMs = 0, signal?: AbortSignal) =>
  postAs(
    gateway,
    key,
    '/chat/completions',
    {
      model: 'm',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'count my tokens' }],
      fake: { delay_ms: delayMs },
    },
    signal,
  );
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

describe.each(BUDGET_BACKENDS)('token budgets in the gateway /status and /metrics (%s)', (_b, onRedis) => {
  // Declared first, so it runs first: the request held at the upstream ends before the gateway closes.
  const abort = new AbortController();
  afterAll(() => abort.abort());
  const ctx = useBudgetGateway({ yaml, onRedis, prefix: 'budget-status', upstreams: { UP: { models: ['m'] } } });

  it('shows each window of a budgeted client as the queue reads it, used and reserved apart, and no field for a client without one', async () => {
    // Before any request: the whole budget remains, nothing charged.
    const idle = (await clientsOf(ctx.gateway)).find((c) => c.id === 'research');
    expect(idle?.token_budgets).toEqual([
      { window: 'minute', limit: 50_000, reserved: 0, used: 0, remaining: 50_000, reset_ms: 0 },
      { window: 'day', limit: 900_000, reserved: 0, used: 0, remaining: 900_000, reset_ms: 0 },
    ]);

    expect((await chat(ctx.gateway, 'k-research')).status).toBe(200);
    // One request held at the upstream: its reservation stands beside the settled use of the first.
    void chat(ctx.gateway, 'k-research', 30_000, abort.signal).catch(() => undefined);
    await waitUntil(
      async () => (await ctx.queue.clientBudgets([RESEARCH])).every((w) => w.reservedTokens > 0 && w.usedTokens > 0),
      5000,
      'one request settled and one reserved',
    );
    const clients = await clientsOf(ctx.gateway);
    const research = clients.find((c) => c.id === 'research');
    expect(withoutReset(research)).toEqual(asStatus(await ctx.queue.clientBudgets([RESEARCH])));
    const [minute, day] = research!.token_budgets!;
    expect(minute.remaining).toBe(50_000 - minute.reserved - minute.used);
    expect(minute.reset_ms).toBeGreaterThan(59_000);
    expect(minute.reset_ms).toBeLessThanOrEqual(61_000);
    expect(day.reset_ms).toBeGreaterThan(86_340_000);
    expect(clients.find((c) => c.id === 'chat')).not.toHaveProperty('token_budgets');

    const samples = parsePrometheusText(await (await fetch(`${ctx.gateway.url}/metrics`)).text());
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
