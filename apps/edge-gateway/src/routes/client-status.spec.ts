import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { parsePrometheusText, sampleValue } from '@iop/status/testing';
import { startTestGateway, type TestGateway } from '../testing/gateway-harness';

/** The pool `small` is one provider (`solo`, max_concurrency 1); batch may hold 1 lease and queue 1. */
const yaml = fleetYaml({
  clients: [
    { id: 'chat', keys: ['chat-key'], priority: 5, weight: 2 },
    { id: 'batch', keys: ['batch-key'], priority: -1, max_in_flight: 1, max_queued: 1 },
  ],
});

describe('clients in /status, /metrics and queue_full', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  const abort = new AbortController();
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(yaml, { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' });
  });
  afterAll(async () => {
    abort.abort();
    await gateway.close();
    await upstream.close();
  });

  const chat = (key: string, model: string, delayMs = 0) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], fake: { delay_ms: delayMs } }),
      signal: abort.signal,
    });
  const status = async () =>
    (await (await fetch(`${gateway.url}/status`)).json()) as Required<Pick<StatusSnapshot, 'pools' | 'clients'>>;

  it('shows per pool and per client in_flight, queued and band, and the client gauges', async () => {
    // Both stay until afterAll aborts them: one holds solo's lease, one waits at batch's max_in_flight.
    void chat('batch-key', 'small', 30_000).catch(() => undefined);
    void chat('batch-key', 'small', 30_000).catch(() => undefined);
    await waitUntil(
      async () => (await status()).clients.find((c) => c.id === 'batch')?.queued === 1,
      5000,
      'batch: one lease held, one request waiting',
    );
    const s = await status();
    expect(s.pools.find((p) => p.pool === 'pool.solo')).toEqual({
      pool: 'pool.solo',
      providers: ['solo'],
      in_flight: 1,
      // The waiting request is held at batch's max_in_flight: no slot of solo would serve it sooner.
      queued: 0,
      parked: 1,
      clients: [{ client: 'batch', band: -1, in_flight: 1, queued: 1 }],
    });
    expect(s.clients).toEqual([
      // chat sets no max_queued: half of gateway.max_connections (4096).
      { id: 'chat', band: 5, weight: 2, max_in_flight: null, max_queued: 2048, in_flight: 0, queued: 0 },
      { id: 'batch', band: -1, weight: 1, max_in_flight: 1, max_queued: 1, in_flight: 1, queued: 1 },
    ]);
    const samples = parsePrometheusText(await (await fetch(`${gateway.url}/metrics`)).text());
    expect(sampleValue(samples, 'iop_edge_client_in_flight', { pool: 'pool.solo', client: 'batch' })).toBe(1);
    expect(sampleValue(samples, 'iop_edge_client_queued', { pool: 'pool.solo', client: 'batch' })).toBe(1);

    // batch's max_queued is 1: its third request is refused, with a Retry-After the queue estimated.
    const refused = await chat('batch-key', 'small');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'queue_full',
      message: expect.stringContaining('"batch"'),
    });
  });

  it('labels request counters and queue waits with the client id, never the key', async () => {
    expect((await chat('chat-key', 'llama')).status).toBe(200);
    const text = await (await fetch(`${gateway.url}/metrics`)).text();
    const samples = parsePrometheusText(text);
    expect(sampleValue(samples, 'iop_edge_requests_total', { model: 'llama', status: '200', client: 'chat' })).toBe(1);
    expect(sampleValue(samples, 'iop_edge_queue_wait_seconds_count', { model: 'llama', client: 'chat' })).toBe(1);
    expect(sampleValue(samples, 'iop_edge_requests_total', { status: '429', client: 'batch' })).toBe(1);
    expect(text).not.toMatch(/chat-key|batch-key/);
  });
});
