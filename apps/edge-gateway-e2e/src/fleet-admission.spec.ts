import type { ProviderCounts } from '@iop/dispatch';
import { startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { spawnGateway, type GatewayProcess } from './testing/gateway-process';
import { burstYaml, startReplicaFleet, statusCounts, type ReplicaFleet } from './testing/replica-fleet';

/** One request of a burst: its HTTP status (0 when the test aborted it), error code, and time to the answer. */
interface Shot {
  status: number;
  code?: string;
  ms: number;
}

/**
 * Fires `n` chat requests for `model` at once, request i to `urls[i % urls.length]`; `answered`
 * fills as answers arrive. Every request shares `signal`, so the test can end the burst at once.
 */
function burst(urls: readonly string[], n: number, model: string, fake: Record<string, number>, signal: AbortSignal) {
  const answered: Shot[] = [];
  const all = Promise.all(
    Array.from({ length: n }, async (_, i): Promise<Shot> => {
      const sentAt = Date.now();
      let shot: Shot;
      try {
        const res = await fetch(`${urls[i % urls.length]}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], fake }),
          signal,
        });
        const body = await res.text();
        const code = res.status === 200 ? undefined : (JSON.parse(body) as { error?: { code?: string } }).error?.code;
        shot = { status: res.status, code, ms: Date.now() - sentAt };
      } catch {
        return { status: 0, code: 'aborted by the test', ms: Date.now() - sentAt };
      }
      answered.push(shot);
      return shot;
    }),
  );
  return { answered, all };
}

/** Every running `watchPeaks` loop, stopped after each test even when an assertion failed first. */
const watchers = new Set<{ stop(): Promise<unknown> }>();

/**
 * Polls `read` every 10 ms until stopped; keeps the highest in_flight and queued seen per provider.
 * `stop()` reads once more, so the peaks cover every state up to the moment it is called.
 */
function watchPeaks(read: () => Promise<Map<string, ProviderCounts>>) {
  const peaks: Record<string, ProviderCounts> = {};
  let running = true;
  const sample = async () => {
    try {
      for (const [id, c] of await read()) {
        const p = (peaks[id] ??= { inFlight: 0, queued: 0 });
        p.inFlight = Math.max(p.inFlight, c.inFlight);
        p.queued = Math.max(p.queued, c.queued);
      }
    } catch {
      // a failed read is simply skipped
    }
  };
  const loop = (async () => {
    while (running) {
      await sample();
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const watcher = {
    stop: async () => {
      running = false;
      watchers.delete(watcher);
      await loop;
      await sample();
      return peaks;
    },
  };
  watchers.add(watcher);
  return watcher;
}

const total = (counts: Map<string, ProviderCounts>) =>
  [...counts.values()].reduce((n, c) => n + c.inFlight + c.queued, 0);

/**
 * Admission of simultaneous bursts across real gateway processes on one real Redis (docs/architecture.md,
 * "Admission"): one atomic script over all candidates places each request on the least-loaded
 * provider — lowest (in_flight + queued) / max_concurrency — and refuses it with 429 queue_full only
 * when every candidate's queue is full. The counts are read from Redis while the burst is in flight.
 */
describe('admission of bursts across gateway replicas (Redis backend)', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet | undefined;
  let memoryGateway: GatewayProcess | undefined;
  let abort: AbortController;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startFakeUpstream();
  });
  beforeEach(() => {
    upstream.reset();
    abort = new AbortController();
  });
  afterEach(async () => {
    abort.abort();
    await Promise.all([...watchers].map((w) => w.stop()));
    await fleet?.close();
    await memoryGateway?.kill();
    fleet = undefined;
    memoryGateway = undefined;
  });
  afterAll(async () => {
    await upstream.close();
    await redis.stop();
  });

  const maxSeen = (model: string) => upstream.stats().byModel[model]?.max ?? 0;
  const current = (model: string) => upstream.stats().byModel[model]?.current ?? 0;

  /** Ends a burst (its clients disconnect) and checks that nothing is left: counts 0, no job in Redis, upstream idle. */
  async function endBurst(all: Promise<Shot[]>): Promise<void> {
    abort.abort();
    await all;
    await waitUntil(
      async () => total(await fleet!.counts()) === 0,
      5000,
      'in_flight and queued back to 0 after the clients left',
    );
    await waitUntil(() => upstream.stats().current === 0, 5000, 'the upstream to see every call end');
    expect(await fleet!.jobKeys()).toEqual([]);
  }

  /**
   * Providers a2 (max_concurrency 2) and b3 (3), max_queued 50 each, one model; the upstream holds every
   * call 3 s, so nothing is released while the burst lands: 120 simultaneous requests must become exactly
   * 2 running + 50 queued on a2, 3 running + 50 queued on b3, and 15 × 429 queue_full answered at once.
   */
  async function burstOf120(urls: readonly string[]): Promise<void> {
    const peaks = watchPeaks(() => fleet!.counts(['a2', 'b3']));
    const startedAt = Date.now();
    const { answered, all } = burst(urls, 120, 'duo', { delay_ms: 3000 }, abort.signal);
    await waitUntil(
      async () => answered.length === 15 && total(await fleet!.counts(['a2', 'b3'])) === 105,
      2500,
      '105 requests placed and 15 answered',
    );
    const counts = Object.fromEntries(await fleet!.counts(['a2', 'b3']));
    // Read before the first upstream call could end (3 s): this is the placement itself.
    expect(Date.now() - startedAt).toBeLessThan(3000);
    expect(counts).toEqual({ a2: { inFlight: 2, queued: 50 }, b3: { inFlight: 3, queued: 50 } });
    // The upstream calls of the 5 leases start once the gateway gets to them.
    await waitUntil(() => current('up-a2') === 2 && current('up-b3') === 3, 2000, 'the 5 leased calls at the upstream');
    // Exactly the 15 over capacity are refused, at once: none waited for a slot (the first frees after 3 s).
    expect(answered.map((s) => [s.status, s.code])).toEqual(Array(15).fill([429, 'queue_full']));
    expect(Math.max(...answered.map((s) => s.ms))).toBeLessThan(2500);
    // Not one request more was admitted at any moment of the burst, in Redis or at the upstream.
    expect(await peaks.stop()).toEqual({ a2: { inFlight: 2, queued: 50 }, b3: { inFlight: 3, queued: 50 } });
    expect([maxSeen('up-a2'), maxSeen('up-b3')]).toEqual([2, 3]);
    // Not re-checked after the mass disconnect below: the fake upstream counts a call until its
    // response's 'close' event, an event-loop turn after the gateway's FIN arrived, so a slot handed on
    // at once can look like an overlap there while the gateway had already closed the old call.
    await endBurst(all);
  }

  it('turns 120 simultaneous requests into one replica into 2 running + 50 queued and 3 running + 50 queued, and 15 × 429 queue_full at once', async () => {
    fleet = await startReplicaFleet(1, burstYaml(), redis.url, upstream.url);
    await burstOf120(fleet.replicas.map((r) => r.url));
  });

  it('gives the same totals when the 120 are spread over 3 replicas', async () => {
    fleet = await startReplicaFleet(3, burstYaml(), redis.url, upstream.url);
    await burstOf120(fleet.replicas.map((r) => r.url));
  });

  it('places a burst of 30 into one replica least-loaded, as the memory backend does: 2 + 10 queued on a2, 3 + 15 on b3', async () => {
    fleet = await startReplicaFleet(1, burstYaml(), redis.url, upstream.url);
    // The same file on the memory backend (no REDIS_URL), as one process.
    memoryGateway = await spawnGateway(fleet.configFile, { env: { PREFIX: fleet.prefix, UPSTREAM: upstream.url } });
    const expected = { a2: { inFlight: 2, queued: 10 }, b3: { inFlight: 3, queued: 15 } };

    const onMemory = burst([memoryGateway.url], 30, 'duo', { delay_ms: 3000 }, abort.signal);
    await waitUntil(
      async () => total(await statusCounts(memoryGateway!.url, ['a2', 'b3'])) === 30,
      2500,
      'the memory backend to place 30',
    );
    const memory = Object.fromEntries(await statusCounts(memoryGateway.url, ['a2', 'b3']));
    expect(onMemory.answered).toEqual([]);
    abort.abort();
    await onMemory.all;
    await memoryGateway.kill();
    await waitUntil(() => upstream.stats().current === 0, 5000, "the memory gateway's calls to end");

    abort = new AbortController();
    upstream.reset();
    const peaks = watchPeaks(() => fleet!.counts(['a2', 'b3']));
    const startedAt = Date.now();
    const onRedis = burst([fleet.replicas[0].url], 30, 'duo', { delay_ms: 3000 }, abort.signal);
    await waitUntil(async () => total(await fleet!.counts(['a2', 'b3'])) === 30, 2500, 'the Redis backend to place 30');
    const placed = Object.fromEntries(await fleet.counts(['a2', 'b3']));
    expect(Date.now() - startedAt).toBeLessThan(3000);
    expect(onRedis.answered).toEqual([]);
    expect(placed).toEqual(expected);
    expect(memory).toEqual(expected);
    expect(await peaks.stop()).toEqual(expected);
    await waitUntil(() => current('up-a2') === 2 && current('up-b3') === 3, 2000, 'the 5 leased calls at the upstream');
    expect([maxSeen('up-a2'), maxSeen('up-b3')]).toEqual([2, 3]);
    await endBurst(onRedis.all);
  });

  it('admits exactly 1 running + 1 queued of 6 simultaneous requests over 3 replicas (max_concurrency 1, max_queued 1): 4 × 429 at once', async () => {
    fleet = await startReplicaFleet(3, burstYaml(), redis.url, upstream.url);
    const urls = fleet.replicas.map((r) => r.url);
    const peaks = watchPeaks(() => fleet!.counts(['s1']));
    const { answered, all } = burst(urls, 6, 'single', { delay_ms: 2000 }, abort.signal);
    await waitUntil(
      async () => answered.length === 4 && total(await fleet!.counts(['s1'])) === 2,
      1500,
      '4 refusals and 2 admitted',
    );
    expect((await fleet.counts(['s1'])).get('s1')).toEqual({ inFlight: 1, queued: 1 });
    expect(answered.map((s) => [s.status, s.code])).toEqual(Array(4).fill([429, 'queue_full']));
    // The queued one is served after the running one: both succeed, one at a time.
    const shots = await all;
    expect(shots.filter((s) => s.status === 200)).toHaveLength(2);
    expect(await peaks.stop()).toEqual({ s1: { inFlight: 1, queued: 1 } });
    expect(maxSeen('up-s1')).toBe(1);
    expect(upstream.stats().byModel['up-s1']?.total).toBe(2);
    await waitUntil(async () => total(await fleet!.counts(['s1'])) === 0, 2000, 'counts back to 0');
  });
});
