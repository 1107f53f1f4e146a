import { MemoryHealthStore } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * README "Streaming": a Responses stream translated from chat (an Ollama or CLI model, any adapter
 * without `/v1/responses`) holds its text for the closing events the spec requires, up to
 * `gateway.max_response_bytes`; past it the stream ends with an error event, not booked. A
 * pass-through stream (vLLM, OpenAI-compatible) holds nothing and is not capped.
 */
const CAP = 4 * 1024 * 1024;
const MB = 1_000_000;

/** SSE events of a Responses stream: type and data. */
function eventsOf(text: string): Array<{ type: string; data: Record<string, unknown> }> {
  return text
    .split('\n\n')
    .map((frame) => /^data: (.*)$/m.exec(frame)?.[1])
    .filter((data): data is string => data !== undefined)
    .map((data) => JSON.parse(data) as Record<string, unknown>)
    .map((data) => ({ type: String(data.type), data }));
}

/** A failed Responses stream's end (README "Streaming"): `response.failed`, then `error`, naming the cap. */
function expectCapError(events: Array<{ type: string; data: Record<string, unknown> }>): void {
  expect(events.slice(-2).map((e) => e.type)).toEqual(['response.failed', 'error']);
  expect(events[events.length - 1].data).toMatchObject({
    code: 'upstream_error',
    message: expect.stringContaining('gateway.max_response_bytes'),
  });
}

async function stream(gateway: TestGateway, model: string, input: string, fake?: Record<string, number>) {
  const res = await fetch(`${gateway.url}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, input, stream: true, ...(fake ? { fake } : {}) }),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, bytes: bytes.length, events: eventsOf(bytes.toString('utf8')) };
}

describe('a translated Responses stream holds bounded state (README "Streaming", gateway.max_response_bytes)', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  const health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1 }));

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    const yaml = fleetYaml({ maxBodyBytes: 8 * 1024 * 1024 }).replace(
      'gateway:\n',
      `gateway:\n  max_response_bytes: ${CAP}\n`,
    );
    gateway = await startTestGateway(yaml, { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, undefined, { health });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('Ollama: 20 MB of text stops at the cap with an error event; the client gets < 2 × the cap; not booked', async () => {
    upstream.reset();
    const res = await stream(gateway, 'qwen', 'x', { chunks: 200, chunk_bytes: 100_000 });
    expect(res.status).toBe(200);
    expect(res.bytes).toBeLessThan(2 * CAP);
    expectCapError(res.events);
    expect(res.events.map((e) => e.type)).not.toContain('response.completed');
    const deltas = res.events.filter((e) => e.type === 'response.output_text.delta');
    const sent = deltas.reduce((n, e) => n + String(e.data.delta).length, 0);
    expect(sent).toBeLessThanOrEqual(CAP);
    expect(sent).toBeGreaterThan(CAP - 200_000);
    // The upstream call is stopped, not read to its end.
    await waitUntil(() => upstream.stats().aborted === 1, 5000, 'the upstream call to be aborted');
    expect([...health.unhealthy()]).toEqual([]);
  });

  it('Ollama: 3 MB under the cap completes, each closing event carrying the text once, as the spec requires', async () => {
    const res = await stream(gateway, 'qwen', 'x', { chunks: 30, chunk_bytes: 100_000 });
    const types = res.events.map((e) => e.type);
    expect(types.slice(-4)).toEqual([
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const text = res.events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => String(e.data.delta))
      .join('');
    expect(text.length).toBeGreaterThanOrEqual(3 * MB);
    const completed = res.events[res.events.length - 1].data as {
      response: { output: Array<{ content: Array<{ text: string }> }> };
    };
    expect(completed.response.output[0].content[0].text).toBe(text);
    // The deltas and four closing copies, and little else.
    expect(res.bytes).toBeLessThan(5 * text.length + 500_000);
  });

  it('CLI: an echo past the cap stops with an error event too', async () => {
    const res = await stream(gateway, 'echo', 'y'.repeat(5 * MB));
    expect(res.status).toBe(200);
    expect(res.bytes).toBeLessThan(2 * CAP);
    expectCapError(res.events);
  });

  it('vLLM pass-through: a stream past the cap is passed on whole (it holds nothing)', async () => {
    const res = await stream(gateway, 'llama', 'x', { chunks: 60, chunk_bytes: 100_000 });
    expect(res.events[res.events.length - 1].type).toBe('response.completed');
    expect(res.bytes).toBeGreaterThan(6 * MB);
  });
});
