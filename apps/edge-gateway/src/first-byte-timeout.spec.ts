import { MemoryHealthStore } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { states } from './testing/client-input';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * README "Provider health": a first-byte timeout does not count against a provider that sent a first
 * byte to another request since the timed-out one started (`weighFirstByteTimeout`). A request's own
 * length (a non-streamed answer of 20,000 tokens) is not evidence against a provider that answers
 * others meanwhile. Nothing probes these gateways, so no probe is known to pass and this rule alone
 * decides, stream or not; a non-streamed timeout on a provider whose probe passes is never booked
 * (`long-answers-spare-providers.spec.ts`).
 */
const TIMEOUT_MS = 600;

/** One single-provider pool per adapter type on one fake upstream (so small requests reach the same provider as the big one). */
const yaml = `
version: 1
gateway: { request_timeout_ms: ${TIMEOUT_MS} }
health: { interval_ms: 600000, unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: a, type: vllm, base_url: "\${UPSTREAM}" }
      - { id: b, type: openai_compat, base_url: "\${UPSTREAM}" }
      - { id: c, type: ollama, base_url: "\${UPSTREAM}" }
    providers:
      - { id: p-vllm, category: vllm, adapter: a, models: [mv], max_concurrency: 8 }
      - { id: p-compat, category: openai_compat, adapter: b, models: [mc], max_concurrency: 8 }
      - { id: p-ollama, category: ollama, adapter: c, models: [mo], max_concurrency: 8 }
  - id: pair
    adapters:
      - { id: d, type: vllm, base_url: "\${UPSTREAM}" }
      - { id: e, type: openai_compat, base_url: "\${UPSTREAM}" }
    providers:
      - { id: pair-1, category: vllm, adapter: d, models: [mp], max_concurrency: 8 }
      - { id: pair-2, category: openai_compat, adapter: e, models: [mp], max_concurrency: 8 }
`;

type Endpoint = 'chat' | 'responses' | 'embeddings';
const PATH: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  responses: '/v1/responses',
  embeddings: '/v1/embeddings',
};

function body(endpoint: Endpoint, model: string, stream: boolean, delayMs: number): string {
  const fake = { delay_ms: delayMs };
  if (endpoint === 'embeddings') return JSON.stringify({ model, input: 'x', fake });
  const input = endpoint === 'chat' ? { messages: [{ role: 'user', content: 'x' }] } : { input: 'x' };
  return JSON.stringify({ model, ...input, stream, max_tokens: 20000, fake });
}

async function post(gateway: TestGateway, endpoint: Endpoint, text: string) {
  const res = await fetch(`${gateway.url}${PATH[endpoint]}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: text,
  });
  return { status: res.status, text: await res.text() };
}

describe('a first-byte timeout is weighed against what the provider did meanwhile (README "Provider health")', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  let health: MemoryHealthStore;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(async () => {
    await upstream.close();
  });
  beforeEach(async () => {
    health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60_000 }));
    gateway = await startTestGateway(yaml, { UPSTREAM: upstream.url }, undefined, { health });
    upstream.reset();
  });
  afterEach(async () => {
    await gateway.close();
  });

  const cases = (
    [
      ['mv', 'vLLM'],
      ['mc', 'OpenAI-compatible'],
      ['mo', 'Ollama'],
    ] as const
  ).flatMap(([model, adapter]) =>
    (['chat', 'responses', 'embeddings'] as const).flatMap((endpoint) =>
      (endpoint === 'embeddings' ? [false] : [false, true]).map(
        (stream) => [adapter, model, endpoint, stream] as const,
      ),
    ),
  );

  it.each(cases)(
    '%s (%s) %s, stream %s: big requests time out while small ones are answered: the provider stays healthy',
    async (_adapter, model, endpoint, stream) => {
      const big = Promise.all([1, 2, 3].map(() => post(gateway, endpoint, body(endpoint, model, stream, 3000))));
      let bigDone = false;
      void big.then(() => (bigDone = true));
      const small: number[] = [];
      while (!bigDone) {
        small.push((await post(gateway, endpoint, body(endpoint, model, stream, 0))).status);
        await new Promise((r) => setTimeout(r, 50));
      }
      const answers = await big;
      expect(answers.map((a) => a.status)).toEqual([504, 504, 504]);
      expect(answers.map((a) => (JSON.parse(a.text) as { error: { code: string } }).error.code)).toEqual([
        'upstream_timeout',
        'upstream_timeout',
        'upstream_timeout',
      ]);
      expect(small.length).toBeGreaterThan(3);
      expect(new Set(small)).toEqual(new Set([200]));
      expect([...health.unhealthy()]).toEqual([]);
      // After the big ones, the provider still serves.
      expect((await post(gateway, endpoint, body(endpoint, model, stream, 0))).status).toBe(200);
    },
  );

  it.each(cases)(
    '%s (%s) %s, stream %s: a provider that answers nobody is booked unhealthy as before',
    async (_adapter, model, endpoint, stream) => {
      const res = await post(gateway, endpoint, body(endpoint, model, stream, 3000));
      expect(res.status).toBe(504);
      expect([...health.unhealthy()]).toEqual([`p-${{ mv: 'vllm', mc: 'compat', mo: 'ollama' }[model]}`]);
    },
  );

  it('a timeout while the provider answered others is not retried on a sibling; one that answered nobody is', async () => {
    // One big request on each provider of the pair (the least loaded is picked), and bursts of small
    // ones that both providers answer meanwhile: neither big one is failed over, nothing is booked.
    const big = Promise.all([1, 2].map(() => post(gateway, 'chat', body('chat', 'mp', false, 3000))));
    let bigDone = false;
    void big.then(() => (bigDone = true));
    while (!bigDone) {
      const burst = await Promise.all([1, 2, 3, 4].map(() => post(gateway, 'chat', body('chat', 'mp', false, 0))));
      expect(burst.map((a) => a.status)).toEqual([200, 200, 200, 200]);
      await new Promise((r) => setTimeout(r, 30));
    }
    expect((await big).map((a) => a.status)).toEqual([504, 504]);
    // The gateway aborts each call it timed out: two aborts, so no retry.
    await waitUntil(() => upstream.stats().aborted >= 2, 2000, 'the timed-out calls to be aborted');
    expect(upstream.stats().aborted).toBe(2);
    expect([...health.unhealthy()]).toEqual([]);
    expect(await states(gateway)).toEqual(
      expect.arrayContaining([
        ['pair-1', 'ready'],
        ['pair-2', 'ready'],
      ]),
    );

    // Alone, the big request times out on both, each booked.
    upstream.reset();
    expect((await post(gateway, 'chat', body('chat', 'mp', false, 3000))).status).toBe(504);
    expect([...health.unhealthy()].sort()).toEqual(['pair-1', 'pair-2']);
    await waitUntil(() => upstream.stats().aborted >= 2, 2000, 'both timed-out calls to be aborted');
    expect(upstream.stats().aborted).toBe(2);
  });
});
