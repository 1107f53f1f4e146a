import { rawExchange, seedLeases, startRedis, startRedisCluster, type TestRedis } from '@iop/dispatch/testing';
import type { ResourceStatus, StatusSnapshot } from '@iop/status';
import { parsePrometheusText, sampleValue } from '@iop/status/testing';
import { configDigest, parseConfigText } from '@iop/validate';
import { RedisHealthStore } from '@iop/dispatch';
import { Redis } from 'ioredis';
import pino from 'pino';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import { ExporterRefusal, MEMORY_BACKEND_REFUSAL, startExporter, type RunningExporter } from './exporter';

const resource = (s: StatusSnapshot, id: string): ResourceStatus =>
  s.nodes.flatMap((n) => n.resources).find((r) => r.id === id)!;
const config = (yaml: string) => {
  const loaded = parseConfigText(yaml, {}, 'test.yaml');
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return loaded;
};

describe('status exporter HTTP endpoints, counts from a real Redis', () => {
  let redis: TestRedis;
  const closers: (() => Promise<unknown>)[] = [];
  const logger = pino({ level: 'silent' });

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  afterAll(async () => {
    await redis.stop();
  });

  const start = async (yaml: string, env: Record<string, string> = {}): Promise<RunningExporter> => {
    const loaded = config(yaml);
    const exporter = await startExporter({
      config: loaded.config,
      configHash: loaded.hash,
      env,
      host: '127.0.0.1',
      port: 0,
      logger,
    });
    closers.push(() => exporter.close());
    return exporter;
  };
  /** Puts `active` held leases and `waiting` queued requests on a provider queue, as gateways would. */
  const load = async (prefix: string, providerId: string, active: number, waiting: number) => {
    closers.push(await seedLeases(redis.url, prefix, providerId, active, waiting));
  };

  it('GET /status: catalog entries with cluster-wide counts by provider id, adapter entries for a node without catalog', async () => {
    const prefix = configPrefix('exporter-status');
    const yaml = exporterYaml({ prefix, redisUrl: redis.url });
    await load(prefix, 'llama-a', 2, 3);
    await load(prefix, 'llama-b', 1, 0);
    const exporter = await start(yaml);
    const res = await fetch(`${exporter.url}/status`);
    expect(res.status).toBe(200);
    const s = (await res.json()) as StatusSnapshot;
    expect(s.config_hash).toBe(configDigest(config(yaml).config));
    expect(Date.parse(s.config_loaded_at!)).not.toBeNaN();
    expect(s.nodes.map((n) => [n.node_id, n.source, n.resources.map((r) => r.id)])).toEqual([
      ['gpu-a', 'catalog', ['llama-a', 'llama-b', 'echo-cli']],
      ['laptop', 'adapters', ['codex-cli']],
    ]);
    expect(resource(s, 'llama-a')).toMatchObject({ state: 'ready', max_concurrency: 3, in_flight: 2, queued: 3 });
    expect(resource(s, 'llama-b')).toMatchObject({ state: 'ready', max_concurrency: 2, in_flight: 1, queued: 0 });
    expect(resource(s, 'echo-cli')).toMatchObject({ in_flight: null, queued: null, max_concurrency: null });
    expect(resource(s, 'codex-cli')).toMatchObject({ pool: false, models: ['codex'], in_flight: null });
  });

  it("GET /status shows the health record the gateways share: state, reason and retry_at, on every replica's view", async () => {
    const prefix = configPrefix('exporter-health');
    const exporter = await start(exporterYaml({ prefix, redisUrl: redis.url }));
    const conn = new Redis(redis.url, { enableOfflineQueue: false });
    await new Promise((r) => conn.once('ready', r));
    closers.push(async () => conn.disconnect());
    // What a gateway writes when three requests to llama-a failed while its probe passed.
    const gateway = new RedisHealthStore(
      conn,
      prefix,
      () => ({ unhealthy_after: 3, healthy_after: 2, cooldown_ms: 30_000 }),
      () => 60_000,
    );
    for (let i = 0; i < 3; i++) await gateway.recordRequest('llama-a', false, 'upstream_timeout');
    await gateway.backOff('llama-b', 7, 'upstream 429');
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    expect(resource(s, 'llama-a')).toMatchObject({
      state: 'unhealthy',
      health: { state: 'unhealthy', reason: '3 requests failed: upstream_timeout' },
    });
    expect(Date.parse(resource(s, 'llama-a').health!.retry_at!) - Date.now()).toBeGreaterThan(20_000);
    expect(resource(s, 'llama-b')).toMatchObject({
      state: 'unhealthy',
      health: { state: 'backoff', reason: 'upstream 429' },
    });
  });

  it('GET /metrics: valid Prometheus text with the resource gauges and counts_up', async () => {
    const prefix = configPrefix('exporter-metrics');
    await load(prefix, 'llama-b', 2, 1);
    const exporter = await start(exporterYaml({ prefix, redisUrl: redis.url }));
    const res = await fetch(`${exporter.url}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const samples = parsePrometheusText(await res.text());
    const b = { node: 'gpu-a', resource: 'llama-b', category: 'openai_compat' };
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', b)).toBe(2);
    expect(sampleValue(samples, 'iop_edge_resource_queued', b)).toBe(1);
    expect(sampleValue(samples, 'iop_edge_resource_max_concurrency', b)).toBe(2);
    expect(sampleValue(samples, 'iop_edge_resource_up', b)).toBe(1);
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', { resource: 'llama-a' })).toBe(0);
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', { resource: 'echo-cli' })).toBeUndefined();
    expect(sampleValue(samples, 'iop_edge_resource_up', { node: 'laptop', resource: 'codex-cli' })).toBe(1);
    expect(sampleValue(samples, 'iop_edge_status_counts_up')).toBe(1);
  });

  it('GET /healthz answers ok; GET / is a self-contained dashboard (no external resources)', async () => {
    const exporter = await start(exporterYaml({ prefix: configPrefix('exporter-html'), redisUrl: redis.url }));
    expect(await (await fetch(`${exporter.url}/healthz`)).json()).toEqual({ status: 'ok' });
    const res = await fetch(`${exporter.url}/`);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toMatch(/<script>[\s\S]*fetch\('status'/);
    expect(html).not.toMatch(/(src|href)=["']?(https?:)?\/\//);
    expect((await fetch(`${exporter.url}/nope`)).status).toBe(404);
  });

  it.each([
    ['a bad request line', ['GET /status HTTP/1.1 extra\r\nHost: x\r\n\r\n'], 400, 'invalid_request_error'],
    [
      'a stray byte after a request',
      ['GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n{}'],
      400,
      'invalid_request_error',
    ],
    [
      'headers too large',
      [`GET /status HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`],
      431,
      'request_header_fields_too_large',
    ],
  ])(
    'answers %s refused by the HTTP parser with an OpenAI-shaped error and a request id (README "Errors")',
    async (_w, parts, status, code) => {
      const exporter = await start(exporterYaml({ prefix: configPrefix('exporter-parser'), redisUrl: redis.url }));
      const answer = await rawExchange(exporter.url, parts);
      // The last answer on the connection (a stray byte follows an answered request).
      const last = answer.text.slice(answer.text.lastIndexOf(`HTTP/1.1 ${status} `));
      expect(last.startsWith(`HTTP/1.1 ${status} `)).toBe(true);
      expect(last).toMatch(/\r\nx-request-id: [0-9a-f-]{36}\r\n/);
      expect(JSON.parse(last.slice(last.indexOf('\r\n\r\n') + 4))).toEqual({
        error: { message: expect.any(String), type: 'invalid_request_error', param: null, code },
      });
    },
  );

  it('publishes null counts (never 0) and counts_up 0 while Redis is unreachable', async () => {
    const exporter = await start(
      exporterYaml({ prefix: configPrefix('exporter-down'), redisUrl: 'redis://127.0.0.1:1' }),
    );
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    expect(resource(s, 'llama-a')).toMatchObject({ in_flight: null, queued: null, max_concurrency: 3 });
    const samples = parsePrometheusText(await (await fetch(`${exporter.url}/metrics`)).text());
    expect(sampleValue(samples, 'iop_edge_status_counts_up')).toBe(0);
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', { resource: 'llama-a' })).toBeUndefined();
  });

  it("refuses the memory backend with a message pointing at the gateway's own /status", async () => {
    const loaded = config(exporterYaml({ prefix: configPrefix('exporter-memory') }));
    const attempt = startExporter({ config: loaded.config, env: {}, host: '127.0.0.1', port: 0, logger });
    await expect(attempt).rejects.toBeInstanceOf(ExporterRefusal);
    await expect(attempt).rejects.toThrow(MEMORY_BACKEND_REFUSAL);
    expect(MEMORY_BACKEND_REFUSAL).toMatch(/gateway's own GET \/status/);
  });

  it('takes the Redis URL from REDIS_URL when the config has none', async () => {
    const prefix = configPrefix('exporter-env');
    await load(prefix, 'llama-a', 1, 0);
    const exporter = await start(exporterYaml({ prefix }), { REDIS_URL: redis.url });
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    expect(resource(s, 'llama-a').in_flight).toBe(1);
  });
});

describe('status exporter on a real 3-master Redis Cluster', () => {
  it('reports the counts of pools spread over the shards (queue.cluster)', async () => {
    const cluster = await startRedisCluster(3);
    const closers: (() => Promise<unknown>)[] = [];
    try {
      const prefix = configPrefix('exporter-cluster');
      const yaml = exporterYaml({ prefix, redisUrl: cluster.urls[1], cluster: true });
      // Both providers serve `llama`: one pool, one shard tag (the smallest id of the pool).
      closers.push(await seedLeases(cluster.urls[0], prefix, 'llama-a', 2, 1, { shardTag: 'pool.llama-a' }));
      closers.push(await seedLeases(cluster.urls[2], prefix, 'llama-b', 1, 0, { shardTag: 'pool.llama-a' }));
      const loaded = config(yaml);
      const exporter = await startExporter({
        config: loaded.config,
        configHash: loaded.hash,
        env: {},
        host: '127.0.0.1',
        port: 0,
        logger: pino({ level: 'silent' }),
      });
      closers.push(() => exporter.close());
      const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
      expect(resource(s, 'llama-a')).toMatchObject({ state: 'ready', max_concurrency: 3, in_flight: 2, queued: 1 });
      expect(resource(s, 'llama-b')).toMatchObject({ state: 'ready', max_concurrency: 2, in_flight: 1, queued: 0 });
    } finally {
      for (const close of closers.reverse()) await close();
      await cluster.stop();
    }
  }, 150_000);
});
