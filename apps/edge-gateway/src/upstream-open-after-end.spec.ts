import { MemoryHealthStore } from '@iop/dispatch';
import { streamEvents } from './testing/raw-answers';
import { chunkHead, startRawUpstream, type RawRequest, type RawUpstream } from './testing/raw-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { events, post, requestBody } from './testing/upstream-behaviour';

/**
 * README "Streaming": once the end marker has passed, the stream is finished. An upstream that sends
 * its end marker (`data: [DONE]`, `response.completed`) and then keeps the stream open, sending
 * nothing, is closed when `gateway.stream_idle_timeout_ms` passes, and the client's answer ends
 * there cleanly: no error event after the marker, and nothing booked against the provider. Checked
 * on chat and Responses, passed through and translated.
 */
const yaml = `
version: 1
gateway: { request_timeout_ms: 5000, stream_idle_timeout_ms: 400 }
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${RAW}" }
      - { id: o, type: ollama, base_url: "\${RAW}" }
      - { id: c, type: openai_compat, base_url: "\${RAW}/v1" }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 4 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 4 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 4 }
`;

describe('an upstream that keeps its stream open after the end marker', () => {
  let raw: RawUpstream;
  let gateway: TestGateway;
  let health: MemoryHealthStore;
  /** Resolves when the gateway has closed the upstream's connection. */
  let upstreamClosed: Promise<void>;

  beforeAll(async () => {
    raw = await startRawUpstream((req: RawRequest, socket) => {
      upstreamClosed = new Promise((resolve) => socket.once('close', () => resolve()));
      socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
      // Every event, the end marker included, and then neither the last chunk nor a close.
      for (const event of streamEvents(req, ['hel', 'lo'])) {
        const bytes = Buffer.from(event);
        socket.write(Buffer.concat([chunkHead(bytes.length), bytes, Buffer.from('\r\n')]));
      }
    });
  });
  beforeEach(async () => {
    health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60_000 }));
    gateway = await startTestGateway(yaml, { RAW: raw.origin }, undefined, { health });
  });
  afterEach(async () => {
    await gateway.close();
  });
  afterAll(async () => {
    await raw.close();
  });

  it.each([
    ['chat, vLLM', 'chat', 'vm', 'vl'],
    ['chat, Ollama', 'chat', 'om', 'ol'],
    ['Responses passed through, OpenAI-compatible', 'responses', 'cm', 'co'],
    ['Responses translated, Ollama', 'responses', 'om', 'ol'],
  ] as const)(
    '%s: the answer ends cleanly at the idle timeout, the upstream is closed, nothing is booked',
    async (_w, endpoint, model, provider) => {
      const startedAt = Date.now();
      const res = await post(gateway, endpoint, requestBody(endpoint, model, true));
      expect(res.status).toBe(200);
      const all = events(res.text);
      // No error event after the marker: the marker is the answer's last event.
      if (endpoint === 'chat') {
        expect(all.at(-1)?.data).toBe('[DONE]');
        expect(all.filter((e) => typeof e.data === 'object' && e.data !== null && 'error' in e.data)).toEqual([]);
      } else {
        expect(all.at(-1)?.event).toBe('response.completed');
        expect(all.map((e) => e.event)).not.toContain('error');
        expect(all.map((e) => e.event)).not.toContain('response.failed');
      }
      // Ended by the idle timeout (400 ms), not by the upstream, which never ends its stream.
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(350);
      await upstreamClosed;
      expect(health.unhealthy().has(provider)).toBe(false);
    },
  );
});
