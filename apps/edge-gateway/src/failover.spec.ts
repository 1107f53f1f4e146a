import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { startTestGateway } from './testing/gateway-harness';

/** An upstream that answers every request with `status` at once (and 200 to probes when `probeOk`). */
async function startFailingUpstream(
  status: number,
): Promise<{ url: string; hits: () => number; close(): Promise<void> }> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    if (req.method === 'POST') hits++;
    res
      .writeHead(status, { 'content-type': 'application/json' })
      .end(JSON.stringify({ error: { message: 'boom', type: 'server_error', code: null } }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    hits: () => hits,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** Two providers of model `m`: `first` (listed first, so chosen first when idle) and `second`. */
const twoProviders = (opts: { requestTimeoutMs?: number; healthIntervalMs?: number } = {}) => `
version: 1
gateway: { request_timeout_ms: ${opts.requestTimeoutMs ?? 10000} }
health: { interval_ms: ${opts.healthIntervalMs ?? 60000}, timeout_ms: 200, unhealthy_after: 2, healthy_after: 2 }
nodes:
  - id: n
    adapters:
      - { id: a, type: openai_compat, base_url: "\${FIRST}" }
      - { id: b, type: openai_compat, base_url: "\${SECOND}" }
    providers:
      - { id: first, category: openai_compat, adapter: a, models: [m], max_concurrency: 4 }
      - { id: second, category: openai_compat, adapter: b, models: [m], max_concurrency: 4 }
`;

describe('failover before the first byte', () => {
  let good: FakeUpstream;
  beforeAll(async () => {
    good = await startFakeUpstream({ name: 'good' });
  });
  afterAll(async () => {
    await good.close();
  });

  it('retries once on another provider when the first answers 500 before any byte, holding one lease at a time', async () => {
    const bad = await startFailingUpstream(500);
    const gateway = await startTestGateway(twoProviders(), { FIRST: bad.url, SECOND: good.url });
    try {
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const raw = await client.chat.completions
        .create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
        .withResponse();
      expect(raw.data.choices[0].message.content).toContain('echo: hi');
      expect(raw.response.headers.get('x-iop-resource')).toBe('second');
      expect(bad.hits()).toBe(1);
      const counts = await gateway.queue.counts(['first', 'second']);
      expect(counts.get('first')).toEqual({ inFlight: 0, queued: 0 });
      expect(counts.get('second')).toEqual({ inFlight: 0, queued: 0 });
    } finally {
      await gateway.close();
      await bad.close();
    }
  });

  it('retries on another provider when the first refuses the connection', async () => {
    const gone = await startFakeUpstream();
    const goneUrl = gone.url;
    await gone.close();
    const gateway = await startTestGateway(twoProviders(), { FIRST: goneUrl, SECOND: good.url });
    try {
      const res = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-iop-resource')).toBe('second');
    } finally {
      await gateway.close();
    }
  });

  it('answers 502 when both providers fail, after exactly one retry', async () => {
    const bad1 = await startFailingUpstream(503);
    const bad2 = await startFailingUpstream(500);
    const gateway = await startTestGateway(twoProviders(), { FIRST: bad1.url, SECOND: bad2.url });
    try {
      const res = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('upstream_error');
      expect(bad1.hits() + bad2.hits()).toBe(2);
    } finally {
      await gateway.close();
      await Promise.all([bad1.close(), bad2.close()]);
    }
  });

  it('does not retry once a byte has been sent: a mid-stream cut ends with an error event', async () => {
    const other = await startFakeUpstream({ name: 'other' });
    const gateway = await startTestGateway(twoProviders(), { FIRST: good.url, SECOND: other.url });
    try {
      good.reset();
      other.reset();
      const res = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'm',
          messages: [{ role: 'user', content: 'x' }],
          stream: true,
          fake: { chunks: 5, cut_after: 2 },
        }),
      });
      const text = await res.text();
      expect(text).toMatch(/data: \{"error"/);
      expect(text).not.toContain('[DONE]');
      expect(good.stats().total + other.stats().total).toBe(1);
    } finally {
      await gateway.close();
      await other.close();
    }
  });

  it('lets a long healthy stream outlive request_timeout_ms, but times out a silent upstream', async () => {
    const gateway = await startTestGateway(twoProviders({ requestTimeoutMs: 300 }), {
      FIRST: good.url,
      SECOND: good.url,
    });
    try {
      const started = Date.now();
      const res = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'm',
          messages: [{ role: 'user', content: 'x' }],
          stream: true,
          fake: { chunks: 10, chunk_gap_ms: 100 },
        }),
      });
      const text = await res.text();
      expect(Date.now() - started).toBeGreaterThan(800);
      expect(text).toContain('[DONE]');
      const silent = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], fake: { delay_ms: 3000 } }),
      });
      // Both providers are silent for this request: one retry, then 504.
      expect(silent.status).toBe(504);
      expect(((await silent.json()) as { error: { code: string } }).error.code).toBe('upstream_timeout');
    } finally {
      await gateway.close();
    }
  });
});

describe('provider health', () => {
  it('turns a stopped upstream unhealthy within the window, sends traffic to the sibling, and returns it after recovery', async () => {
    const first = await startFakeUpstream({ name: 'first' });
    const firstPort = first.port;
    const second = await startFakeUpstream({ name: 'second' });
    const gateway = await startTestGateway(
      twoProviders({ healthIntervalMs: 100 }),
      { FIRST: first.url, SECOND: second.url },
      undefined,
      { health: true },
    );
    let restarted: FakeUpstream | undefined;
    try {
      await first.close();
      const downAt = Date.now();
      await waitUntil(() => gateway.health!.unhealthy().has('first'), 3000, 'first to turn unhealthy');
      const detectionMs = Date.now() - downAt;
      const status = (await (await fetch(`${gateway.url}/status`)).json()) as {
        nodes: Array<{ resources: Array<{ id: string; state: string }> }>;
      };
      expect(status.nodes[0].resources.map((r) => [r.id, r.state])).toEqual([
        ['first', 'unhealthy'],
        ['second', 'ready'],
      ]);
      second.reset();
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
        });
        expect(res.status).toBe(200);
        expect(res.headers.get('x-iop-resource')).toBe('second');
      }
      restarted = await startFakeUpstream({ name: 'first', port: firstPort });
      const upAt = Date.now();
      await waitUntil(() => !gateway.health!.unhealthy().has('first'), 3000, 'first to return');
      // 2 failures / 2 successes at 100 ms: detection and recovery take a few rounds, well under a second.
      expect(detectionMs).toBeLessThan(1500);
      expect(Date.now() - upAt).toBeLessThan(1500);
    } finally {
      await gateway.close();
      await second.close();
      await restarted?.close();
    }
  });
});
