import { startRedis, startRedisCluster, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, type JournalCall } from '@iop/fake-upstream';
import { isDeepStrictEqual } from 'node:util';
import { startReplicaFleet, statusCounts, type ReplicaFleet } from './testing/replica-fleet';
import {
  callsOfKind,
  heldAt,
  HUGE,
  judgeTokens,
  LONG,
  sendKind,
  SHORT,
  TOKEN_LIMIT,
  tokenYaml,
  weightOf,
  type TokenAnswer,
  type TokenKind,
} from './testing/token-fleet';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const IDLE = { inFlight: 0, queued: 0, tokensInFlight: 0 };
/** A call's end (ms); every call judged has ended. */
const endOf = (c: JournalCall) => c.endedAt ?? Infinity;

/** Waits until every replica's `/status` and Redis show the provider `tok` idle, then asserts it. */
async function expectIdle(fleet: ReplicaFleet, urls: readonly string[]): Promise<void> {
  const views = async () => [
    (await fleet.counts(['tok'])).get('tok'),
    ...(await Promise.all(urls.map(async (u) => (await statusCounts(u, ['tok'])).get('tok')))),
  ];
  await waitUntil(async () => (await views()).every((c) => isDeepStrictEqual(c, IDLE)), 5000, 'tok idle everywhere');
  expect(await views()).toEqual(Array(urls.length + 1).fill(IDLE));
  expect(await fleet.jobKeys()).toEqual([]);
}

/**
 * Token-aware provider limits across real gateway processes (README "Token-aware provider limits";
 * docs/architecture.md, "Token limits"): 3 replicas, one vLLM provider `tok` with `max_tokens_in_flight: 8000`
 * (`max_concurrency` 32 never binds), and an upstream that journals every call with its kind (the `tag` knob)
 * and when it arrived and ended. The judge (`heldAt`) counts, at each arrival, the gateway's own estimate of
 * every open call: the prompt until the call's first byte (arrival + its `delay_ms`), the completion allowance
 * until its end.
 */
describe.each([
  ['a single Redis', false],
  ['a 3-master Redis Cluster', true],
])('max_tokens_in_flight across 3 gateway replicas on %s', (where, cluster) => {
  let redis: { urls: readonly string[]; stop(): Promise<void> };
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet;
  const report = (line: string) => process.stdout.write(`token limits on ${where}: ${line}\n`);

  beforeAll(async () => {
    redis = cluster ? await startRedisCluster(3) : await startRedis().then((r) => ({ urls: [r.url], stop: r.stop }));
    upstream = await startFakeUpstream({ journal: true });
    const clusterUrls = cluster ? redis.urls : undefined;
    fleet = await startReplicaFleet(3, tokenYaml({ cluster }), redis.urls[0], upstream.url, { clusterUrls });
  }, 120_000);
  afterAll(async () => {
    await fleet?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('never holds more than 8,000 estimated tokens at the upstream; shorts flow beside a long one; a 12,000-token request runs alone, never starved by shorts; 0 held after', async () => {
    const [long, short, huge] = [weightOf(LONG), weightOf(SHORT), weightOf(HUGE)];
    expect(long.total).toBeGreaterThanOrEqual(5900);
    expect(long.total).toBeLessThanOrEqual(6100);
    expect(short.total).toBeGreaterThanOrEqual(150);
    expect(short.total).toBeLessThanOrEqual(250);
    expect(huge.total).toBeGreaterThanOrEqual(11_900);
    expect(huge.total).toBeLessThanOrEqual(12_100);
    // Nine shorts fit beside a long one; two long ones do not fit together until one has had its first byte.
    expect(long.total + 9 * short.total).toBeLessThanOrEqual(TOKEN_LIMIT);
    expect(2 * long.total).toBeGreaterThan(TOKEN_LIMIT);
    expect(long.completion + long.total).toBeLessThanOrEqual(TOKEN_LIMIT);

    upstream.reset();
    const urls = fleet.replicas.map((r) => r.url);
    const calls = () => upstream.calls().filter((c) => c.model === 'up-tok');
    const answers: Promise<TokenAnswer>[] = [];
    const send = (replica: number, kind: TokenKind) => answers.push(sendKind(urls[replica % 3], kind));

    // A long request, then nine shorts, one every 60 ms over the replicas, during its 1.5 s of prefill.
    send(0, LONG);
    await waitUntil(() => callsOfKind(calls(), LONG).length === 1, 5000, 'the first long request at the upstream');
    for (let i = 0; i < 9; i++) {
      send(i, SHORT);
      await sleep(60);
    }
    // Two more long ones through the two other replicas: each waits for the previous one's prefill.
    send(1, LONG);
    send(2, LONG);
    await waitUntil(() => callsOfKind(calls(), LONG).length === 3, 15_000, 'three long requests at the upstream');
    // The huge one, while shorts keep arriving every 80 ms until it has run (or 15 s have passed).
    const hugeSentAt = Date.now();
    send(0, HUGE);
    const shortsSentAt: number[] = [];
    while (callsOfKind(calls(), HUGE)[0]?.endedAt == null && Date.now() - hugeSentAt < 15_000) {
      shortsSentAt.push(Date.now());
      send(shortsSentAt.length, SHORT);
      await sleep(80);
    }
    const stoppedAt = Date.now();
    const answered = await Promise.all(answers);
    expect(answered.filter((a) => a.status !== 200 || !a.done)).toEqual([]);

    const journal = calls();
    expect(journal).toHaveLength(answers.length);
    expect(journal.filter((c) => c.endedAt === null)).toEqual([]);
    const { peak, breaches } = judgeTokens(journal);
    expect(breaches).toEqual([]);
    expect(peak).toBeLessThanOrEqual(TOKEN_LIMIT);

    const [l1, l2, l3] = callsOfKind(journal, LONG);
    const beside = callsOfKind(journal, SHORT).filter(
      (c) => c.startedAt >= l1.startedAt && endOf(c) <= l1.startedAt + LONG.delayMs - 5,
    );
    expect(beside.length).toBeGreaterThanOrEqual(5);
    // A long one comes in when the one before it gave its prompt back (its first byte), not at its end.
    expect(l2.startedAt).toBeGreaterThanOrEqual(l1.startedAt + LONG.delayMs - 5);
    expect(l2.startedAt).toBeLessThan(endOf(l1));
    expect(l3.startedAt).toBeGreaterThanOrEqual(l2.startedAt + LONG.delayMs - 5);

    // The huge one: alone at the upstream through its prefill, granted soon after the calls before it ended,
    // while shorts sent after it kept arriving (they waited behind it, none passed it).
    const h = callsOfKind(journal, HUGE)[0];
    expect(heldAt(journal, h.startedAt).open).toEqual([h]);
    const during = journal.filter(
      (c) => c !== h && c.startedAt < h.startedAt + HUGE.delayMs - 5 && endOf(c) > h.startedAt,
    );
    expect(during).toEqual([]);
    const drainedAt = Math.max(...journal.filter((c) => c.startedAt < h.startedAt).map(endOf));
    const grantedAfterMs = h.startedAt - drainedAt;
    expect(grantedAfterMs).toBeGreaterThanOrEqual(0);
    expect(grantedAfterMs).toBeLessThan(1500);
    const sentWhileWaiting = shortsSentAt.filter((t) => t < h.startedAt).length;
    expect(sentWhileWaiting).toBeGreaterThanOrEqual(5);
    expect(h.startedAt).toBeLessThan(stoppedAt);

    report(
      `peak ${peak} estimated tokens held at the upstream beside others (limit ${TOKEN_LIMIT}; weights: long ` +
        `${long.total}, short ${short.total}, huge ${huge.total}) over ${journal.length} calls; ` +
        `${beside.length} of 9 shorts started and ended beside the first long one; the huge one waited ` +
        `${h.startedAt - hugeSentAt} ms with ${sentWhileWaiting} shorts sent meanwhile, granted ${grantedAfterMs} ms ` +
        `after the calls before it ended, alone`,
    );
    await expectIdle(fleet, urls);
  }, 45_000);
});

/**
 * A token-limited fleet through the failures of docs/architecture.md, "Dead replicas" (a SIGKILLed replica's
 * leases, and their tokens, are swept within `leaseTtlMs + sweepIntervalMs`, ≤ 2.5 s) and "Redis restarts"
 * (README "Errors": 503 `queue_unavailable` while Redis is down, never an unchecked admission).
 */
describe('token-limited gateway replicas when one is SIGKILLed or Redis stops', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet;
  const report = (line: string) => process.stdout.write(`token limits: ${line}\n`);
  const calls = () => upstream.calls().filter((c) => c.model === 'up-tok');
  const tok = async () => (await fleet.counts(['tok'])).get('tok');

  beforeAll(async () => {
    redis = await startRedis({ forceOwn: true });
    upstream = await startFakeUpstream({ journal: true });
    fleet = await startReplicaFleet(3, tokenYaml(), redis.url, upstream.url);
  }, 60_000);
  beforeEach(() => upstream.reset());
  afterAll(async () => {
    await fleet?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it("gives a SIGKILLed replica's tokens back within the lease recovery time; the long request waiting on another replica is then admitted", async () => {
    const [dead, r1, r2] = fleet.replicas;
    const long = weightOf(LONG).total;
    const held = long + 2 * weightOf(SHORT).total;
    // The dying replica holds a long and two short requests, all in prefill for 30 s.
    const dying = [LONG, SHORT, SHORT].map((k) => sendKind(dead.url, k, { delayMs: 30_000 }));
    await waitUntil(() => calls().length === 3, 5000, "the dying replica's three calls at the upstream");
    expect(await tok()).toEqual({ inFlight: 3, queued: 0, tokensInFlight: held });
    // A long one through R1 does not fit beside them: it waits, and the upstream sees nothing of it.
    const waiting = sendKind(r1.url, LONG, { delayMs: 300 });
    await waitUntil(async () => (await tok())?.queued === 1, 5000, 'the long request through R1 to wait');
    await sleep(300);
    expect(calls()).toHaveLength(3);

    const killedAt = Date.now();
    await dead.kill();
    // Seen from R2: the dead replica's tokens are gone (the waiter's lease alone, or nothing once it ended).
    await waitUntil(
      async () => {
        const c = (await statusCounts(r2.url, ['tok'])).get('tok');
        return (
          c !== undefined && c.inFlight <= 1 && c.queued === 0 && (c.tokensInFlight === long || c.tokensInFlight === 0)
        );
      },
      5000,
      "the dead replica's tokens back",
    );
    const recoveredMs = Date.now() - killedAt;
    expect(await Promise.all(dying)).toEqual(Array(3).fill({ status: 0, done: false }));
    expect(await waiting).toEqual({ status: 200, done: true });
    const admittedMs = callsOfKind(calls(), LONG)[1].startedAt - killedAt;
    report(
      `SIGKILL of a replica holding ${held} tokens: back within ${recoveredMs} ms by R2's /status; ` +
        `the waiting long request reached the upstream ${admittedMs} ms after the kill`,
    );
    expect(recoveredMs).toBeLessThanOrEqual(3000);
    expect(admittedMs).toBeLessThanOrEqual(3000);
    // A new long request is admitted at once, and nothing is left held.
    expect(await sendKind(r2.url, LONG, { delayMs: 300 })).toEqual({ status: 200, done: true });
    expect(calls()).toHaveLength(5);
    await expectIdle(fleet, [r1.url, r2.url]);
  }, 30_000);

  // Last: it restarts Redis empty.
  it('refuses token-limited requests with 503 queue_unavailable while Redis is down (the upstream sees none), then serves within the limit again', async () => {
    const live = fleet.replicas.filter((r) => r.child.exitCode === null && r.child.signalCode === null);
    expect(live.length).toBeGreaterThanOrEqual(2);
    const urls = live.map((r) => r.url);
    expect(await sendKind(urls[0], SHORT)).toEqual({ status: 200, done: true });
    await redis.kill();
    upstream.reset();
    const startedAt = Date.now();
    const refused = await Promise.all(urls.flatMap((u) => [LONG, SHORT, HUGE, SHORT].map((k) => sendKind(u, k))));
    expect(Date.now() - startedAt).toBeLessThan(3000);
    const expected = {
      status: 503,
      code: 'queue_unavailable',
      type: 'server_error',
      contentType: expect.stringMatching(/^application\/json/),
      done: false,
    };
    expect(refused).toEqual(Array(refused.length).fill(expected));
    await sleep(300);
    expect(upstream.calls()).toEqual([]);

    await redis.start();
    await waitUntil(async () => (await sendKind(urls[0], SHORT)).status === 200, 15_000, 'the fleet to serve again');
    // The limit holds on the restarted Redis: two long ones from two replicas never overlap in prefill.
    upstream.reset();
    const again = await Promise.all([
      sendKind(urls[0], LONG),
      sendKind(urls[1], LONG),
      ...[0, 1, 2, 3].map((i) => sendKind(urls[i % 2], SHORT)),
    ]);
    expect(again).toEqual(Array(6).fill({ status: 200, done: true }));
    const { peak, breaches } = judgeTokens(calls());
    expect(calls()).toHaveLength(6);
    expect(breaches).toEqual([]);
    report(`after the Redis restart: peak ${peak} estimated tokens at the upstream (limit ${TOKEN_LIMIT})`);
    await expectIdle(fleet, urls);
  }, 40_000);
});
