import { RedisProviderQueue, MemoryProviderQueue } from '@iop/dispatch';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { fleetYaml, startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { Redis } from 'ioredis';
import pino from 'pino';
import { startTestGateway, type TestGateway } from '../testing/gateway-harness';
import { QUEUE_REACHABLE_TIMEOUT_MS, type Readiness } from './probe-routes';

const readyz = async (gateway: TestGateway) => {
  const started = Date.now();
  const res = await fetch(`${gateway.url}/readyz`);
  return { status: res.status, body: (await res.json()) as Readiness, ms: Date.now() - started };
};
const reachableGauge = async (gateway: TestGateway) =>
  /^iop_edge_queue_reachable\{backend="(\w+)"\} (\d)$/m
    .exec(await (await fetch(`${gateway.url}/metrics`)).text())
    ?.slice(1);
const chat = async (gateway: TestGateway, model: string) => {
  const res = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }] }),
  });
  const body = (await res.json()) as { error?: { code: string } };
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body };
};

/**
 * GET /readyz says whether this process can answer, never whether Redis can (README "Load balancer
 * settings that matter"): a Redis outage reaches every replica at once, and a 503 would make the
 * load balancer drop them all, direct routes included.
 */
describe('GET /readyz and iop_edge_queue_reachable', () => {
  let upstream: FakeUpstream;
  let redis: TestRedis;
  let gateway: TestGateway | undefined;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    redis = await startRedis({ forceOwn: true });
  });
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });
  afterAll(async () => {
    await upstream.close();
    await redis.stop();
  });
  const env = () => ({ UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' });
  const redisQueue = () =>
    new RedisProviderQueue({ redisUrl: redis.url, prefix: uniquePrefix('readyz'), logger: pino({ level: 'silent' }) });

  it('memory backend: ready, the queue reachable', async () => {
    gateway = await startTestGateway(fleetYaml(), env(), new MemoryProviderQueue());
    expect(await readyz(gateway)).toMatchObject({
      status: 200,
      body: { ready: true, queue: { backend: 'memory', reachable: true } },
    });
    expect(await reachableGauge(gateway)).toEqual(['memory', '1']);
  });

  it('redis backend, Redis killed: still 200 ready, the queue unreachable in the body and the gauge; pooled requests get 503 queue_unavailable, direct ones are served', async () => {
    gateway = await startTestGateway(fleetYaml(), env(), redisQueue());
    expect((await readyz(gateway)).body).toEqual({ ready: true, queue: { backend: 'redis', reachable: true } });
    expect(await reachableGauge(gateway)).toEqual(['redis', '1']);
    await redis.kill();
    try {
      expect(await readyz(gateway)).toMatchObject({
        status: 200,
        body: { ready: true, queue: { backend: 'redis', reachable: false } },
      });
      expect(await reachableGauge(gateway)).toEqual(['redis', '0']);
      const pooled = await chat(gateway, 'llama');
      expect({ status: pooled.status, code: pooled.body.error?.code }).toEqual({
        status: 503,
        code: 'queue_unavailable',
      });
      expect(pooled.retryAfter).toMatch(/^\d+$/);
      expect((await chat(gateway, 'echo')).status).toBe(200);
    } finally {
      await redis.start();
    }
    await waitUntil(
      async () => (await readyz(gateway!)).body.queue?.reachable === true,
      15_000,
      'Redis reachable again',
    );
    expect(await reachableGauge(gateway)).toEqual(['redis', '1']);
  });

  it('redis backend, Redis paused (SIGSTOP): /readyz still answers 200 at once, without waiting on Redis', async () => {
    gateway = await startTestGateway(fleetYaml(), env(), redisQueue());
    const admin = new Redis(redis.url, { lazyConnect: true });
    await admin.connect();
    const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
    admin.disconnect();
    expect(pid).toBeGreaterThan(0);
    process.kill(pid, 'SIGSTOP');
    try {
      const paused = await readyz(gateway);
      expect(paused).toMatchObject({
        status: 200,
        body: { ready: true, queue: { backend: 'redis', reachable: false } },
      });
      expect(paused.ms).toBeLessThan(QUEUE_REACHABLE_TIMEOUT_MS + 500);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await waitUntil(
      async () => (await readyz(gateway!)).body.queue?.reachable === true,
      15_000,
      'Redis answering again',
    );
  });
});
