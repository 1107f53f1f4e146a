import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

describe('streaming', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(fleetYaml(), { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  const streamChat = (fake: Record<string, number>, signal?: AbortSignal) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }], stream: true, fake }),
      signal,
    });

  it('ends the stream with an error event, never [DONE], when the upstream is cut mid-stream', async () => {
    const res = await streamChat({ chunks: 6, cut_after: 2, chunk_gap_ms: 20 });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('chat.completion.chunk');
    expect(text).not.toContain('[DONE]');
    expect(text).toMatch(/data: \{"error":\{.*"code":"upstream_error"/);
    await waitUntil(
      async () => (await gateway.queue.counts(['solo'])).get('solo')!.inFlight === 0,
      1000,
      'the lease to free',
    );
  });

  it('passes an in-band upstream error event through without a [DONE]', async () => {
    const text = await (await streamChat({ chunks: 4, error_event_after: 1 })).text();
    expect(text).toContain('"error"');
    expect(text).not.toContain('[DONE]');
  });

  it('aborts the upstream call and frees the lease within 1 s when the client disconnects mid-stream', async () => {
    upstream.reset();
    const abort = new AbortController();
    const res = await streamChat({ chunks: 100, chunk_gap_ms: 50 }, abort.signal);
    const reader = res.body!.getReader();
    await reader.read();
    expect((await gateway.queue.counts(['solo'])).get('solo')!.inFlight).toBe(1);
    abort.abort();
    await waitUntil(() => upstream.stats().aborted === 1, 1000, 'the upstream to see the abort');
    await waitUntil(
      async () => (await gateway.queue.counts(['solo'])).get('solo')!.inFlight === 0,
      1000,
      'the lease to free',
    );
  });

  it('delivers each upstream chunk as it is sent, without holding any back', async () => {
    const res = await streamChat({ chunks: 5, chunk_gap_ms: 150 });
    const reader = res.body!.getReader();
    const arrivals: number[] = [];
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const frames = decoder
        .decode(value)
        .split('\n\n')
        .filter((f) => f.includes('"content"'));
      for (let i = 0; i < frames.length; i++) arrivals.push(Date.now());
    }
    expect(arrivals.length).toBeGreaterThanOrEqual(5);
    // Content chunks spread over ≥ 4 gaps of 150 ms: had the gateway buffered, they would arrive together.
    expect(arrivals[4] - arrivals[0]).toBeGreaterThan(400);
  });
});
