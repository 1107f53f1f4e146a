import { type FakeUpstream, ECHO_LLM } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';
import { requestBody, post, errorOf, upstreamBehaviourFixture } from './testing/upstream-behaviour';

/**
 * Upstreams and clients as they really behave on the memory backend (README "Request fields per adapter", "Errors",
 * "Configuration"): what operators write: the request fields each adapter carries, disabled providers, `base_url`
 * forms. Shared setup: `testing/upstream-behaviour.ts`.
 */

describe('upstreams and clients as they really behave (memory backend)', () => {
  let up: FakeUpstream;
  let gateway: TestGateway;

  const fixture = upstreamBehaviourFixture(() => gateway);
  beforeAll(() => {
    ({ up } = fixture.upstreams());
  });
  const start = async (...args: Parameters<typeof fixture.start>) => {
    ({ gateway } = await fixture.start(...args));
  };

  describe('request fields each adapter carries (its field table)', () => {
    it('sends max_completion_tokens to Ollama as max_tokens, chat and translated Responses alike', async () => {
      await start();
      expect(
        (await post(gateway, 'chat', requestBody('chat', 'om', false, {}, { max_completion_tokens: 16 }))).status,
      ).toBe(200);
      expect(up.stats().lastRequest.om.body).toMatchObject({ max_tokens: 16 });
      expect(up.stats().lastRequest.om.body).not.toHaveProperty('max_completion_tokens');
      expect(
        (await post(gateway, 'responses', requestBody('responses', 'om', false, {}, { max_output_tokens: 12 }))).status,
      ).toBe(200);
      expect(up.stats().lastRequest.om.body).toMatchObject({ max_tokens: 12 });
      // vLLM takes max_completion_tokens itself.
      expect(
        (await post(gateway, 'chat', requestBody('chat', 'vm', false, {}, { max_completion_tokens: 16 }))).status,
      ).toBe(200);
      expect(up.stats().lastRequest.vm.body).toMatchObject({ max_completion_tokens: 16 });
    });

    it.each([
      ['n: 2 to Ollama', 'chat', 'om', { n: 2 }, 'n'],
      ['logit_bias to Ollama', 'chat', 'om', { logit_bias: { 50256: -100 } }, 'logit_bias'],
      ['tools to a translated Responses model', 'responses', 'om', { tools: [{ type: 'web_search' }] }, 'tools'],
      ['temperature to a CLI model', 'chat', 'echo', { temperature: 0.3 }, 'temperature'],
      ['max_output_tokens to a CLI model', 'responses', 'echo', { max_output_tokens: 5 }, 'max_output_tokens'],
    ] as const)(
      'refuses %s with a 400 naming the param, before any upstream call or lease',
      async (_what, endpoint, model, extra, param) => {
        await start();
        const res = await post(gateway, endpoint, {
          ...requestBody(endpoint, model, false),
          fake: undefined,
          ...extra,
        });
        expect(res.status).toBe(400);
        expect(errorOf(res)).toMatchObject({ code: 'invalid_request_error', param });
        expect(up.stats().total).toBe(0);
      },
    );

    it('in a pool of a vLLM and an Ollama provider, a field only vLLM carries goes to vLLM', async () => {
      up.reset();
      const mixed = `
version: 1
nodes:
  - id: n
    adapters:
      - { id: o, type: ollama, base_url: "\${ORIGIN}" }
      - { id: v, type: vllm, base_url: "\${ORIGIN}" }
    providers:
      - { id: ol, category: ollama, adapter: o, models: [mix], max_concurrency: 4 }
      - { id: vl, category: vllm, adapter: v, models: [mix], max_concurrency: 4 }
`;
      gateway = await startTestGateway(mixed, { ORIGIN: up.origin });
      for (let i = 0; i < 3; i++) {
        const res = await post(gateway, 'chat', requestBody('chat', 'mix', false, {}, { logit_bias: { 1: 1 } }));
        expect(res.status).toBe(200);
        expect(res.headers.get('x-iop-resource')).toBe('vl');
      }
    });
  });

  describe('every provider of a model disabled', () => {
    it('is 503 no_available_provider with Retry-After, still listed in /v1/models; 404 only for a model nothing serves', async () => {
      const off = `
version: 1
nodes:
  - id: n
    adapters:
      - { id: c, type: openai_compat, base_url: "\${ORIGIN}/v1" }
      - { id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}] }
    providers:
      - { id: a, category: openai_compat, adapter: c, models: [gone], max_concurrency: 1, enabled: false }
      - { id: b, category: openai_compat, adapter: c, models: [gone], max_concurrency: 1, enabled: false }
      - { id: e, category: cli, adapter: echo, models: [cli-gone], enabled: false }
`;
      gateway = await startTestGateway(off, { ORIGIN: up.origin });
      for (const endpoint of ['chat', 'responses', 'embeddings'] as const) {
        const res = await post(gateway, endpoint, requestBody(endpoint, 'gone', false));
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).not.toBeNull();
        expect(errorOf(res).code).toBe('no_available_provider');
      }
      const cli = await post(gateway, 'chat', requestBody('chat', 'cli-gone', false));
      expect(cli.status).toBe(503);
      expect(errorOf(cli).code).toBe('no_available_provider');
      expect((await post(gateway, 'chat', requestBody('chat', 'never-configured', false))).status).toBe(404);
      const models = (await (await fetch(`${gateway.baseURL}/models`)).json()) as { data: Array<{ id: string }> };
      expect(models.data.map((m) => m.id)).toEqual(['gone', 'cli-gone']);
    });
  });

  describe('base_url as operators write it', () => {
    it('with or without /v1, for every adapter type', async () => {
      const bases = `
version: 1
nodes:
  - id: n
    adapters:
      - { id: v1, type: vllm, base_url: "\${ORIGIN}" }
      - { id: v2, type: vllm, base_url: "\${ORIGIN}/v1/" }
      - { id: o1, type: ollama, base_url: "\${ORIGIN}" }
      - { id: o2, type: ollama, base_url: "\${ORIGIN}/v1" }
      - { id: c1, type: openai_compat, base_url: "\${ORIGIN}" }
      - { id: c2, type: openai_compat, base_url: "\${ORIGIN}/v1" }
    providers:
${['v1', 'v2', 'o1', 'o2', 'c1', 'c2'].map((a) => `      - { id: p-${a}, category: ${a.startsWith('v') ? 'vllm' : a.startsWith('o') ? 'ollama' : 'openai_compat'}, adapter: ${a}, models: [m-${a}], max_concurrency: 1 }`).join('\n')}
`;
      gateway = await startTestGateway(bases, { ORIGIN: up.origin }, undefined, { health: true });
      for (const a of ['v1', 'v2', 'o1', 'o2', 'c1', 'c2']) {
        for (const endpoint of ['chat', 'responses', 'embeddings'] as const) {
          const res = await post(gateway, endpoint, requestBody(endpoint, `m-${a}`, false));
          expect([a, endpoint, res.status]).toEqual([a, endpoint, 200]);
        }
      }
      await gateway.prober!.probeOnce();
      expect([...gateway.health!.unhealthy()]).toEqual([]);
    });

    it('sends userinfo as HTTP Basic auth (never in the URL), keeps a query string, and an upstream that is down is a 502 naming neither', async () => {
      const secret = 's3cr3t-Pa55';
      const creds = `
version: 1
nodes:
  - id: n
    adapters:
      - { id: u, type: vllm, base_url: "http://admin:\${SECRET}@127.0.0.1:${up.port}/v1?token=\${SECRET}" }
      - { id: down, type: openai_compat, base_url: "http://admin:\${SECRET}@127.0.0.1:1/v1?token=\${SECRET}" }
    providers:
      - { id: up, category: vllm, adapter: u, models: [creds], max_concurrency: 1 }
      - { id: dn, category: openai_compat, adapter: down, models: [down], max_concurrency: 1 }
`;
      gateway = await startTestGateway(creds, { SECRET: secret });
      expect((await post(gateway, 'chat', requestBody('chat', 'creds', false))).status).toBe(200);
      const seen = up.stats().lastRequest.creds;
      expect(seen.headers.authorization).toBe(`Basic ${Buffer.from(`admin:${secret}`).toString('base64')}`);
      expect(seen.path).toBe(`/v1/chat/completions?token=${secret}`);
      for (const endpoint of ['chat', 'responses', 'embeddings'] as const) {
        for (const stream of [false, true]) {
          const res = await post(gateway, endpoint, requestBody(endpoint, 'down', stream));
          expect(res.status).toBe(502);
          expect(res.text).not.toContain(secret);
          expect(res.text).not.toContain('127.0.0.1');
          expect(res.text).not.toContain('admin');
          expect(errorOf(res).message).toMatch(/could not be reached \(ECONNREFUSED\).*request id/);
        }
      }
    });
  });
});
