import { MemoryHealthStore, type HealthStore } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, type KnobName, ECHO_LLM } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { connect } from 'node:net';
import OpenAI from 'openai';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * Upstreams and clients as they really behave (README "Streaming", "Errors", "Failover", "Provider
 * health", "Request fields per adapter"), on the memory backend: real sockets, scripted upstreams,
 * the openai client where a client is involved. The Redis backend and gateway processes:
 * `upstreams-as-they-behave.redis.spec.ts`.
 */

type Knobs = Partial<Record<KnobName, number>>;

/**
 * One provider per adapter type on the upstream `${ORIGIN}` (vLLM and Ollama written without `/v1`,
 * as their docs write a server address), a CLI model, and a pool `pm` of `pa` (on `${BAD}`, an
 * upstream that misbehaves on every request) and `pb` (on `${GOOD}`).
 */
const yaml = (
  opts: { idleMs?: number; maxResponseBytes?: number; requestTimeoutMs?: number; apiKeys?: string[] } = {},
) => `
version: 1
gateway:
  request_timeout_ms: ${opts.requestTimeoutMs ?? 5000}
  stream_idle_timeout_ms: ${opts.idleMs ?? 600}
  max_response_bytes: ${opts.maxResponseBytes ?? 1000000}
  api_keys: ${JSON.stringify(opts.apiKeys ?? [])}
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: v, type: vllm, base_url: "\${ORIGIN}" }
      - { id: o, type: ollama, base_url: "\${ORIGIN}" }
      - { id: c, type: openai_compat, base_url: "\${ORIGIN}/v1" }
      - { id: bad, type: vllm, base_url: "\${BAD}" }
      - { id: good, type: openai_compat, base_url: "\${GOOD}" }
      - { id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}], timeout_ms: 10000 }
    providers:
      - { id: vl, category: vllm, adapter: v, models: [vm], max_concurrency: 1 }
      - { id: ol, category: ollama, adapter: o, models: [om], max_concurrency: 1 }
      - { id: co, category: openai_compat, adapter: c, models: [cm], max_concurrency: 1 }
      - { id: pa, category: vllm, adapter: bad, models: [pm], max_concurrency: 2 }
      - { id: pb, category: openai_compat, adapter: good, models: [pm], max_concurrency: 2 }
      - { id: cli-p, category: cli, adapter: echo, models: [echo] }
`;

const PATHS = { chat: '/v1/chat/completions', responses: '/v1/responses', embeddings: '/v1/embeddings' } as const;
type Endpoint = keyof typeof PATHS;

function requestBody(
  endpoint: Endpoint,
  model: string,
  stream: boolean,
  fake: Knobs = {},
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  if (endpoint === 'embeddings') return { model, input: ['hello', 'world'], fake, ...extra };
  const head = endpoint === 'chat' ? { messages: [{ role: 'user', content: 'hello' }] } : { input: 'hello' };
  return { model, ...head, stream, fake, ...extra };
}

async function post(
  gateway: TestGateway,
  endpoint: Endpoint,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; text: string; json: () => Record<string, unknown> }> {
  const res = await fetch(`${gateway.url}${PATHS[endpoint]}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) as Record<string, unknown> };
}

const errorOf = (r: { json: () => Record<string, unknown> }) =>
  r.json().error as { message: string; type: string; code: string; param: string | null };

/** SSE events of a body: `{event, data}`, data parsed when it is JSON. */
function events(text: string): Array<{ event?: string; data: unknown }> {
  return text
    .split(/\n\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const event = /^event: (.+)$/m.exec(block)?.[1];
      const raw = /^data: (.*)$/m.exec(block)?.[1] ?? '';
      let data: unknown = raw;
      try {
        data = JSON.parse(raw);
      } catch {
        // [DONE]
      }
      return { event, data };
    });
}

const inFlight = async (gateway: TestGateway, id: string) => (await gateway.queue.counts([id])).get(id)!.inFlight;
const statusOf = async (gateway: TestGateway) =>
  ((await (await fetch(`${gateway.url}/status`)).json()) as StatusSnapshot).nodes.flatMap((n) => n.resources);

describe('upstreams and clients as they really behave (memory backend)', () => {
  let up: FakeUpstream;
  let bad: FakeUpstream;
  let good: FakeUpstream;
  let gateway: TestGateway;
  let health: HealthStore;

  const start = async (opts: Parameters<typeof yaml>[0] = {}, badKnobs: Knobs = { reset_before_body: 1 }) => {
    await bad?.close();
    bad = await startFakeUpstream({ name: 'bad', knobs: badKnobs });
    health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 60_000 }));
    gateway = await startTestGateway(yaml(opts), { ORIGIN: up.origin, BAD: bad.url, GOOD: good.url }, undefined, {
      health,
    });
  };

  beforeAll(async () => {
    up = await startFakeUpstream({ name: 'up' });
    good = await startFakeUpstream({ name: 'good' });
  });
  afterEach(async () => {
    await gateway?.close();
    await bad?.close();
    up.reset();
    good.reset();
  });
  afterAll(async () => {
    await up.close();
    await good.close();
  });

  describe('a stream where no byte moves for gateway.stream_idle_timeout_ms is cut', () => {
    it('a client that never reads a 20 MB stream loses it: upstream aborted, lease released, and the next request is served', async () => {
      await start({ idleMs: 500 });
      // A raw socket that sends the request and then reads nothing at all.
      const { port } = new URL(gateway.url);
      const socket = connect(Number(port), '127.0.0.1');
      await new Promise<void>((r) => socket.once('connect', () => r()));
      socket.pause();
      const body = JSON.stringify(requestBody('chat', 'cm', true, { chunks: 200, chunk_bytes: 100_000 }));
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      await waitUntil(async () => (await inFlight(gateway, 'co')) === 1, 2000, 'the stream to hold the slot');
      const cutAt = Date.now();
      await waitUntil(
        async () => (await inFlight(gateway, 'co')) === 0,
        3000,
        'the stalled stream to be cut and its lease released',
      );
      expect(Date.now() - cutAt).toBeLessThan(2500);
      await waitUntil(() => up.stats().aborted === 1, 2000, 'the upstream call to be aborted');
      const next = await post(gateway, 'chat', requestBody('chat', 'cm', false));
      expect(next.status).toBe(200);
      // A client that stops reading is not the provider's fault.
      expect(health.views().get('co')?.state ?? 'healthy').toBe('healthy');
      socket.destroy();
    });

    it.each([
      ['chat, vLLM', 'chat', 'vm', 'vl'],
      ['chat, Ollama', 'chat', 'om', 'ol'],
      ['Responses passed through (vLLM)', 'responses', 'vm', 'vl'],
      ['Responses translated (Ollama)', 'responses', 'om', 'ol'],
    ] as const)(
      'an upstream silent mid-stream (%s): the client gets the error event, the lease is released, the provider booked',
      async (_what, endpoint, model, provider) => {
        await start({ idleMs: 400 });
        const started = Date.now();
        const res = await post(gateway, endpoint, requestBody(endpoint, model, true, { chunks: 5, stall_after: 1 }));
        expect(Date.now() - started).toBeLessThan(3000);
        expect(res.status).toBe(200);
        const all = events(res.text);
        expect(res.text).not.toContain('[DONE]');
        if (endpoint === 'chat') {
          expect(all.at(-1)?.data).toMatchObject({
            error: { code: 'upstream_timeout', message: expect.stringContaining('gateway.stream_idle_timeout_ms') },
          });
        } else {
          expect(all.at(-1)).toMatchObject({ event: 'error', data: { type: 'error', code: 'upstream_timeout' } });
          expect(res.text).not.toContain('response.completed');
        }
        await waitUntil(
          async () => (await inFlight(gateway, provider)) === 0,
          1000,
          'the lease to be released after the settle delay',
        );
        await waitUntil(() => up.stats().aborted === 1, 2000, 'the upstream call to be aborted');
        await waitUntil(() => health.unhealthy().has(provider), 1000, 'the stall to be booked against the provider');
      },
    );

    it('the openai client reports an idle cut of a chat stream as an error', async () => {
      await start({ idleMs: 400 });
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: 'cm',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        fake: { chunks: 4, stall_after: 1 },
      } as never);
      const seen: string[] = [];
      await expect(
        (async () => {
          for await (const chunk of stream as unknown as AsyncIterable<{
            choices: Array<{ delta: { content?: string } }>;
          }>)
            seen.push(chunk.choices[0]?.delta.content ?? '');
        })(),
      ).rejects.toThrow(/stream_idle_timeout_ms/);
      expect(seen.join('')).not.toBe('');
    });
  });

  describe('an upstream that resets the connection before its first byte', () => {
    it.each([
      ['chat stream', 'chat', true],
      ['chat JSON', 'chat', false],
      ['Responses stream, passed through', 'responses', true],
      ['Responses JSON, passed through', 'responses', false],
      ['embeddings', 'embeddings', false],
    ] as const)('%s to a single provider: 502 upstream_error, booked', async (_what, endpoint, stream) => {
      await start();
      const res = await post(gateway, endpoint, requestBody(endpoint, 'vm', stream, { reset_before_body: 1 }));
      expect(res.status).toBe(502);
      expect(errorOf(res)).toMatchObject({ code: 'upstream_error', type: 'server_error' });
      expect(errorOf(res).message).toMatch(/request id [0-9a-f-]{36}/);
      expect(health.unhealthy().has('vl')).toBe(true);
    });

    it.each([
      ['Responses stream, translated (Ollama)', 'responses', true],
      ['Responses JSON, translated (Ollama)', 'responses', false],
      ['embeddings (Ollama)', 'embeddings', false],
    ] as const)('%s: 502 upstream_error, booked', async (_what, endpoint, stream) => {
      await start();
      const res = await post(gateway, endpoint, requestBody(endpoint, 'om', stream, { reset_before_body: 1 }));
      expect(res.status).toBe(502);
      expect(errorOf(res).code).toBe('upstream_error');
      expect(health.unhealthy().has('ol')).toBe(true);
    });

    it.each([
      ['chat stream', 'chat', true],
      ['chat JSON', 'chat', false],
      ['Responses', 'responses', true],
      ['embeddings', 'embeddings', false],
    ] as const)(
      'in a pool (%s): fails over to the sibling, which answers; the resetting provider is booked',
      async (_what, endpoint, stream) => {
        await start();
        const res = await post(gateway, endpoint, requestBody(endpoint, 'pm', stream));
        expect(res.status).toBe(200);
        expect(res.headers.get('x-iop-resource')).toBe('pb');
        expect(bad.stats().total).toBe(1);
        expect(health.unhealthy().has('pa')).toBe(true);
        expect(health.views().get('pa')).toMatchObject({
          state: 'unhealthy',
          reason: expect.stringContaining('upstream_error 502'),
        });
      },
    );
  });

  describe('issue-9 faults of an upstream answer: a body short of its Content-Length, a redirect', () => {
    it.each([
      ['Content-Length 1000, 11 bytes sent', { short_body: 11 }],
      ['302', { redirect: 302 }],
      ['307', { redirect: 307 }],
    ] as const)(
      '%s: 502 upstream_error counted against the provider, never a 500 or the 3xx itself; in a pool, failover',
      async (_what, knobs) => {
        await start({}, knobs);
        for (const model of ['vm', 'om', 'cm']) {
          const res = await post(gateway, 'chat', requestBody('chat', model, false, knobs));
          expect(res.status).toBe(502);
          expect(errorOf(res).code).toBe('upstream_error');
          expect(res.text).not.toContain('internal-host');
        }
        expect([...health.unhealthy()].sort()).toEqual(['co', 'ol', 'vl']);
        const pooled = await post(gateway, 'chat', requestBody('chat', 'pm', false));
        expect(pooled.status).toBe(200);
        expect(pooled.headers.get('x-iop-resource')).toBe('pb');
        expect(health.unhealthy().has('pa')).toBe(true);
      },
    );
  });

  describe('a stream whose last line is `data: [DONE]` with no newline before the close', () => {
    it('counts as done: a translated Responses stream completes (Ollama)', async () => {
      await start();
      const res = await post(
        gateway,
        'responses',
        requestBody('responses', 'om', true, { done_unterminated: 1, chunks: 2 }),
      );
      const all = events(res.text);
      expect(all.at(-1)?.event).toBe('response.completed');
      expect(all.filter((e) => e.event === 'response.output_text.delta')).toHaveLength(2);
      expect(res.text).not.toMatch(/event: error/);
    });

    it('a chat stream passed through reaches the client with its [DONE] terminated, and the openai client reads it whole', async () => {
      await start();
      const res = await post(gateway, 'chat', requestBody('chat', 'om', true, { done_unterminated: 1 }));
      expect(res.text.endsWith('data: [DONE]\n\n')).toBe(true);
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: 'vm',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        fake: { done_unterminated: 1 },
      } as never);
      let text = '';
      for await (const chunk of stream as unknown as AsyncIterable<{ choices: Array<{ delta: { content?: string } }> }>)
        text += chunk.choices[0]?.delta.content ?? '';
      expect(text).toContain('echo: hi');
    });

    it('a chat stream that ends with no [DONE] at all is an upstream failure: error event, booked', async () => {
      await start();
      const res = await post(gateway, 'chat', requestBody('chat', 'vm', true, { cut_after: 2, chunks: 4 }));
      expect(events(res.text).at(-1)?.data).toMatchObject({ error: { code: 'upstream_error' } });
      await waitUntil(() => health.unhealthy().has('vl'), 1000, 'the cut stream to be booked');
    });
  });

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

  describe('an upstream 429', () => {
    it("reaches the client with the upstream's Retry-After and error type (openai client: RateLimitError), not booked as a failure", async () => {
      await start();
      const res = await post(gateway, 'chat', requestBody('chat', 'vm', false, { status: 429, retry_after: 7 }));
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
      expect(errorOf(res).type).toBe('rate_limit_error');
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const err = await client.chat.completions
        .create({
          model: 'cm',
          messages: [{ role: 'user', content: 'x' }],
          fake: { status: 429, retry_after: 7 },
        } as never)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.RateLimitError);
      expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('retry-after')).toBe('7');
      expect(health.views().get('vl')).toMatchObject({ state: 'backoff', reason: expect.stringContaining('429') });
    });

    it('in a pool fails over to the sibling and backs the provider off for its Retry-After: 5 requests, the 429 provider called once', async () => {
      await start({}, { status: 429, retry_after: 7 });
      for (let i = 0; i < 5; i++) {
        const res = await post(gateway, 'chat', requestBody('chat', 'pm', false));
        expect(res.status).toBe(200);
        expect(res.headers.get('x-iop-resource')).toBe('pb');
      }
      expect(bad.stats().total).toBe(1);
      expect(good.stats().total).toBe(5);
      const pa = (await statusOf(gateway)).find((r) => r.id === 'pa');
      expect(pa).toMatchObject({
        state: 'unhealthy',
        health: { state: 'backoff', reason: expect.stringContaining('429') },
      });
      const retryAt = Date.parse(pa!.health!.retry_at!);
      expect(retryAt - Date.now()).toBeGreaterThan(5000);
      expect(retryAt - Date.now()).toBeLessThanOrEqual(7000);
    });

    it('answers 429 with the soonest Retry-After when every provider of the model backs off', async () => {
      await start({}, { status: 429, retry_after: 7 });
      await health.backOff('pa', 7, 'upstream 429');
      await health.backOff('pb', 3, 'upstream 429');
      const res = await post(gateway, 'chat', requestBody('chat', 'pm', false));
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(3);
    });
  });

  describe("a client's own mistake reported by an upstream never counts against it", () => {
    it('a translated Responses stream whose first event is a context-too-long error: 400 passed on, provider healthy', async () => {
      await start();
      for (const stream of [true, false]) {
        const res = await post(
          gateway,
          'responses',
          requestBody('responses', 'om', stream, { error_event_after: 0, error_event_status: 400 }),
        );
        if (stream) {
          expect(res.status).toBe(400);
          expect(errorOf(res)).toMatchObject({
            code: 'context_length_exceeded',
            message: expect.stringContaining('maximum context length'),
          });
        }
      }
      const again = await post(
        gateway,
        'responses',
        requestBody('responses', 'om', true, { error_event_after: 0, error_event_status: 400 }),
      );
      expect(again.status).toBe(400);
      expect(health.unhealthy().has('ol')).toBe(false);
      expect((await post(gateway, 'chat', requestBody('chat', 'om', false, { status: 400 }))).status).toBe(400);
      expect(health.unhealthy().has('ol')).toBe(false);
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

  describe("issue-9: an upstream's answer never leaks the gateway's key or the upstream's host", () => {
    const KEY = 'sk-gateway-upstream-key-123';
    const keyed = () => `
version: 1
nodes:
  - id: n
    adapters:
      - { id: k, type: vllm, base_url: "\${ORIGIN}", api_key: "${KEY}" }
      - { id: echo, type: cli, command: ["node", "-e", "process.stderr.write('token=${KEY} at db.internal:5432\\\\n'); process.exit(7)"] }
    providers:
      - { id: kp, category: vllm, adapter: k, models: [km], max_concurrency: 1 }
      - { id: cp, category: cli, adapter: echo, models: [failing-cli] }
`;

    it.each([401, 403])(
      "an upstream %i is a 502 saying the provider refused the gateway's credentials",
      async (status) => {
        gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
        for (const stream of [false, true]) {
          const res = await post(gateway, 'chat', requestBody('chat', 'km', stream, { status, echo_secrets: 1 }));
          expect(res.status).toBe(502);
          expect(errorOf(res)).toMatchObject({
            code: 'upstream_error',
            message: expect.stringContaining("refused the gateway's credentials"),
          });
          expect(res.text).not.toContain(KEY);
          expect(res.text).not.toContain('127.0.0.1');
        }
      },
    );

    it('an upstream 5xx echoing the key and host: a generic 502 with the request id', async () => {
      gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
      for (const endpoint of ['chat', 'responses', 'embeddings'] as const) {
        const res = await post(gateway, endpoint, requestBody(endpoint, 'km', false, { status: 500, echo_secrets: 1 }));
        expect(res.status).toBe(502);
        expect(res.text).not.toContain(KEY);
        expect(res.text).not.toContain('127.0.0.1');
        expect(errorOf(res).message).toContain(res.headers.get('x-request-id') ?? 'request id');
      }
    });

    it('a CLI that exits 7 after printing a secret on stderr: a generic 502 with the request id', async () => {
      gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
      for (const stream of [false, true]) {
        const res = await post(gateway, 'chat', { ...requestBody('chat', 'failing-cli', stream), fake: undefined });
        expect(res.status).toBe(502);
        expect(res.text).not.toContain(KEY);
        expect(res.text).not.toContain('db.internal');
        expect(errorOf(res).message).toMatch(/request id/);
      }
    });

    it('an upstream 4xx about the request itself is still passed on with its message', async () => {
      gateway = await startTestGateway(keyed(), { ORIGIN: up.origin });
      const res = await post(gateway, 'chat', requestBody('chat', 'km', false, { status: 400 }));
      expect(res.status).toBe(400);
      expect(errorOf(res).message).toContain('forced status 400');
    });
  });

  describe('issue-9: a capped answer (gateway.max_response_bytes) and error bodies read to a few KB', () => {
    it('a non-streamed answer over the cap is a 502, not booked; a stream of the same size passes', async () => {
      await start({ maxResponseBytes: 200_000 });
      for (const [endpoint, model] of [
        ['chat', 'vm'],
        ['responses', 'vm'],
        ['responses', 'om'],
        ['embeddings', 'vm'],
      ] as const) {
        const res = await post(gateway, endpoint, requestBody(endpoint, model, false, { body_bytes: 3_000_000 }));
        expect([endpoint, model, res.status]).toEqual([endpoint, model, 502]);
        expect(errorOf(res).message).toContain('gateway.max_response_bytes');
      }
      expect(health.unhealthy().size).toBe(0);
      const stream = await post(gateway, 'chat', requestBody('chat', 'vm', true, { chunks: 30, chunk_bytes: 100_000 }));
      expect(stream.text.length).toBeGreaterThan(3_000_000);
      expect(stream.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    });

    it('a 500 with a 30 MB body is answered at once from its first KB', async () => {
      await start();
      const started = Date.now();
      const res = await post(
        gateway,
        'chat',
        requestBody('chat', 'vm', false, { status: 500, body_bytes: 30_000_000 }),
      );
      expect(res.status).toBe(502);
      expect(Date.now() - started).toBeLessThan(2000);
    });
  });

  describe('/v1/embeddings, pooled like chat', () => {
    it('works with the openai client (base64 by default) through vLLM, Ollama (floats upstream, encoded by the gateway) and OpenAI-compatible providers', async () => {
      await start();
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const vectors: number[][] = [];
      for (const model of ['vm', 'om', 'cm']) {
        const res = await client.embeddings.create({ model, input: ['hello', 'world'] });
        expect(res.object).toBe('list');
        expect(res.data.map((d) => d.index)).toEqual([0, 1]);
        expect(res.data[0].embedding).toHaveLength(8);
        expect(res.usage.prompt_tokens).toBeGreaterThan(0);
        vectors.push(res.data[0].embedding);
        const floats = await client.embeddings.create({
          model,
          input: 'hello',
          encoding_format: 'float',
          dimensions: 4,
        });
        expect(floats.data[0].embedding).toHaveLength(4);
      }
      // The same text gives the same vector whatever the adapter (float32 precision).
      for (const v of vectors)
        expect(v.map((x) => Math.round(x * 1e4))).toEqual(vectors[0].map((x) => Math.round(x * 1e4)));
      expect(up.stats().lastRequest.om.body).toMatchObject({ encoding_format: 'float' });
    });

    it('takes a lease and queues like chat, fails over, and counts in /status', async () => {
      await start();
      const slow = post(gateway, 'embeddings', requestBody('embeddings', 'cm', false, { delay_ms: 400 }));
      await waitUntil(
        async () => (await inFlight(gateway, 'co')) === 1,
        2000,
        'the first embeddings request to hold the slot',
      );
      const queued = post(gateway, 'embeddings', requestBody('embeddings', 'cm', false));
      await waitUntil(
        async () => (await statusOf(gateway)).find((r) => r.id === 'co')?.queued === 1,
        2000,
        'the second to queue',
      );
      const [a, b] = await Promise.all([slow, queued]);
      expect([a.status, b.status]).toEqual([200, 200]);
      expect(Number(b.headers.get('x-iop-queue-wait-ms'))).toBeGreaterThan(100);
      const pooled = await post(gateway, 'embeddings', requestBody('embeddings', 'pm', false));
      expect(pooled.status).toBe(200);
      expect(pooled.headers.get('x-iop-resource')).toBe('pb');
      expect(await inFlight(gateway, 'co')).toBe(0);
    });

    it('answers 400 naming the endpoint for a CLI model', async () => {
      await start();
      const res = await post(gateway, 'embeddings', { model: 'echo', input: 'x' });
      expect(res.status).toBe(400);
      expect(errorOf(res).message).toContain('/v1/embeddings');
      const bad = await post(gateway, 'embeddings', { model: 'vm' });
      expect(bad.status).toBe(400);
      expect(errorOf(bad).param).toBe('input');
    });
  });

  describe('Responses streams end the Responses way', () => {
    it.each([
      ['passed through (vLLM)', 'vm'],
      ['translated (Ollama)', 'om'],
    ])(
      'a stream failing mid-way (%s) ends with response.failed and error, numbered on, never a chat-style error',
      async (_what, model) => {
        await start();
        const res = await post(
          gateway,
          'responses',
          requestBody('responses', model, true, { chunks: 4, cut_after: 2 }),
        );
        const all = events(res.text);
        const failed = all.at(-2)!;
        const error = all.at(-1)!;
        expect(failed).toMatchObject({
          event: 'response.failed',
          data: { type: 'response.failed', response: { status: 'failed', error: { code: 'upstream_error' } } },
        });
        expect(error).toMatchObject({ event: 'error', data: { type: 'error', code: 'upstream_error' } });
        const numbers = all.map((e) => (e.data as { sequence_number?: number }).sequence_number);
        expect(numbers).toEqual(numbers.map((_n, i) => numbers[0]! + i));
        expect((failed.data as { response: { id: string } }).response.id).toBe(
          (all[0].data as { response: { id: string } }).response.id,
        );
        expect(res.text).not.toMatch(/^data: \{"error"/m);
      },
    );

    it('the openai client sees the failure as events it can report', async () => {
      await start();
      const client = new OpenAI({ baseURL: gateway.baseURL, apiKey: 'x', maxRetries: 0 });
      const stream = await client.responses.create({
        model: 'om',
        input: 'hi',
        stream: true,
        fake: { chunks: 4, cut_after: 2 },
      } as never);
      const types: string[] = [];
      for await (const event of stream as unknown as AsyncIterable<{ type: string }>) types.push(event.type);
      expect(types.slice(-2)).toEqual(['response.failed', 'error']);
      expect(types).not.toContain('response.completed');
    });
  });

  describe('a 401', () => {
    it('carries WWW-Authenticate: Bearer', async () => {
      await start({ apiKeys: ['client-key'] });
      for (const endpoint of ['chat', 'responses', 'embeddings'] as const) {
        const res = await post(gateway, endpoint, requestBody(endpoint, 'vm', false));
        expect(res.status).toBe(401);
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
      }
      const ok = await post(gateway, 'chat', requestBody('chat', 'vm', false), { authorization: 'Bearer client-key' });
      expect(ok.status).toBe(200);
    });
  });
});
