import { scanKeys, startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import {
  chatOnce,
  maxConcurrencySeen,
  replicaYaml,
  runConcurrently,
  startReplicaFleet,
  type ReplicaFleet,
} from './testing/replica-fleet';

/**
 * Provider pools across replicas (docs/architecture.md, "Invariants and their tests"): real gateway processes on one
 * real Redis (the lease store of docs/architecture.md, "Lease protocol"), a fake upstream that
 * records each provider's concurrency. Bursts, fencing and a failing Redis have their own files
 * (fleet-admission.spec.ts, fleet-fencing.spec.ts, replicas-redis-failure.spec.ts).
 */
describe('provider pools across gateway replicas (Redis backend)', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startFakeUpstream();
  });
  beforeEach(() => upstream.reset());
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
  });
  afterAll(async () => {
    await upstream.close();
    await redis.stop();
  });

  const maxSeen = (model: string) => maxConcurrencySeen(upstream, model);
  const idle = async () => [...(await fleet!.counts()).values()].every((c) => c.inFlight === 0 && c.queued === 0);
  /** True when p3 + p5 hold exactly `inFlight` leases and `queued` waiting jobs. */
  const poolCounts = async (inFlight: number, queued: number) => {
    const c = await fleet!.counts(['p3', 'p5']);
    return (
      c.get('p3')!.inFlight + c.get('p5')!.inFlight === inFlight && c.get('p3')!.queued + c.get('p5')!.queued === queued
    );
  };

  it('holds max_concurrency 3 and 5 across three replicas: 200 requests at concurrency 60 all succeed and counts return to 0', async () => {
    fleet = await startReplicaFleet(3, replicaYaml(), redis.url, upstream.url);
    const urls = fleet.replicas.map((r) => r.url);
    const results = await runConcurrently(200, 60, (i) => chatOnce(urls[i % 3], 'pool', { delay_ms: 20 }));
    expect(results.filter((r) => r.status !== 200)).toEqual([]);
    expect(maxSeen('up-3')).toBeLessThanOrEqual(3);
    expect(maxSeen('up-5')).toBeLessThanOrEqual(5);
    // Under this load both providers fill up: the limits are reached, not just respected.
    expect(maxSeen('up-3')).toBe(3);
    expect(maxSeen('up-5')).toBe(5);
    await waitUntil(idle, 5000, 'in_flight and queued back to 0');
  });

  it('is work-conserving: a request does not wait on a slow provider while a sibling is free', async () => {
    fleet = await startReplicaFleet(2, replicaYaml(), redis.url, upstream.url);
    const [a, b] = fleet.replicas;
    // Fill p3 and p5 with 8 requests (3 long, 5 short), then send fast ones: they must start as soon as
    // any slot frees. The short ones last 1.5 s so that a loaded machine still sees all 8 at once.
    const slow = Array.from({ length: 8 }, (_, i) =>
      chatOnce((i % 2 ? a : b).url, 'pool', { delay_ms: i < 3 ? 6000 : 1500 }),
    );
    await waitUntil(() => upstream.stats().current === 8, 5000, 'both providers full');
    const started = Date.now();
    const fast = await Promise.all(Array.from({ length: 5 }, () => chatOnce(a.url, 'pool', { delay_ms: 10 })));
    // 5 slots free within 1.5 s; had the fast ones queued behind the 6 s requests they would take ≥ 4.5 s.
    expect(Date.now() - started).toBeLessThan(4000);
    expect(fast.every((r) => r.status === 200)).toBe(true);
    await Promise.all(slow);
  });

  it('releases a queued request within 1 s when its client disconnects, and a streaming lease too', async () => {
    fleet = await startReplicaFleet(2, replicaYaml(), redis.url, upstream.url);
    const [a, b] = fleet.replicas;
    const held = chatOnce(a.url, 'one', { delay_ms: 1500 });
    await waitUntil(async () => (await fleet!.counts(['solo'])).get('solo')!.inFlight === 1, 5000, 'the lease on solo');
    const abort = new AbortController();
    const queued = chatOnce(b.url, 'one', {}, abort.signal).catch(() => undefined);
    await waitUntil(async () => (await fleet!.counts(['solo'])).get('solo')!.queued === 1, 5000, 'one request queued');
    abort.abort();
    await queued;
    await waitUntil(
      async () => (await fleet!.counts(['solo'])).get('solo')!.queued === 0,
      1000,
      'the queued job removed within 1 s',
    );
    expect((await held).status).toBe(200);
    await waitUntil(
      async () => (await fleet!.counts(['solo'])).get('solo')!.inFlight === 0,
      2000,
      'the first lease released',
    );

    const streamAbort = new AbortController();
    const res = await fetch(`${b.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'one',
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
        fake: { chunks: 200, chunk_gap_ms: 50 },
      }),
      signal: streamAbort.signal,
    });
    await res.body!.getReader().read();
    expect((await fleet.counts(['solo'])).get('solo')!.inFlight).toBe(1);
    streamAbort.abort();
    await waitUntil(
      async () => (await fleet!.counts(['solo'])).get('solo')!.inFlight === 0,
      1000,
      'the streaming lease released within 1 s',
    );
    await waitUntil(() => upstream.stats().aborted >= 1, 1000, 'the upstream to see the abort');
  });

  it('answers 429 queue_full with Retry-After, and 503 queue_timeout leaving no job in Redis', async () => {
    fleet = await startReplicaFleet(2, replicaYaml({ maxWaitMs: 300 }), redis.url, upstream.url);
    const [a, b] = fleet.replicas;
    const held = chatOnce(a.url, 'one', { delay_ms: 2000 });
    await waitUntil(async () => (await fleet!.counts(['solo'])).get('solo')!.inFlight === 1, 5000, 'the lease on solo');
    // max_queued 2 on solo: two wait (and time out after 300 ms), the third is refused at once.
    const waiting = [chatOnce(a.url, 'one'), chatOnce(b.url, 'one')];
    await waitUntil(async () => (await fleet!.counts(['solo'])).get('solo')!.queued === 2, 5000, 'two waiting');
    const full = await chatOnce(b.url, 'one');
    expect(full.status).toBe(429);
    expect(full.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(JSON.parse(full.body).error.code).toBe('queue_full');
    for (const r of await Promise.all(waiting)) {
      expect(r.status).toBe(503);
      expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(JSON.parse(r.body).error.code).toBe('queue_timeout');
    }
    expect((await fleet.counts(['solo'])).get('solo')!.queued).toBe(0);
    expect((await held).status).toBe(200);
    await waitUntil(idle, 3000, 'all counts back to 0');
    // Finished and timed-out jobs are removed: no job hash (waiting request or lease) is left.
    expect(await fleet.jobKeys()).toEqual([]);
  });

  it('creates no Redis key for direct routes, whatever their modelGroupKey', async () => {
    fleet = await startReplicaFleet(1, replicaYaml(), redis.url, upstream.url);
    const [a] = fleet.replicas;
    await chatOnce(a.url, 'pool');
    await waitUntil(idle, 3000, 'the pool to settle');
    const before = new Set(await scanKeys(redis.url, fleet.prefix));
    for (let i = 0; i < 5; i++) expect((await chatOnce(a.url, 'echo')).status).toBe(200);
    const after = await scanKeys(redis.url, fleet.prefix);
    expect(after.filter((k) => !before.has(k))).toEqual([]);
  });

  it('stops a replica on SIGTERM gracefully: its in-flight request finishes, nothing is left in Redis, and waiting work on the others takes the slot at once', async () => {
    fleet = await startReplicaFleet(2, replicaYaml(), redis.url, upstream.url);
    const [stopping, b] = fleet.replicas;
    const inFlight = chatOnce(stopping.url, 'one', { delay_ms: 800 });
    await waitUntil(async () => (await fleet!.counts(['solo'])).get('solo')!.inFlight === 1, 5000, 'the lease on solo');
    const waiting = [chatOnce(b.url, 'one', { delay_ms: 10 }), chatOnce(b.url, 'one', { delay_ms: 10 })];
    await waitUntil(
      async () => (await fleet!.counts(['solo'])).get('solo')!.queued === 2,
      5000,
      'two waiting on the other replica',
    );
    const exit = stopping.stop();
    const first = await inFlight;
    const releasedAt = Date.now();
    expect(first.status).toBe(200);
    expect(await exit).toBe(0);
    const served = await Promise.all(waiting);
    expect(served.map((r) => r.status)).toEqual([200, 200]);
    // No sleep until drainDelay (seconds): the freed slot is taken within a few hundred ms.
    expect(Date.now() - releasedAt).toBeLessThan(1500);
    await waitUntil(idle, 3000, 'counts back to 0');
    expect(await fleet.jobKeys()).toEqual([]);
    expect(maxSeen('up-1')).toBe(1);
  });

  it('sends a previous_response_id follow-up to the provider that produced the response, across replicas', async () => {
    fleet = await startReplicaFleet(2, replicaYaml(), redis.url, upstream.url);
    const [a, b] = fleet.replicas;
    const responses = (url: string, body: Record<string, unknown>) =>
      fetch(`${url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'pool', ...body }),
      });
    // With one request held on p3, the least-loaded choice is p5: the first response comes from p5.
    const held = chatOnce(a.url, 'pool', { delay_ms: 1000 });
    await waitUntil(async () => (await fleet!.counts(['p3'])).get('p3')!.inFlight === 1, 5000, 'a lease on p3');
    const first = await responses(a.url, { input: 'hello' });
    expect(first.headers.get('x-iop-resource')).toBe('p5');
    const { id } = (await first.json()) as { id: string };
    await held;
    await waitUntil(idle, 3000, 'the pool idle (p3 would win a fresh choice)');
    for (let i = 0; i < 3; i++) {
      const follow = await responses(b.url, { input: 'again', previous_response_id: id });
      expect(follow.status).toBe(200);
      expect(follow.headers.get('x-iop-resource')).toBe('p5');
    }
    // Without the reference, the same idle pool picks p3.
    expect((await responses(b.url, { input: 'fresh' })).headers.get('x-iop-resource')).toBe('p3');
  });

  it('frees the slots of a replica killed with SIGKILL within 3 s: requests waiting on the other replicas are served and the counts are back to 0', async () => {
    fleet = await startReplicaFleet(3, replicaYaml(), redis.url, upstream.url);
    const [a, b, victim] = fleet.replicas;
    // The victim holds 8 leases (p3 + p5 full) and has 4 waiting jobs; a and b then queue 4 behind them.
    const victimRequests = Array.from({ length: 12 }, () =>
      chatOnce(victim.url, 'pool', { delay_ms: 30_000 }).catch(() => undefined),
    );
    await waitUntil(() => poolCounts(8, 4), 5000, 'the victim to hold 8 leases and 4 waiting jobs');
    const survivors = Array.from({ length: 4 }, (_, i) =>
      chatOnce((i % 2 ? a : b).url, 'pool', { delay_ms: 10 }).then((r) => ({ ...r, at: Date.now() })),
    );
    await waitUntil(() => poolCounts(8, 8), 5000, "the survivors' 4 requests to wait behind the victim's");
    const killedAt = Date.now();
    await victim.kill();
    void Promise.all(victimRequests);
    const results = await Promise.all(survivors);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    // Liveness expires ≤ 2 s after the last renewal, the sweep runs every 500 ms: ≤ 2.5 s plus a grant.
    const servedAfterMs = Math.max(...results.map((r) => r.at)) - killedAt;
    expect(servedAfterMs).toBeLessThanOrEqual(3000);
    await waitUntil(idle, 3000, 'in_flight and queued back to the true value (0)');
    const idleAfterMs = Date.now() - killedAt;
    expect(idleAfterMs).toBeLessThanOrEqual(3000);
    // Swept: the dead replica is unregistered and left no job behind.
    await waitUntil(
      async () => (await fleet!.liveness()).registered.length === 2,
      1000,
      'the dead replica unregistered',
    );
    expect(await fleet.jobKeys()).toEqual([]);
    expect(maxSeen('up-3')).toBeLessThanOrEqual(3);
    expect(maxSeen('up-5')).toBeLessThanOrEqual(5);
  }, 30_000);

  it("frees only the dead replica's jobs: a live origin keeps its leases through two replica deaths in a row, and the limit holds", async () => {
    fleet = await startReplicaFleet(3, replicaYaml(), redis.url, upstream.url);
    const [origin, first, second] = fleet.replicas;
    // The origin holds all 8 slots (it is also the holder: no other replica can lose them for it).
    const held = Array.from({ length: 8 }, () => chatOnce(origin.url, 'pool', { delay_ms: 10_000 }));
    await waitUntil(() => poolCounts(8, 0), 5000, 'the origin to hold p3 and p5 full');
    const doomed = [first, first, second, second].map((r) =>
      chatOnce(r.url, 'pool', { delay_ms: 10 }).catch(() => undefined),
    );
    await waitUntil(() => poolCounts(8, 4), 5000, 'two waiting jobs on each doomed replica');

    let killedAt = Date.now();
    await first.kill();
    await waitUntil(() => poolCounts(8, 2), 3000, "the first dead replica's 2 waiting jobs swept within 3 s");
    expect(Date.now() - killedAt).toBeLessThanOrEqual(3000);
    killedAt = Date.now();
    await second.kill();
    await waitUntil(() => poolCounts(8, 0), 3000, "the second dead replica's 2 waiting jobs swept within 3 s");
    expect(Date.now() - killedAt).toBeLessThanOrEqual(3000);
    void Promise.all(doomed);
    // Both sweeps left the origin's 8 leases alone: still 8 in Redis and 8 at the upstream.
    expect(upstream.stats().current).toBe(8);
    await waitUntil(
      async () => (await fleet!.liveness()).registered.length === 1,
      1000,
      'both dead replicas unregistered',
    );

    // A replacement queues behind the origin and is served once the origin's leases end.
    const replacement = await fleet.add();
    const later = Array.from({ length: 4 }, () => chatOnce(replacement.url, 'pool', { delay_ms: 10 }));
    const results = await Promise.all([...held, ...later]);
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(200));
    expect(maxSeen('up-3')).toBe(3);
    expect(maxSeen('up-5')).toBe(5);
    // The origin never had to fence: its renewals went on while the others died.
    await origin.settled();
    expect(origin.output()).not.toMatch(/ lost \(/);
    await waitUntil(idle, 3000, 'counts back to 0');
  }, 60_000);

  it('never exceeds the limit when many short deadlines race their grants under load', async () => {
    fleet = await startReplicaFleet(3, replicaYaml({ maxWaitMs: 25 }), redis.url, upstream.url);
    const urls = fleet.replicas.map((r) => r.url);
    const results = await runConcurrently(300, 40, (i) => chatOnce(urls[i % 3], 'pool', { delay_ms: 15 }));
    const statuses = new Set(results.map((r) => r.status));
    expect([...statuses].every((s) => s === 200 || s === 503)).toBe(true);
    expect(results.some((r) => r.status === 503)).toBe(true);
    expect(maxSeen('up-3')).toBeLessThanOrEqual(3);
    expect(maxSeen('up-5')).toBeLessThanOrEqual(5);
    await waitUntil(idle, 5000, 'counts back to 0');
  }, 60_000);
});
