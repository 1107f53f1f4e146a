import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { states } from './testing/client-input';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * README "Provider health" (first-byte timeouts) and docs/architecture.md's invariant "client input
 * never causes an unhealthy provider": a non-streamed request's first byte is its whole answer, so
 * a long completion (`max_tokens: 20000`) that outlasts `gateway.request_timeout_ms` says nothing
 * against a provider whose probe passes. The reported case: six such requests to a pool whose
 * upstream answers after longer than the timeout, nothing else running: each gets its `504`, and no
 * provider leaves `ready`. What the upstream did is still booked: a streamed request with no first
 * byte in time, a non-streamed one on a provider whose probe does not pass.
 * Every gateway here is probed (a real prober, every 150 ms, timing out at 300 ms) and talks to a real HTTP server.
 */
const TIMEOUT_MS = 1000;
/** How long the upstream takes to answer a long request: past the timeout (the gateway aborts it first). */
const LONG_MS = 3000;

const yaml = (cooldownMs = 60_000) => `
version: 1
gateway: { request_timeout_ms: ${TIMEOUT_MS} }
health: { interval_ms: 150, timeout_ms: 300, unhealthy_after: 1, healthy_after: 1, cooldown_ms: ${cooldownMs} }
nodes:
  - id: n
    adapters:
      - { id: a, type: vllm, base_url: "\${UP}" }
      - { id: b, type: openai_compat, base_url: "\${UP}" }
      - { id: c, type: ollama, base_url: "\${UP}" }
      - { id: d, type: vllm, base_url: "\${HUNG}" }
    providers:
      - { id: p-vllm, category: vllm, adapter: a, models: [mp], max_concurrency: 2 }
      - { id: p-compat, category: openai_compat, adapter: b, models: [mp], max_concurrency: 2 }
      - { id: p-ollama, category: ollama, adapter: c, models: [mo], max_concurrency: 2 }
      - { id: p-hung, category: vllm, adapter: d, models: [mh], max_concurrency: 2 }
`;

type Endpoint = 'chat' | 'responses' | 'embeddings';
const PATH: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  responses: '/v1/responses',
  embeddings: '/v1/embeddings',
};

/** A request of `endpoint` to `model` asking for a long completion; the upstream takes `delayMs` before any byte. */
function body(endpoint: Endpoint, model: string, stream: boolean, delayMs: number, extra: object = {}): string {
  const fake = { delay_ms: delayMs, ...extra };
  // Embeddings are long by their input: 20,000 bytes (6,667 tokens by the estimate, 1.7 s of a fast
  // engine's prefill) explain a 1 s wait (README "Provider health").
  if (endpoint === 'embeddings') return JSON.stringify({ model, input: 'word '.repeat(4000), fake });
  const input = endpoint === 'chat' ? { messages: [{ role: 'user', content: 'x' }] } : { input: 'x' };
  return JSON.stringify({ model, ...input, stream, max_tokens: 20000, fake });
}

async function post(gateway: TestGateway, endpoint: Endpoint, text: string) {
  const res = await fetch(`${gateway.url}${PATH[endpoint]}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: text,
  });
  return { status: res.status, code: ((await res.json()) as { error?: { code: string } }).error?.code };
}

describe('long non-streamed requests never take out a provider whose probe passes (README "Provider health")', () => {
  let up: FakeUpstream;
  let hung: FakeUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    up = await startFakeUpstream({ name: 'up' });
    // Its probe waits behind the work, as a server that answers nothing does: it times out under load.
    hung = await startFakeUpstream({ name: 'hung', probesWaitForWork: true });
  });
  afterAll(async () => {
    await Promise.all([up.close(), hung.close()]);
  });

  async function start(cooldownMs?: number): Promise<void> {
    gateway = await startTestGateway(yaml(cooldownMs), { UP: up.url, HUNG: hung.url }, undefined, {
      health: true,
    });
    // One probe round in: every provider of the fake upstreams is known and passing.
    await waitUntil(
      () => ['p-vllm', 'p-compat', 'p-ollama', 'p-hung'].every((id) => gateway.health?.views().has(id)),
      3000,
      'a first probe round',
    );
    up.reset();
  }
  afterEach(async () => {
    await gateway.close();
  });

  const unhealthy = () => [...(gateway.health?.unhealthy() ?? [])].sort();
  const state = async (id: string) => (await states(gateway)).find(([rid]) => rid === id)?.[1];

  const cases = (['chat', 'responses', 'embeddings'] as const).flatMap((endpoint) =>
    (
      [
        ['a vLLM + OpenAI-compatible pool', 'mp', ['p-vllm', 'p-compat']],
        ['an Ollama provider alone', 'mo', ['p-ollama']],
      ] as const
    ).map(([what, model, ids]) => [endpoint, what, model, ids] as const),
  );

  it.each(cases)(
    '%s, not streamed, %s: six requests time out at the first byte; 504s, not retried, every provider stays ready',
    async (endpoint, _what, model, ids) => {
      await start();
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => post(gateway, endpoint, body(endpoint, model, false, LONG_MS))),
      );
      expect(answers).toEqual(Array.from({ length: 6 }, () => ({ status: 504, code: 'upstream_timeout' })));
      // Not failed over: one upstream call per request (a sibling would take as long).
      await waitUntil(() => up.stats().aborted >= 6, 3000, 'the six timed-out calls to be aborted');
      expect(up.stats().aborted).toBe(6);
      expect(unhealthy()).toEqual([]);
      for (const id of ids) expect(await state(id)).toBe('ready');
      // It still serves.
      expect((await post(gateway, endpoint, body(endpoint, model, false, 0))).status).toBe(200);
    },
  );

  it.each(['chat', 'responses', 'embeddings'] as const)(
    '%s, not streamed: the trial of a half-open provider that times out is given back, not another cooldown',
    async (endpoint) => {
      await start(300);
      expect((await post(gateway, endpoint, body(endpoint, 'mo', false, 0, { status: 500 }))).status).toBe(502);
      expect(unhealthy()).toEqual(['p-ollama']);
      await waitUntil(() => gateway.health?.views().get('p-ollama')?.state === 'half_open', 3000, 'the cooldown');
      expect(await post(gateway, endpoint, body(endpoint, 'mo', false, LONG_MS))).toEqual({
        status: 504,
        code: 'upstream_timeout',
      });
      // Given back at once: still half-open (no new cooldown), and the next request's trial brings it back.
      expect(gateway.health?.views().get('p-ollama')?.state).toBe('half_open');
      expect((await post(gateway, endpoint, body(endpoint, 'mo', false, 0))).status).toBe(200);
      await waitUntil(() => unhealthy().length === 0, 3000, 'the trial to bring it back');
      expect(await state('p-ollama')).toBe('ready');
    },
  );

  describe('what the upstream did is still booked', () => {
    it.each([
      ['chat', 'mp'],
      ['responses', 'mp'],
      ['chat', 'mo'],
      ['responses', 'mo'],
    ] as const)(
      '%s to %s, streamed, no first byte in time: the provider is taken out though its probe passes',
      async (endpoint, model) => {
        await start();
        expect(await post(gateway, endpoint, body(endpoint, model, true, LONG_MS))).toEqual({
          status: 504,
          code: 'upstream_timeout',
        });
        await waitUntil(() => unhealthy().length > 0, 3000, 'the timeout to be booked');
        // The pool fails over once, so both of its providers are booked.
        expect(unhealthy()).toEqual(model === 'mp' ? ['p-compat', 'p-vllm'] : ['p-ollama']);
        expect(gateway.health?.views().get(model === 'mp' ? 'p-vllm' : 'p-ollama')?.reason).toMatch(
          /request failed: upstream sent no byte within 1000 ms \(gateway.request_timeout_ms\)/,
        );
      },
    );

    it('not streamed, on a provider whose probe does not pass meanwhile (it waits behind the work): booked', async () => {
      await start();
      expect(await post(gateway, 'chat', body('chat', 'mh', false, LONG_MS))).toEqual({
        status: 504,
        code: 'upstream_timeout',
      });
      await waitUntil(() => unhealthy().includes('p-hung'), 3000, 'the timeout to be booked');
      expect(await state('p-hung')).toBe('unhealthy');
    });
  });
});
