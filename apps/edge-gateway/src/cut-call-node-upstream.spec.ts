import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { waitUntil } from '@iop/dispatch/testing';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

// docs/architecture.md "Invariants and their tests": a call holds its slot, as the model server sees it, until the
// server has seen the connection close. A call the gateway cuts keeps its lease until the server (here the fake
// upstream, a Node HTTP server) has closed its side, so the next queued request never reaches it first. Upstreams
// slow to read the close, or that never close their side: `cut-call-close.spec.ts`.
const yaml = (maxResponseBytes = 64 * 1024 * 1024) => `
version: 1
gateway: { request_timeout_ms: 5000, stream_idle_timeout_ms: 400, max_response_bytes: ${maxResponseBytes} }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${ORIGIN}" }
      - { id: o, type: ollama, base_url: "\${ORIGIN}" }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 1 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 1 }
`;

const PATHS = { chat: '/v1/chat/completions', responses: '/v1/responses' } as const;

describe('a call the gateway cut keeps its slot until the upstream has seen the close', () => {
  let up: FakeUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    up = await startFakeUpstream({ name: 'up' });
  });
  afterEach(async () => {
    await gateway?.close();
    up.reset();
  });
  afterAll(async () => {
    await up.close();
  });

  it.each([
    ['a client that disconnects mid-stream (chat, vLLM)', 'chat', 'vm', 'client'],
    ['a client that disconnects mid-stream (Responses translated, Ollama)', 'responses', 'om', 'client'],
    ['a stream cut for gateway.stream_idle_timeout_ms (chat, vLLM)', 'chat', 'vm', 'idle'],
    // The gateway stops reading a translated stream at its cap while the upstream still writes it.
    ['a translated stream cut at gateway.max_response_bytes (Responses, Ollama)', 'responses', 'om', 'cap'],
  ] as const)(
    '%s: the queued request reaches the upstream only after it has seen the close',
    async (_w, endpoint, model, cut) => {
      gateway = await startTestGateway(yaml(cut === 'cap' ? 20_000 : undefined), { ORIGIN: up.origin });
      const head = endpoint === 'chat' ? { messages: [{ role: 'user', content: 'hi' }] } : { input: 'hi' };
      const fake =
        cut === 'client'
          ? { chunks: 200, chunk_gap_ms: 20 }
          : cut === 'cap'
            ? { chunks: 200, chunk_gap_ms: 20, chunk_bytes: 2000 }
            : { chunks: 5, stall_after: 1 };
      const client = new AbortController();
      const first = fetch(`${gateway.url}${PATHS[endpoint]}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, ...head, stream: true, fake }),
        signal: client.signal,
      }).then(async (res) => {
        const reader = res.body!.getReader();
        await reader.read();
        if (cut === 'client') client.abort();
        else while (!(await reader.read()).done);
      });
      await waitUntil(() => up.stats().total === 1, 2000, 'the first call to reach the upstream');
      const queued = fetch(`${gateway.url}${PATHS[endpoint]}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, ...head, stream: false }),
      });
      await waitUntil(() => up.stats().total === 2, 3000, 'the queued call to reach the upstream');
      await first.catch(() => undefined);
      expect((await queued).status).toBe(200);
      // The fake upstream ends a call once its socket is closed: the cut call was over before the next arrived.
      expect(up.stats().aborted).toBe(1);
      expect(up.stats().max).toBe(1);
    },
  );
});
