import { MemoryProviderQueue, type Lease, type LeaseRequest, type ProviderQueue } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/** A memory queue that records every lease request it sees, to prove which requests never reach it. */
class RecordingQueue extends MemoryProviderQueue {
  readonly requests: LeaseRequest[] = [];
  override acquireLease(request: LeaseRequest): Promise<Lease> {
    this.requests.push(request);
    return super.acquireLease(request);
  }
}

const chat = (gateway: TestGateway, model: string, fake: Record<string, number> = {}, signal?: AbortSignal) =>
  fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], fake }),
    signal,
  });

describe('admission rule: only provider pools are queued', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  let queue: RecordingQueue;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  beforeEach(async () => {
    queue = new RecordingQueue();
    gateway = await startTestGateway(fleetYaml(), { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, queue);
  });
  afterEach(async () => {
    await gateway.close();
  });
  afterAll(async () => {
    await upstream.close();
  });

  const allCounts = async (q: ProviderQueue) => [...(await q.counts()).values()];

  it('dispatches a CLI route and a legacy route directly, with no job, lease or count, even while the pool is saturated', async () => {
    // Saturate the `small` pool (max_concurrency 1) with a held request and a queued one.
    const held = chat(gateway, 'small', { delay_ms: 1500 });
    const waiting = chat(gateway, 'small');
    await waitUntil(async () => (await queue.counts(['solo'])).get('solo')!.queued === 1, 5000, 'the pool to saturate');
    const before = queue.requests.length;
    for (const model of ['echo', 'legacy']) {
      const res = await chat(gateway, model);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-iop-queue-wait-ms')).toBeNull();
    }
    expect(queue.requests.length).toBe(before);
    expect(queue.requests.every((r) => r.modelGroupKey === 'small')).toBe(true);
    expect((await queue.counts(['solo'])).get('solo')).toEqual({ inFlight: 1, queued: 1 });
    expect((await held).status).toBe(200);
    expect((await waiting).status).toBe(200);
    expect((await allCounts(queue)).every((c) => c.inFlight === 0 && c.queued === 0)).toBe(true);
  });

  it('makes a pooled request wait while its only provider is at max_concurrency, then serves it on release', async () => {
    const held = chat(gateway, 'small', { delay_ms: 400 });
    await waitUntil(async () => (await queue.counts(['solo'])).get('solo')!.inFlight === 1, 5000, 'the first lease');
    const started = Date.now();
    const second = await chat(gateway, 'small');
    expect(second.status).toBe(200);
    expect(Number(second.headers.get('x-iop-queue-wait-ms'))).toBeGreaterThan(100);
    expect(Date.now() - started).toBeGreaterThan(100);
    expect((await held).status).toBe(200);
    expect(upstream.stats().byModel['small'].max).toBe(1);
  });

  it('answers 429 queue_full with Retry-After when max_queued requests wait', async () => {
    await gateway.close();
    gateway = await startTestGateway(
      fleetYaml({ maxQueued: 1 }),
      { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' },
      (queue = new RecordingQueue()),
    );
    const held = chat(gateway, 'small', { delay_ms: 800 });
    await waitUntil(async () => (await queue.counts(['solo'])).get('solo')!.inFlight === 1, 5000, 'the first lease');
    const waiting = chat(gateway, 'small');
    await waitUntil(async () => (await queue.counts(['solo'])).get('solo')!.queued === 1, 5000, 'one waiting request');
    const full = await chat(gateway, 'small');
    expect(full.status).toBe(429);
    expect(full.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await full.json()) as { error: { code: string } }).error.code).toBe('queue_full');
    expect((await held).status).toBe(200);
    expect((await waiting).status).toBe(200);
  });

  it('answers 503 queue_timeout with Retry-After after max_wait_ms and leaves nothing queued', async () => {
    await gateway.close();
    gateway = await startTestGateway(
      fleetYaml({ maxWaitMs: 200 }),
      { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' },
      (queue = new RecordingQueue()),
    );
    const held = chat(gateway, 'small', { delay_ms: 1000 });
    await waitUntil(async () => (await queue.counts(['solo'])).get('solo')!.inFlight === 1, 5000, 'the first lease');
    const timedOut = await chat(gateway, 'small');
    expect(timedOut.status).toBe(503);
    expect(timedOut.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await timedOut.json()) as { error: { code: string } }).error.code).toBe('queue_timeout');
    expect((await queue.counts(['solo'])).get('solo')!.queued).toBe(0);
    expect((await held).status).toBe(200);
  });

  it('removes a queued request whose client disconnects and never calls the upstream for it', async () => {
    upstream.reset();
    const held = chat(gateway, 'small', { delay_ms: 600 });
    await waitUntil(async () => (await queue.counts(['solo'])).get('solo')!.inFlight === 1, 5000, 'the first lease');
    const abort = new AbortController();
    const queued = chat(gateway, 'small', {}, abort.signal).catch((e: unknown) => e);
    await waitUntil(async () => (await queue.counts(['solo'])).get('solo')!.queued === 1, 5000, 'the request to queue');
    abort.abort();
    await queued;
    await waitUntil(
      async () => (await queue.counts(['solo'])).get('solo')!.queued === 0,
      1000,
      'the queued request to leave within 1 s',
    );
    expect((await held).status).toBe(200);
    await waitUntil(async () => (await queue.counts(['solo'])).get('solo')!.inFlight === 0, 1000, 'the lease to free');
    expect(upstream.stats().byModel['small'].total).toBe(1);
  });

  it('keeps independent in_flight and queued for two providers on one node', async () => {
    const small = [chat(gateway, 'small', { delay_ms: 500 }), chat(gateway, 'small', { delay_ms: 500 })];
    const qwen = [chat(gateway, 'qwen', { delay_ms: 500 })];
    await waitUntil(
      async () => {
        const c = await queue.counts(['solo', 'olla']);
        return c.get('solo')!.inFlight === 1 && c.get('solo')!.queued === 1 && c.get('olla')!.inFlight === 1;
      },
      5000,
      'both providers busy',
    );
    const c = await queue.counts(['solo', 'olla']);
    expect(c.get('solo')).toEqual({ inFlight: 1, queued: 1 });
    expect(c.get('olla')).toEqual({ inFlight: 1, queued: 0 });
    await Promise.all([...small, ...qwen]);
  });
});
