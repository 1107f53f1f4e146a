import { scanKeys, startRedis, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { burstYaml, freeze, startReplicaFleet, thaw, type ReplicaFleet } from './testing/replica-fleet';
import type { GatewayProcess } from './testing/gateway-process';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * How long cycle `cycle` keeps the holder stopped, in ms (2.5–3.1 s): longer than the lease lifetime
 * and the liveness TTL (2 s each), so its leases expired in Redis and the other replica's sweep sees
 * it stalled (docs/architecture.md, "Expired leases"), and short enough for 10 cycles in ~40 s.
 */
const stopMs = (cycle: number) => 2500 + (cycle % 4) * 200;

/**
 * A fleet file with one provider `w4` (max_concurrency 4, upstream model `up-w4`, model `wide`) and
 * one client `capped` (key `k-capped`, `max_in_flight: 2`), on `${UPSTREAM}`, prefix `${PREFIX}`:
 * only the client's cap limits its calls.
 */
const cappedYaml = () => `
version: 1
gateway:
  request_timeout_ms: 60000
  clients:
    - { id: capped, keys: [k-capped], max_in_flight: 2 }
queue: { prefix: "\${PREFIX}", max_wait_ms: 20000, max_queued: 50 }
health: { interval_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "\${UPSTREAM}" }
    providers:
      - { id: w4, category: openai_compat, adapter: up, models: [{ name: wide, upstream: up-w4 }], max_concurrency: 4 }
`;

/**
 * POSTs a chat completion of `model` to `url` (with `key` as bearer token, if any) and reads it to
 * its end; resolves once the answer's head is in, with its status and a promise of its whole text
 * (never rejects on HTTP errors or a cut stream).
 */
async function send(
  url: string,
  model: string,
  fake: Record<string, number>,
  opts: { stream: boolean; key?: string },
): Promise<{ status: number; rest: Promise<string> }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}) },
    body: JSON.stringify({ model, stream: opts.stream, messages: [{ role: 'user', content: 'x' }], fake }),
  });
  const rest = res.text().catch((e: unknown) => `[client read failed: ${(e as Error).message}]`);
  return { status: res.status, rest };
}

/**
 * A resumed holder hands its slot on only once its upstream call is closed (README "Production
 * layout": the limit holds at the upstream "including while a replica is stalled or stopped";
 * docs/architecture.md, "Fencing"). Each cycle: one replica holds every slot a limit allows with
 * long streams, a request through the other replica waits, the holder is stopped (SIGSTOP) past its
 * leases' expiry and resumed (SIGCONT); it fences its streams, and the waiting request must not
 * reach the upstream before a fenced call's connection is closed there. The fake upstream's `max`
 * for the provider's upstream model (calls open at once, from a request's arrival until the server
 * sees its connection close) must stay at the limit in every cycle: before this rule a resumed
 * holder released a fenced lease at once, and 2 of 8 cycles saw 2 calls at `max_concurrency: 1`.
 */
describe('a stopped and resumed lease holder across gateway replicas (Redis backend)', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let fleet: ReplicaFleet | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startFakeUpstream();
  });
  afterEach(async () => {
    // SIGKILL ends a stopped process too.
    await fleet?.close();
    fleet = undefined;
  });
  afterAll(async () => {
    await upstream.close();
    await redis.stop();
  });

  const peak = (model: string) => upstream.stats().byModel[model]?.max ?? 0;
  const current = (model: string) => upstream.stats().byModel[model]?.current ?? 0;

  /**
   * Runs `cycles` stop-and-resume cycles, the two replicas taking turns as holder: `holders` long
   * streams through the holder, one request through the other replica that must wait, SIGSTOP for
   * `stopMs(cycle)`, SIGCONT; every stream is cut and the waiting request served. `waits` tells when
   * the request through the other replica waits (in its provider's line, or parked at its client's cap).
   * @returns the upstream's peak of calls at once of `upstreamModel`, one per cycle.
   */
  async function cycle(
    replicas: readonly GatewayProcess[],
    opts: {
      cycles: number;
      model: string;
      upstreamModel: string;
      provider: string;
      holders: number;
      key?: string;
      waits: () => Promise<boolean>;
    },
  ): Promise<number[]> {
    const counts = async () => (await fleet!.counts([opts.provider])).get(opts.provider)!;
    const peaks: number[] = [];
    for (let i = 0; i < opts.cycles; i++) {
      upstream.reset();
      const [holder, other] = [replicas[i % 2], replicas[(i + 1) % 2]];
      const streams = await Promise.all(
        Array.from({ length: opts.holders }, () =>
          send(holder.url, opts.model, { chunks: 400, chunk_gap_ms: 100 }, { stream: true, key: opts.key }),
        ),
      );
      expect(streams.map((s) => s.status)).toEqual(streams.map(() => 200));
      const waiting = send(other.url, opts.model, { delay_ms: 10 }, { stream: false, key: opts.key });
      await waitUntil(opts.waits, 3000, 'the request through the other replica to wait');
      freeze(holder);
      await sleep(stopMs(i));
      thaw(holder);
      for (const s of streams) expect(await s.rest).not.toContain('[DONE]');
      const served = await waiting;
      expect(served.status).toBe(200);
      await served.rest;
      await waitUntil(
        async () => {
          const c = await counts();
          return c.inFlight === 0 && c.queued === 0 && current(opts.upstreamModel) === 0;
        },
        3000,
        `${opts.provider} idle again`,
      );
      peaks.push(peak(opts.upstreamModel));
    }
    return peaks;
  }

  it('never lets the upstream see 2 calls of a max_concurrency 1 provider over 10 SIGSTOP/SIGCONT cycles of the holder', async () => {
    fleet = await startReplicaFleet(2, burstYaml(), redis.url, upstream.url);
    await waitUntil(async () => (await fleet!.liveness()).alive.length === 2, 3000, 'both replicas alive');
    const peaks = await cycle(fleet.replicas, {
      cycles: 10,
      model: 'single',
      upstreamModel: 'up-s1',
      provider: 's1',
      holders: 1,
      waits: async () => (await fleet!.counts(['s1'])).get('s1')!.queued === 1,
    });
    // Every cycle's peak, so a failure shows how many resumes overlapped.
    expect(peaks).toEqual(peaks.map(() => 1));
  }, 60_000);

  it('never lets the upstream see 3 calls of a client with max_in_flight 2 over 6 SIGSTOP/SIGCONT cycles of the holder of both its leases', async () => {
    fleet = await startReplicaFleet(2, cappedYaml(), redis.url, upstream.url);
    await waitUntil(async () => (await fleet!.liveness()).alive.length === 2, 3000, 'both replicas alive');
    const peaks = await cycle(fleet.replicas, {
      cycles: 6,
      model: 'wide',
      upstreamModel: 'up-w4',
      provider: 'w4',
      holders: 2,
      key: 'k-capped',
      // A request parked at its client's cap is in `<prefix>:{<tag>}:parked:<client>` (docs/architecture.md,
      // "Clients, priority and fair share"), not in its provider's line.
      waits: async () => (await scanKeys(redis.url, `${fleet!.prefix}:`)).some((k) => k.includes(':parked:')),
    });
    expect(peaks).toEqual(peaks.map(() => 2));
  }, 60_000);
});
