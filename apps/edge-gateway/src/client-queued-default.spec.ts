import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

// README "Clients, priority and fair share": a client without its own max_queued may keep half of
// gateway.max_connections waiting per pool (parked at its max_in_flight included); one more is
// 429 queue_full with Retry-After, so one client never holds every connection with waiting requests.

/**
 * 8 connections, all of one address as behind a load balancer: a client without max_queued may keep 4
 * requests waiting. `batch` parks past 1 lease.
 */
const yaml = fleetYaml({
  clients: [
    { id: 'chat', keys: ['chat-key'] },
    { id: 'batch', keys: ['batch-key'], max_in_flight: 1 },
  ],
}).replace('  max_body_bytes:', '  max_connections: 8\n  max_connections_per_address: 8\n  max_body_bytes:');

describe('a client without max_queued is bounded by default (half of gateway.max_connections)', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  const abort = new AbortController();
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(yaml, { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, undefined, {
      gatewayServer: true,
    });
  });
  afterAll(async () => {
    abort.abort();
    await gateway.close();
    await upstream.close();
  });

  const chat = (key: string, model: string, delayMs: number, signal: AbortSignal = abort.signal) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], fake: { delay_ms: delayMs } }),
      signal,
    });
  const status = async () =>
    (await (await fetch(`${gateway.url}/status`)).json()) as Required<Pick<StatusSnapshot, 'clients'>>;

  it('refuses the request past the default with 429 queue_full and Retry-After; other clients and /healthz still get in', async () => {
    // One holds batch's lease, three wait parked at its max_in_flight: 4 of the 8 connections, half of
    // them, which the replica's bound on one client's pooled requests allows (the pool's default
    // max_queued, 4, would allow one more parked).
    for (let i = 0; i < 4; i++) void chat('batch-key', 'small', 30_000).catch(() => undefined);
    await waitUntil(
      async () => (await status()).clients.find((c) => c.id === 'batch')?.queued === 3,
      5000,
      'batch: one lease held, three requests parked',
    );
    // Without the default this one would park too (and the next ones would take every connection).
    const refused = await chat('batch-key', 'small', 0, AbortSignal.timeout(3000));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'queue_full',
      message: expect.stringContaining('"batch"'),
    });

    expect((await status()).clients.find((c) => c.id === 'batch')).toMatchObject({
      max_in_flight: 1,
      max_queued: 4,
      in_flight: 1,
      queued: 3,
    });
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
    expect((await chat('chat-key', 'llama', 0, AbortSignal.timeout(5000))).status).toBe(200);
  });
});

describe("a client's pooled requests, waiting or running, are bounded per replica across pools (half of gateway.max_connections)", () => {
  // 10 connections: batch may keep 5 waiting per pool by default, and 5 pooled requests on this replica in all.
  const twoPools = fleetYaml({ clients: [{ id: 'batch', keys: ['batch-key'], max_in_flight: 1 }] }).replace(
    '  max_body_bytes:',
    '  max_connections: 10\n  max_connections_per_address: 10\n  max_body_bytes:',
  );
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  const abort = new AbortController();
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(twoPools, { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, undefined, {
      gatewayServer: true,
    });
  });
  afterAll(async () => {
    abort.abort();
    await gateway.close();
    await upstream.close();
  });
  const chat = (model: string, signal: AbortSignal = abort.signal) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer batch-key', 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], fake: { delay_ms: 30_000 } }),
      signal,
    });
  const held = async () =>
    ((await (await fetch(`${gateway.url}/status`)).json()) as Required<Pick<StatusSnapshot, 'clients'>>).clients
      .filter((c) => c.id === 'batch')
      .reduce((n, c) => n + (c.queued ?? 0) + (c.in_flight ?? 0), 0);

  it('refuses the sixth pooled request over two pools (two running, three parked) with 429 queue_full naming the replica; /healthz still answers', async () => {
    for (const model of ['small', 'llama', 'small', 'llama', 'small']) void chat(model).catch(() => undefined);
    await waitUntil(async () => (await held()) === 5, 5000, 'batch: two leases held, three requests parked');
    const refused = await chat('llama', AbortSignal.timeout(3000));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'queue_full',
      message: expect.stringContaining('on this gateway replica'),
    });
    expect(await held()).toBe(5);
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
  });
});
