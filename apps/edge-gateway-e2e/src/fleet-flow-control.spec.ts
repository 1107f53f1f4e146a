import { startRedis, startRedisCluster, waitUntil } from '@iop/dispatch/testing';
import {
  certainInversions,
  judgedCalls,
  peakConcurrency,
  sharesBetween,
  startFakeUpstream,
  type FakeUpstream,
} from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { Redis } from 'ioredis';
import { callsOf, FLOW_CLIENTS, flowYaml, keepBacklogged, sendAs, type FlowClientId } from './testing/flow-clients';
import { freeze, startReplicaFleet, thaw, type ReplicaFleet } from './testing/replica-fleet';

/**
 * Flow control across real gateway processes on a real Redis and a real 3-master Redis Cluster (docs/architecture.md, "Clients,
 * priority and fair share"; README "Clients, priority and fair share"): 3 replicas, an upstream that
 * journals every call with the client that sent it (the `tag` knob) and when it started and ended.
 * Times are judged in Redis time: the journal's host clock plus its measured offset to Redis `TIME`.
 */
describe.each([
  ['a single Redis', false],
  ['a 3-master Redis Cluster', true],
])('flow control across 3 gateway replicas on %s', (where, cluster) => {
  let redis: { urls: readonly string[]; stop(): Promise<void> };
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet;
  let offsetMs = 0;
  let abort: AbortController;
  const report = (line: string) => process.stdout.write(`flow control on ${where}: ${line}\n`);

  beforeAll(async () => {
    redis = cluster ? await startRedisCluster(3) : await startRedis().then((r) => ({ urls: [r.url], stop: r.stop }));
    upstream = await startFakeUpstream({ journal: true });
    const clock = new Redis(redis.urls[0]);
    const [s, us] = await clock.time();
    offsetMs = Number(s) * 1000 + Math.floor(Number(us) / 1000) - Date.now();
    clock.disconnect();
    const clusterUrls = cluster ? redis.urls : undefined;
    fleet = await startReplicaFleet(3, flowYaml({ cluster }), redis.urls[0], upstream.url, { clusterUrls });
    // One request through each replica first: scripts loaded and connections made on every master, so
    // the first test's two holders reach the upstream together, not one cold start apart.
    for (const r of fleet.replicas) expect(await sendAs(r.url, 'mid', 'flow', 1)).toEqual({ status: 200 });
  }, 180_000);
  beforeEach(async () => {
    // The upstream's `current` counts calls still ending from the test before (a backlog's aborted
    // calls): a test that waits for its own calls to arrive starts from none.
    await waitUntil(() => upstream.stats().current === 0, 10_000, "the previous test's calls ended");
    upstream.reset();
    abort = new AbortController();
  });
  afterEach(() => abort.abort());
  afterAll(async () => {
    await fleet?.close();
    await upstream.close();
    await redis?.stop();
  });

  const urls = () => fleet.replicas.map((r) => r.url);
  const calls = () => judgedCalls(upstream.calls(), FLOW_CLIENTS, offsetMs);
  const queued = async (ids: string[]) => [...(await fleet.counts(ids)).values()].reduce((n, c) => n + c.queued, 0);
  const clientCounts = async (url: string, id: FlowClientId) =>
    ((await (await fetch(`${url}/status`)).json()) as StatusSnapshot).clients?.find((c) => c.id === id);

  it('grants a burst of mixed bands spread over the replicas with 0 priority inversions', async () => {
    // Both slots of `flow` held 3 s while 60 requests of three bands queue on every replica.
    const holders = [sendAs(urls()[0], 'mid', 'flow', 3000), sendAs(urls()[1], 'mid', 'flow', 3000)];
    await waitUntil(() => upstream.stats().current === 2, 10_000, 'both slots held');
    const bands: FlowClientId[] = ['hi', 'mid', 'lo'];
    const burst = Array.from({ length: 60 }, (_, i) => sendAs(urls()[i % 3], bands[(i * 7) % 3], 'flow', 20));
    await waitUntil(async () => (await queued(['p1', 'p2'])) === 60, 2500, '60 requests queued before a slot frees');
    await Promise.all(holders);
    const answers = await Promise.all(burst);
    expect(answers.every((a) => a.status === 200)).toBe(true);
    // The two holders started first; every other call waited in the burst.
    const [first, second, ...burstCalls] = calls().sort((x, y) => x.startedAt - y.startedAt);
    expect(burstCalls).toHaveLength(60);
    const inversions = certainInversions(burstCalls, [first, second]);
    report(`${inversions} priority inversions in a burst of 60 (bands 5, 0, -3) over 3 replicas`);
    expect(inversions).toBe(0);
  });

  it.each([
    ['heavy', 'light', 100, 10, 0.45, 0.55],
    ['w3', 'w1', 20, 20, 0.72, 0.78],
  ] as const)(
    'shares slots between backlogged %s and %s by weight over 8 s of backlog',
    async (a, b, aOutstanding, bOutstanding, low, high) => {
      const sending = [
        keepBacklogged(urls(), a, 'flow', aOutstanding, 30, abort.signal),
        keepBacklogged(urls(), b, 'flow', bOutstanding, 30, abort.signal),
      ];
      await waitUntil(async () => (await queued(['p1', 'p2'])) >= 20, 10_000, 'a backlog');
      const from = Date.now() + offsetMs + 1000;
      await new Promise((r) => setTimeout(r, 9000));
      const to = Date.now() + offsetMs;
      abort.abort();
      await Promise.all(sending);
      const shares = sharesBetween(callsOf(calls(), a, b), from, to);
      const share = shares.get(a) ?? 0;
      const granted = callsOf(calls(), a, b).filter((c) => c.startedAt >= from && c.startedAt < to).length;
      report(`${a} ${(100 * share).toFixed(1)}% / ${b} ${(100 * (1 - share)).toFixed(1)}% of ${granted} grants in 8 s`);
      expect(granted).toBeGreaterThan(150);
      expect(share).toBeGreaterThanOrEqual(low);
      expect(share).toBeLessThanOrEqual(high);
    },
    40_000,
  );

  it('sheds the sheddable waiter before it refuses a higher band', async () => {
    // The holder keeps the only slot until this test lets go (its client leaves), so no waiter below is
    // granted however slowly a loaded machine or a Cluster admits them.
    const letGo = new AbortController();
    const holder = sendAs(urls()[0], 'mid', 'shed', 60_000, letGo.signal);
    await waitUntil(
      async () => upstream.stats().current === 1 && (await fleet.counts(['s1'])).get('s1')?.inFlight === 1,
      5000,
      'the slot of shed held',
    );
    const batch = [sendAs(urls()[1], 'batch', 'shed', 10), sendAs(urls()[2], 'batch', 'shed', 10)];
    await waitUntil(async () => (await queued(['s1'])) === 2, 5000, 'two batch requests queued');
    const chat = [sendAs(urls()[2], 'hi', 'shed', 10), sendAs(urls()[0], 'mid', 'shed', 10)];
    expect(await Promise.all(batch)).toEqual([
      { status: 429, code: 'queue_full' },
      { status: 429, code: 'queue_full' },
    ]);
    expect(await sendAs(urls()[1], 'hi', 'shed', 10)).toEqual({ status: 429, code: 'queue_full' });
    letGo.abort();
    expect(await holder).toEqual({ status: 0 });
    expect(await Promise.all(chat)).toEqual([{ status: 200 }, { status: 200 }]);
  });

  // Last: it kills one replica for good.
  it('never lets max_in_flight 2 be exceeded at the upstream while one replica is SIGKILLed and another SIGSTOPped; 0 leaked after the drain', async () => {
    const [killed, stopped, survivor] = fleet.replicas;
    const answers = Array.from({ length: 20 }, (_, i) => sendAs(urls()[i % 3], 'capped', 'wide', 400));
    await waitUntil(() => upstream.stats().current === 2, 5000, 'two calls of capped at the upstream');
    await killed.kill();
    await new Promise((r) => setTimeout(r, 300));
    freeze(stopped);
    await new Promise((r) => setTimeout(r, 3500));
    thaw(stopped);
    const answered = await Promise.all(answers);
    // The survivor serves all of its own; the stopped replica's waiters fail on waking (Redis was silent to them).
    expect(answered.filter((_, i) => i % 3 === 2)).toEqual(Array(6).fill({ status: 200 }));
    for (const a of answered.filter((_, i) => i % 3 === 1)) expect([200, 503]).toContain(a.status);
    await waitUntil(
      async () => {
        const c = await clientCounts(survivor.url, 'capped');
        return c?.in_flight === 0 && c.queued === 0;
      },
      10_000,
      "capped's counts back to 0 after the drain",
    );
    expect(await fleet.jobKeys()).toEqual([]);
    const capped = callsOf(calls(), 'capped');
    expect(capped.length).toBeGreaterThanOrEqual(6);
    const peak = peakConcurrency(capped, 'capped');
    report(`max_in_flight 2: at most ${peak} calls of the capped client at the upstream over ${capped.length} calls`);
    expect(peak).toBeLessThanOrEqual(2);
  }, 60_000);
});
