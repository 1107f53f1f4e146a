import { startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import {
  chatOnce,
  maxConcurrencySeen,
  replicaYaml,
  runConcurrently,
  startReplicaFleet,
  type ReplicaFleet,
} from './testing/replica-fleet';

describe('gateway replicas when Redis fails', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet | undefined;
  const maxSeen = (model: string) => maxConcurrencySeen(upstream, model);

  beforeAll(async () => {
    redis = await startRedis({ forceOwn: true });
    upstream = await startFakeUpstream();
  });
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
    if (redis.own) await redis.start().catch(() => undefined);
  });
  afterAll(async () => {
    await upstream.close();
    await redis.stop();
  });

  it('answers 503 queue_unavailable fast while Redis is down, keeps serving the CLI route, stays ready (Redis state in the body and a gauge), and recovers with no restart', async () => {
    fleet = await startReplicaFleet(2, replicaYaml(), redis.url, upstream.url);
    const [a] = fleet.replicas;
    expect((await chatOnce(a.url, 'pool')).status).toBe(200);
    await redis.kill();
    const started = Date.now();
    const down = await chatOnce(a.url, 'pool');
    expect(Date.now() - started).toBeLessThan(1500);
    expect(down.status).toBe(503);
    expect(JSON.parse(down.body).error.code).toBe('queue_unavailable');
    expect(down.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await chatOnce(a.url, 'echo')).status).toBe(200);
    // Ready all the same: a load balancer keeps the replica, which answers both routes as above.
    const readyz = async () => {
      const res = await fetch(`${a.url}/readyz`);
      return { status: res.status, body: await res.json() };
    };
    const reachableGauge = async () =>
      /^iop_edge_queue_reachable\{backend="redis"\} (\d)$/m.exec(await (await fetch(`${a.url}/metrics`)).text())?.[1];
    expect(await readyz()).toEqual({
      status: 200,
      body: { ready: true, queue: { backend: 'redis', reachable: false } },
    });
    expect(await reachableGauge()).toBe('0');
    await redis.start();
    await waitUntil(async () => (await chatOnce(a.url, 'pool')).status === 200, 15_000, 'pool routes to recover');
    expect(await readyz()).toEqual({
      status: 200,
      body: { ready: true, queue: { backend: 'redis', reachable: true } },
    });
    expect(await reachableGauge()).toBe('1');
  }, 30_000);

  it('keeps the limit through a Redis restart without persistence while leases are held and requests wait', async () => {
    fleet = await startReplicaFleet(3, replicaYaml(), redis.url, upstream.url);
    const urls = fleet.replicas.map((r) => r.url);
    upstream.reset();
    const requests = Array.from({ length: 24 }, (_, i) => chatOnce(urls[i % 3], 'pool', { delay_ms: 2500 }));
    await waitUntil(() => upstream.stats().current === 8, 5000, 'both providers full');
    await redis.kill();
    await redis.start();
    const results = await Promise.all(requests);
    // Every request ends with an answer or a clear error, never a hang.
    for (const r of results) {
      if (r.status !== 200) expect(['queue_unavailable', 'queue_timeout']).toContain(JSON.parse(r.body).error.code);
    }
    expect(results.filter((r) => r.status === 200).length).toBeGreaterThan(8);
    expect(maxSeen('up-3')).toBeLessThanOrEqual(3);
    expect(maxSeen('up-5')).toBeLessThanOrEqual(5);
    // After the restart the limit is re-applied and holds for new work.
    upstream.reset();
    const after = await runConcurrently(40, 20, (i) => chatOnce(urls[i % 3], 'pool', { delay_ms: 30 }));
    expect(after.every((r) => r.status === 200)).toBe(true);
    expect(maxSeen('up-3')).toBeLessThanOrEqual(3);
    expect(maxSeen('up-5')).toBeLessThanOrEqual(5);
  }, 60_000);
});
