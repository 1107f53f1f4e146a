import { startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import {
  burstYaml,
  chatOnce,
  freeze,
  openStream,
  startReplicaFleet,
  thaw,
  type ReplicaFleet,
} from './testing/replica-fleet';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Fencing across real gateway processes (docs/architecture.md, "Fencing"): the replica that took a
 * lease holds it and renews it every 500 ms (lease TTL 2 s). Redis frees a replica's slots only when
 * its liveness key expired AND it has no Redis connection left, so a stalled replica (SIGSTOP) keeps
 * its slot — nobody else may call the provider meanwhile — and, once resumed, aborts the call whose
 * lease it could not renew; a killed one (SIGKILL) loses its slots within 3 s.
 */
describe('fencing of leases across gateway replicas (Redis backend)', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startFakeUpstream();
  });
  beforeEach(() => upstream.reset());
  afterEach(async () => {
    // SIGKILL ends a stopped process too.
    await fleet?.close();
    fleet = undefined;
  });
  afterAll(async () => {
    await upstream.close();
    await redis.stop();
  });

  const s1 = async () => (await fleet!.counts(['s1'])).get('s1')!;
  const upstreamS1 = () => upstream.stats().byModel['up-s1'] ?? { total: 0, current: 0, max: 0, aborted: 0 };

  it("keeps a frozen replica's slot for the whole SIGSTOP (8 s); resumed, it aborts its stream with an error event and a warning, then the request waiting on the other replica is served", async () => {
    fleet = await startReplicaFleet(2, burstYaml(), redis.url, upstream.url);
    const [r1, r2] = fleet.replicas;
    // s1: max_concurrency 1. A stream of 400 chunks, 100 ms apart (40 s), holds its only slot through R1.
    const stream = await openStream(r1.url, 'single', { chunks: 400, chunk_gap_ms: 100 });
    expect(stream.status).toBe(200);
    expect(await s1()).toEqual({ inFlight: 1, queued: 0 });
    await waitUntil(async () => (await fleet!.liveness()).alive.length === 2, 2000, 'both replicas alive');

    const frozenAt = Date.now();
    freeze(r1);
    let servedAt: number | undefined;
    const waiting = chatOnce(r2.url, 'single', { delay_ms: 10 }).then((r) => {
      servedAt = Date.now();
      return r;
    });
    await waitUntil(async () => (await s1()).queued === 1, 3000, 'the request through R2 to wait');
    // R1's liveness key expires (TTL 2 s) while its connections stay open: the sweep must not free its slot.
    await waitUntil(
      async () => (await fleet!.liveness()).alive.length === 1,
      4000,
      "the frozen replica's liveness key to expire",
    );
    while (Date.now() - frozenAt < 8000) {
      expect(await s1()).toEqual({ inFlight: 1, queued: 1 });
      expect(upstreamS1().current).toBe(1);
      await sleep(100);
    }
    expect(servedAt).toBeUndefined();
    expect(upstreamS1().total).toBe(1);

    const thawedAt = Date.now();
    thaw(r1);
    // R1 cannot prove its lease any more (not renewed for ~8 s > 1.8 s): it stops the stream itself.
    const { text } = await stream.rest;
    const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
    const last = JSON.parse(events[events.length - 1].slice('data: '.length)) as {
      error?: { code: string; message: string };
    };
    expect(last.error).toMatchObject({ code: 'queue_unavailable', message: expect.stringContaining('"s1"') });
    expect(text).not.toContain('[DONE]');
    await waitUntil(
      () => /lease \S+ of provider \\"s1\\" lost/.test(r1.output()),
      2000,
      `R1's warning about the fenced lease; R1 output:\n${r1.output()}`,
    );
    const warning = r1
      .output()
      .split('\n')
      .find((line) => line.includes('of provider \\"s1\\" lost'))!;
    const logged = JSON.parse(warning) as { level: number; msg: string };
    expect(logged.level).toBe(40);
    const overdue = /lost \(not renewed for (\d+) ms \(limit 1800 ms\)\); aborting its upstream call$/.exec(logged.msg);
    expect(overdue).not.toBeNull();
    expect(Number(overdue![1])).toBeGreaterThanOrEqual(7000);

    // Only then does the slot go to R2's request, and the upstream never had two calls at once.
    const served = await waiting;
    expect(served.status).toBe(200);
    expect(servedAt! - thawedAt).toBeLessThan(2000);
    expect(upstreamS1()).toMatchObject({ total: 2, max: 1, aborted: 1 });
    await waitUntil(
      async () => {
        const c = await s1();
        return c.inFlight === 0 && c.queued === 0;
      },
      2000,
      's1 idle again',
    );
    expect(await fleet.jobKeys()).toEqual([]);
  }, 40_000);

  it('frees the slot of a replica killed (SIGKILL) mid-stream within 3 s: the request waiting on the other replica is served', async () => {
    fleet = await startReplicaFleet(2, burstYaml(), redis.url, upstream.url);
    const [r1, r2] = fleet.replicas;
    const stream = await openStream(r1.url, 'single', { chunks: 400, chunk_gap_ms: 100 });
    expect(stream.status).toBe(200);
    const waiting = chatOnce(r2.url, 'single', { delay_ms: 10 }).then((r) => ({ ...r, at: Date.now() }));
    await waitUntil(async () => (await s1()).queued === 1, 3000, 'the request through R2 to wait');
    const killedAt = Date.now();
    await r1.kill();
    const { text } = await stream.rest;
    expect(text).not.toContain('[DONE]');
    const served = await waiting;
    expect(served.status).toBe(200);
    expect(served.at - killedAt).toBeLessThanOrEqual(3000);
    await waitUntil(
      async () => {
        const c = await s1();
        return c.inFlight === 0 && c.queued === 0;
      },
      3000 - (Date.now() - killedAt),
      's1 idle within 3 s of the kill',
    );
    expect(upstreamS1()).toMatchObject({ total: 2, max: 1 });
  });
});
