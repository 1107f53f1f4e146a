import { MemoryProviderQueue, type ProviderCounts, type ProviderQueue, type QueueCounts } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import type { ResourceStatus, StatusSnapshot } from '@iop/status';
import { parsePrometheusText, sampleValue } from '@iop/status/testing';
import { startTestGateway, type TestGateway } from '../testing/gateway-harness';

const chat = (
  gateway: TestGateway,
  model: string,
  fake: Record<string, number> = {},
  signal?: AbortSignal,
  content = 'x',
) =>
  fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }], fake }),
    signal,
  });
const status = async (gateway: TestGateway): Promise<StatusSnapshot> =>
  (await fetch(`${gateway.url}/status`)).json() as Promise<StatusSnapshot>;
const resource = (s: StatusSnapshot, id: string): ResourceStatus =>
  s.nodes.flatMap((n) => n.resources).find((r) => r.id === id)!;
const metrics = async (gateway: TestGateway) => {
  const res = await fetch(`${gateway.url}/metrics`);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, samples: parsePrometheusText(text) };
};

/** A queue whose counts fail, like a Redis outage. */
class BrokenCountsQueue extends MemoryProviderQueue {
  override async counts(): Promise<Map<string, ProviderCounts>> {
    throw new Error('redis down');
  }
  // What /status reads: pool and client counts in one snapshot.
  override async snapshotCounts(): Promise<QueueCounts> {
    throw new Error('redis down');
  }
}

describe('gateway GET /status and GET /metrics', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway | undefined;
  const start = async (queue?: ProviderQueue) => {
    gateway = await startTestGateway(
      fleetYaml(),
      { UPSTREAM: upstream.url, UPSTREAM_KEY: 'secret-upstream-key' },
      queue,
    );
    return gateway;
  };

  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });
  afterAll(async () => {
    await upstream.close();
  });

  it("serves this replica's resource-first snapshot: catalog entries only for gpu-a, adapter entries for laptop", async () => {
    const g = await start();
    const s = await status(g);
    expect(Date.parse(s.generated_at)).not.toBeNaN();
    expect(s.nodes.map((n) => [n.node_id, n.source, n.resources.map((r) => r.id)])).toEqual([
      ['gpu-a', 'catalog', ['pool-a', 'pool-b', 'solo', 'olla', 'echo-cli']],
      ['laptop', 'adapters', ['laptop-compat']],
    ]);
    expect(resource(s, 'pool-a')).toMatchObject({
      pool: true,
      state: 'ready',
      max_concurrency: 2,
      in_flight: 0,
      queued: 0,
      models: ['llama'],
    });
    expect(resource(s, 'echo-cli')).toMatchObject({
      pool: false,
      max_concurrency: null,
      in_flight: null,
      queued: null,
    });
    expect(resource(s, 'laptop-compat')).toMatchObject({ pool: false, models: ['legacy'], in_flight: null });
  });

  it('two providers on the same node report independent in_flight and queued under load', async () => {
    const g = await start();
    const abort = new AbortController();
    const held = [
      ...[1, 2, 3].map(() => chat(g, 'small', { delay_ms: 30_000 }, abort.signal).catch(() => undefined)),
      ...[1, 2].map(() => chat(g, 'qwen', { delay_ms: 30_000 }, abort.signal).catch(() => undefined)),
    ];
    try {
      await waitUntil(
        async () => {
          const s = await status(g);
          return resource(s, 'solo').queued === 2 && resource(s, 'olla').in_flight === 2;
        },
        5000,
        'solo 1+2 and olla 2+0',
      );
      const s = await status(g);
      expect([resource(s, 'solo').in_flight, resource(s, 'solo').queued]).toEqual([1, 2]);
      expect([resource(s, 'olla').in_flight, resource(s, 'olla').queued]).toEqual([2, 0]);
      expect([resource(s, 'pool-a').in_flight, resource(s, 'pool-b').in_flight]).toEqual([0, 0]);
      const { samples } = await metrics(g);
      expect(
        sampleValue(samples, 'iop_edge_resource_in_flight', {
          node: 'gpu-a',
          resource: 'solo',
          category: 'openai_compat',
        }),
      ).toBe(1);
      expect(sampleValue(samples, 'iop_edge_resource_queued', { resource: 'solo' })).toBe(2);
      expect(sampleValue(samples, 'iop_edge_resource_in_flight', { resource: 'olla', category: 'ollama' })).toBe(2);
      expect(sampleValue(samples, 'iop_edge_resource_queued', { resource: 'olla' })).toBe(0);
      expect(sampleValue(samples, 'iop_edge_requests_in_flight')).toBe(5);
    } finally {
      abort.abort();
      await Promise.all(held);
    }
    await waitUntil(
      async () =>
        resource(await status(g), 'solo').in_flight === 0 && resource(await status(g), 'olla').in_flight === 0,
      5000,
      'leases released',
    );
  });

  it('counts requests by model, route kind and status, with model bounded by the config and no client text in labels', async () => {
    const g = await start();
    expect((await chat(g, 'llama', {}, undefined, 'my secret prompt')).status).toBe(200);
    expect((await chat(g, 'echo')).status).toBe(200);
    expect((await chat(g, 'no-such-model-xyz')).status).toBe(404);
    expect((await chat(g, 'llama', { status: 500 })).status).toBe(502);
    const { text, samples } = await metrics(g);
    expect(sampleValue(samples, 'iop_edge_requests_total', { model: 'llama', route: 'pool', status: '200' })).toBe(1);
    expect(sampleValue(samples, 'iop_edge_requests_total', { model: 'llama', route: 'pool', status: '502' })).toBe(1);
    expect(sampleValue(samples, 'iop_edge_requests_total', { model: 'echo', route: 'direct', status: '200' })).toBe(1);
    expect(sampleValue(samples, 'iop_edge_requests_total', { model: 'other', route: 'none', status: '404' })).toBe(1);
    expect(sampleValue(samples, 'iop_edge_request_duration_seconds_count', { model: 'llama', route: 'pool' })).toBe(2);
    expect(sampleValue(samples, 'iop_edge_time_to_first_byte_seconds_count', { model: 'echo', route: 'direct' })).toBe(
      1,
    );
    expect(sampleValue(samples, 'iop_edge_queue_wait_seconds_count', { model: 'llama' })).toBe(2);
    expect(sampleValue(samples, 'iop_edge_queue_wait_seconds_count', { model: 'echo' })).toBeUndefined();
    expect(sampleValue(samples, 'iop_edge_requests_in_flight')).toBe(0);
    // The request's text ("my secret prompt") and model never; the word "prompt" itself is a `kind` of iop_edge_client_tokens_total.
    expect(text).not.toMatch(/no-such-model-xyz|secret/);
  });

  it('reports null counts (never a made-up 0) when the queue cannot answer', async () => {
    const g = await start(new BrokenCountsQueue());
    const s = await status(g);
    expect(resource(s, 'pool-a')).toMatchObject({ in_flight: null, queued: null, max_concurrency: 2, state: 'ready' });
    const { samples } = await metrics(g);
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', { resource: 'pool-a' })).toBeUndefined();
    expect(sampleValue(samples, 'iop_edge_resource_up', { resource: 'pool-a' })).toBe(1);
  });
});
