import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, type KnobName } from '@iop/fake-upstream';
import type { ResourceStatus, StatusSnapshot } from '@iop/status';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import OpenAI from 'openai';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/**
 * Upstreams as they really behave, with gateway processes (README "Provider health", "Streaming",
 * "Failover", "Embeddings", "Operating a running fleet"): one process on the memory backend, and two
 * replicas sharing a real Redis (admission, leases and health shared), each row as reported.
 */

type Knobs = Partial<Record<KnobName, number>>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A pool `pm` of `pa` (on `${A}`) and `pb` (on `${B}`), and a provider `solo` of max_concurrency 1 on `${B}`. */
const yaml = (opts: { prefix: string; backend: 'memory' | 'redis'; disabled?: boolean }) => `
version: 1
gateway: { request_timeout_ms: 1000, stream_idle_timeout_ms: 500 }
queue: { backend: ${opts.backend}, prefix: "${opts.prefix}", max_wait_ms: 10000 }
health: { interval_ms: 500, timeout_ms: 300, unhealthy_after: 2, healthy_after: 2, cooldown_ms: 4000 }
nodes:
  - id: n
    adapters:
      - { id: a, type: openai_compat, base_url: "\${A}" }
      - { id: b, type: vllm, base_url: "\${B}" }
      - { id: o, type: ollama, base_url: "\${B}" }
    providers:
      - { id: pa, category: openai_compat, adapter: a, models: [pm], max_concurrency: 4${opts.disabled ? ', enabled: false' : ''} }
      - { id: pb, category: vllm, adapter: b, models: [pm], max_concurrency: 4${opts.disabled ? ', enabled: false' : ''} }
      - { id: solo, category: vllm, adapter: b, models: [sm], max_concurrency: 1 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 2 }
`;

async function post(
  url: string,
  path: string,
  body: Record<string, unknown>,
): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}
const chat = (model: string, fake: Knobs = {}, stream = false) => ({
  model,
  messages: [{ role: 'user', content: 'hello' }],
  stream,
  fake,
});
const resources = async (url: string): Promise<ResourceStatus[]> =>
  ((await (await fetch(`${url}/status`)).json()) as StatusSnapshot).nodes.flatMap((n) => n.resources);
const resource = async (url: string, id: string) => (await resources(url)).find((r) => r.id === id)!;
/** Log lines of a process's output matching `re`. */
const lines = (p: GatewayProcess, re: RegExp) =>
  p
    .output()
    .split('\n')
    .filter((l) => re.test(l));

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

const backends = [
  ['memory, one gateway process', 'memory', 1],
  ['redis, two gateway replicas', 'redis', 2],
] as const;

describe.each(backends)('upstreams as they really behave (%s)', (_name, backend, replicaCount) => {
  let a: FakeUpstream;
  let b: FakeUpstream;
  let replicas: GatewayProcess[] = [];
  let file: string;
  let prefix: string;

  const start = async (aKnobs: Knobs = {}) => {
    a = await startFakeUpstream({ name: 'a', knobs: aKnobs });
    b = await startFakeUpstream({ name: 'b' });
    prefix = uniquePrefix('upstreams');
    file = writeTempConfig(yaml({ prefix, backend }));
    const env = { A: a.url, B: b.origin, LOG_LEVEL: 'info', ...(backend === 'redis' ? { REDIS_URL: redis.url } : {}) };
    replicas = await Promise.all(Array.from({ length: replicaCount }, () => spawnGateway(file, { env })));
  };
  const at = (i: number) => replicas[i % replicas.length].url;

  afterEach(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    replicas = [];
    await a?.close();
    await b?.close();
  });

  it('a provider whose requests fail while its probe passes turns unhealthy, logged once, and returns through a trial request after its cooldown, not through the probe', async () => {
    // pa answers its probe (GET /v1/models) at once but never sends a byte on completions. The requests
    // ask for 16 tokens: a size that cannot explain a second without an answer (README "Provider health").
    await start({ delay_ms: 600_000 });
    const paid: number[] = [];
    for (let i = 0; i < 8; i++) {
      const started = Date.now();
      const res = await post(at(i), '/v1/chat/completions', { ...chat('pm'), max_tokens: 16 });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-iop-resource')).toBe('pb');
      paid.push(Date.now() - started);
      await sleep(100);
    }
    // Only the requests before pa turned unhealthy paid the first-byte timeout (unhealthy_after: 2).
    expect(paid.filter((ms) => ms >= 900).length).toBeLessThanOrEqual(backend === 'redis' ? 3 : 2);
    expect(paid.slice(-4).every((ms) => ms < 900)).toBe(true);
    for (const r of replicas) {
      expect(await resource(r.url, 'pa')).toMatchObject({
        state: 'unhealthy',
        health: { state: 'unhealthy', reason: expect.stringMatching(/requests failed: upstream sent no byte/) },
      });
    }
    // Its probe keeps passing: it stays out until the cooldown ends.
    await sleep(800);
    expect((await resource(at(0), 'pa')).state).toBe('unhealthy');

    // pa recovers; after the cooldown one trial request brings it back.
    const port = a.port;
    await a.close();
    a = await startFakeUpstream({ name: 'a', port });
    await waitUntil(
      async () => (await resource(at(0), 'pa')).health?.state === 'half_open',
      5000,
      'pa to be half-open after its cooldown',
    );
    a.reset();
    let sawPa = false;
    for (let i = 0; i < 6 && !sawPa; i++)
      sawPa = (await post(at(i), '/v1/chat/completions', chat('pm'))).headers.get('x-iop-resource') === 'pa';
    expect(sawPa).toBe(true);
    for (const r of replicas)
      await waitUntil(
        async () => (await resource(r.url, 'pa')).state === 'ready',
        3000,
        'every replica to see pa healthy',
      );
    // Each transition logged once over the whole fleet, by the replica that made it (its line is
    // written within the logger's flush interval; every replica's held lines are out before counting).
    const all = (re: RegExp) => replicas.flatMap((r) => lines(r, re));
    const transitions = [
      /provider pa: healthy → unhealthy/,
      /provider pa: half_open → trial/,
      /provider pa: trial → healthy/,
    ];
    for (const re of transitions) await waitUntil(() => all(re).length > 0, 5000, `a line ${re} from a replica`);
    await Promise.all(replicas.map((r) => r.settled()));
    expect(all(/provider pa: healthy → unhealthy/)).toHaveLength(1);
    expect(all(/provider pa: half_open → trial/)).toHaveLength(1);
    expect(all(/provider pa: trial → healthy/)).toHaveLength(1);
    expect(
      all(/"request_id"/).filter((l) => /upstream failed before the first byte; retrying/.test(l)).length,
    ).toBeGreaterThan(0);
  });

  it('a 429 before the first byte fails over and backs the provider off for its Retry-After, on every replica', async () => {
    await start({ status: 429, retry_after: 5 });
    for (let i = 0; i < 6; i++) {
      const res = await post(at(i), '/v1/chat/completions', chat('pm'));
      expect(res.status).toBe(200);
      expect(res.headers.get('x-iop-resource')).toBe('pb');
      await sleep(backend === 'redis' ? 300 : 0);
    }
    // Each replica learns of a back-off another one booked within health.interval_ms (its cache refresh).
    expect(a.stats().total).toBeLessThanOrEqual(replicaCount);
    for (const r of replicas)
      await waitUntil(
        async () => (await resource(r.url, 'pa')).health?.state === 'backoff',
        1500,
        'every replica to see the back-off',
      );
    a.reset();
    for (let i = 0; i < 4; i++)
      expect((await post(at(i), '/v1/chat/completions', chat('pm'))).headers.get('x-iop-resource')).toBe('pb');
    expect(a.stats().total).toBe(0);
  });

  it('a reset before the first byte fails over, is booked, and every replica sees it', async () => {
    await start({ reset_before_body: 1 });
    for (let i = 0; i < 2; i++) {
      const res = await post(at(i), '/v1/chat/completions', chat('pm'));
      expect(res.status).toBe(200);
      expect(res.headers.get('x-iop-resource')).toBe('pb');
    }
    for (const r of replicas)
      await waitUntil(
        async () => (await resource(r.url, 'pa')).state === 'unhealthy',
        2000,
        'pa unhealthy on every replica',
      );
    // Once each, or twice on a socket a probe used (README "Connections to an upstream": resent once).
    expect([2, 3, 4]).toContain(a.stats().total);
  });

  it("a client's own mistake reported in-band by a translated Responses stream is passed on and never books the provider", async () => {
    await start();
    for (let i = 0; i < 4; i++) {
      const res = await post(at(i), '/v1/responses', {
        model: 'om',
        input: 'hello',
        stream: true,
        fake: { error_event_after: 0, error_event_status: 400 },
      });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text)).toMatchObject({ error: { code: 'context_length_exceeded' } });
    }
    await sleep(600);
    for (const r of replicas) expect(await resource(r.url, 'ol')).toMatchObject({ state: 'ready' });
  });

  it('a client that reads nothing of a big stream loses its slot: the lease is released and the next request, on any replica, is served', async () => {
    await start();
    const { port } = new URL(at(0));
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.pause();
    const body = JSON.stringify(chat('sm', { chunks: 200, chunk_bytes: 100_000 }, true));
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await waitUntil(
      async () => (await resource(at(0), 'solo')).in_flight === 1,
      3000,
      'the stream to hold the only slot',
    );
    await waitUntil(async () => (await resource(at(0), 'solo')).in_flight === 0, 4000, 'the stalled stream to be cut');
    const next = await post(at(1), '/v1/chat/completions', chat('sm'));
    expect(next.status).toBe(200);
    await replicas[0].waitForOutput(/client accepted no byte for gateway.stream_idle_timeout_ms/);
    await replicas[0].settled();
    expect(lines(replicas[0], /client accepted no byte for gateway.stream_idle_timeout_ms/)).toHaveLength(1);
    socket.destroy();
  });

  it('serves /v1/embeddings to the openai client through the queue, with leases and status counts', async () => {
    await start();
    const clients = replicas.map((r) => new OpenAI({ baseURL: `${r.url}/v1`, apiKey: 'x', maxRetries: 0 }));
    const create = (i: number) =>
      clients[i % clients.length].embeddings
        .create({ model: 'sm', input: [`text ${i}`], fake: { delay_ms: 300 } } as never)
        .withResponse();
    const results = await Promise.all(Array.from({ length: 4 }, (_, i) => create(i)));
    for (const { data } of results) expect(data.data[0].embedding).toHaveLength(8);
    // solo has max_concurrency 1: the four requests queued behind each other, on every replica.
    expect(b.stats().max).toBe(1);
    expect(
      results.filter(({ response }) => Number(response.headers.get('x-iop-queue-wait-ms')) > 0).length,
    ).toBeGreaterThanOrEqual(2);
    // The last lease is released as its call ends, a Redis round trip after its answer went out.
    await waitUntil(
      async () => {
        const { in_flight, queued } = await resource(at(0), 'solo');
        return in_flight === 0 && queued === 0;
      },
      2000,
      "solo's counts back to 0 after the last answer",
    );
  });

  it('a hot reload that disables every provider of a model answers 503 no_available_provider with Retry-After, not 404', async () => {
    await start();
    expect((await post(at(0), '/v1/chat/completions', chat('pm'))).status).toBe(200);
    writeFileSync(file, yaml({ prefix, backend, disabled: true }));
    for (const r of replicas) r.child.kill('SIGHUP');
    for (let i = 0; i < replicas.length; i++) {
      await waitUntil(
        async () => (await post(at(i), '/v1/chat/completions', chat('pm'))).status === 503,
        5000,
        'the reload to apply',
      );
      const res = await post(at(i), '/v1/chat/completions', chat('pm'));
      expect(res.headers.get('retry-after')).not.toBeNull();
      expect(JSON.parse(res.text)).toMatchObject({ error: { code: 'no_available_provider' } });
      const models = (await (await fetch(`${at(i)}/v1/models`)).json()) as { data: Array<{ id: string }> };
      expect(models.data.map((m) => m.id)).toContain('pm');
    }
  });
});

describe('a Redis outage is logged once when it starts and once when it ends', () => {
  it('not per provider per probe round', async () => {
    const own = await startRedis({ forceOwn: true });
    const up = await startFakeUpstream({ name: 'up' });
    const file = writeTempConfig(yaml({ prefix: uniquePrefix('outage'), backend: 'redis' }));
    const gateway = await spawnGateway(file, {
      env: { A: up.url, B: up.origin, LOG_LEVEL: 'info', REDIS_URL: own.url },
    });
    try {
      expect((await post(gateway.url, '/v1/chat/completions', chat('pm'))).status).toBe(200);
      await own.stop();
      // Eight probe rounds of three providers with Redis down.
      await sleep(4000);
      await own.start();
      await waitUntil(
        async () => (await post(gateway.url, '/v1/chat/completions', chat('pm'))).status === 200,
        10_000,
        'service to resume',
      );
      await sleep(1200);
      await gateway.waitForOutput(/redis reachable again for provider health and affinity/);
      expect(lines(gateway, /redis unavailable for provider health and affinity/)).toHaveLength(1);
      expect(lines(gateway, /redis reachable again for provider health and affinity/)).toHaveLength(1);
      expect(lines(gateway, /redis queue: Redis unreachable/)).toHaveLength(1);
    } finally {
      await gateway.stop();
      await up.close();
      await own.stop();
    }
  });
});
